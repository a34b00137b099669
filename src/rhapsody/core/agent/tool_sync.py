"""Taking in the tools that tool sources (MCP servers) offer, between turns.

The request's tools change only when a source's did, so the cached prefix holds otherwise;
a session resumed without a source keeps the tools it offered (core/toolbox/orchestrator.py answers their
calls as unavailable).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from rhapsody.core.events import Notice
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.orchestrator import Toolbox
from rhapsody.core.session import records as rec


async def sync_tools(session: Session, toolbox: Toolbox) -> AsyncGenerator[Notice, None]:
    """Take in tools that arrived since the last turn; the spec changes only when they did."""
    for text in await toolbox.refresh():
        session.append(rec.NoticeShown(text=text))
        yield Notice(text)
    if toolbox.sources and toolbox.specs() != session.spec.tools:
        session.set_tools(toolbox.specs())
