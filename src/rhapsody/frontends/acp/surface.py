"""The shared controller's `Surface` for one editor session: what a typed line's effects are over the protocol.

A line the editor sends goes through frontends/controller.py as a line typed in the app does (a
`!command`, a slash command, a hint while the agent works, a new turn). Its notes are agent text,
kept in the history; the work it starts is a future the prompt waits on, resolved at the agent's
`Idle`; a command's yes/no question (a seam that would not pay) is a permission request.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable

from acp import text_block, tool_content
from acp.interfaces import Client
from acp.schema import PermissionOption, StopReason, ToolCallUpdate

from rhapsody.commands.slash import Outcome
from rhapsody.core.agent import ops
from rhapsody.core.agent.loop import Agent
from rhapsody.frontends.acp.updates import said
from rhapsody.frontends.controller import NoteKind

YES_NO = [PermissionOption(option_id="yes", name="Yes", kind="allow_once"),
          PermissionOption(option_id="no", name="No", kind="reject_once")]
_asked = itertools.count(1)


class EditorSurface:
    """Effects of the controller for one session; `work` is the future of the work under way."""

    def __init__(self, agent: Agent, client: Client, session_id: str,
                 send: Callable[[object], Awaitable[None]]) -> None:
        self.agent = agent
        self.client = client
        self.session_id = session_id
        self.send = send
        self.work: asyncio.Future[StopReason] | None = None
        """Resolved with the stop reason when the work under way goes idle (the pump resolves it)."""

    async def note(self, text: str, kind: NoteKind) -> object:
        """A line for the human, kept in the history; a command the human sent is already on their screen."""
        self.agent.submit(ops.AddNotice(text=text, error=kind == "error", command=kind == "command"))
        if kind != "command":
            await self.send(said(text))
        return None

    async def hinted(self, receipt: ops.Receipt, text: str, mode: str) -> None:
        """A hint pending: the prompt that sent it is answered when the work under way ends."""

    async def work_began(self, op: ops.Op) -> None:
        """Work began: a new future for the prompt to wait on."""
        self.work = asyncio.get_running_loop().create_future()

    async def reload(self) -> None:
        """The history changed (a seam undone, a rewind): the client's thread keeps what it showed."""

    async def in_history(self, text: str) -> None:
        """A command's answer already on record: shown."""
        await self.send(said(text))

    async def confirm(self, outcome: Outcome, then: Callable[[bool], Awaitable[None]]) -> None:
        """The command's yes/no question as a permission request showing its figures."""
        call = ToolCallUpdate(tool_call_id=f"confirm-{next(_asked)}", title=outcome.confirm, kind="other",
                              status="pending", content=[tool_content(text_block(outcome.text))])
        answer = await self.client.request_permission(session_id=self.session_id, tool_call=call, options=YES_NO)
        await then(getattr(answer.outcome, "option_id", "") == "yes")

    def refill(self, text: str) -> None:
        """Text for the prompt (a rewound message): the editor's prompt is its own, so it is said instead."""
        asyncio.ensure_future(self.send(said(f"to send it again:\n\n{text}")))

    def quit(self) -> None:
        """Nothing: the editor closes sessions itself (/quit is not offered)."""
