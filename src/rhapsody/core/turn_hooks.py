"""The hooks the loop fires within a turn, and the notices hooks leave for the front ends.

PreHandoff and PostHandoff are fired here, and each hook with the session's payload (`fire`, which builds
it only when a hook listens);
the tool events (PreToolUse, PostToolUse, Notification) are the toolbox's (core/tools.py).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from rhapsody.core import handoff_state
from rhapsody.core.events import Notice
from rhapsody.core.handoff_state import NoteWritten
from rhapsody.core.hooks import NOTHING, HookVerdict, payload
from rhapsody.core.messages import Block, TextBlock
from rhapsody.core.session import Session
from rhapsody.core.tools import Toolbox


async def fire(session: Session, toolbox: Toolbox, event: str, **fields: object) -> HookVerdict:
    """Run the user's hooks for `event`, with the session's payload (none listening: nothing is built)."""
    if not toolbox.hooks.wants(event):
        return NOTHING
    return await toolbox.hooks.fire(session, event, payload(session, event, toolbox.permission_mode, **fields))


def hook_notices(toolbox: Toolbox) -> list[Notice]:
    """What the hooks said for the human since last asked."""
    return [Notice(line) for line in toolbox.hooks.notices()]


async def ask_handoff(session: Session, toolbox: Toolbox, request: str, interrupted_work: bool) -> list[Block]:
    """Ask the model for its field note: the request, and what PreHandoff hooks add."""
    handoff_state.ask(session, interrupted_work)
    verdict = await fire(session, toolbox, "PreHandoff", interrupted_work=interrupted_work)
    extra: list[Block] = [TextBlock(text=verdict.context)] if verdict.context.strip() else []
    return [TextBlock(text=request), *extra]


async def note_written(session: Session, toolbox: Toolbox, outcome: NoteWritten) -> None:
    """The field note is saved: the handoff moves on, and PostHandoff hooks get the note."""
    handoff_state.noted(session, outcome)
    path = session.root / outcome.note_path
    await fire(session, toolbox, "PostHandoff", note_path=str(path), note=outcome.note, seam=outcome.seam)
