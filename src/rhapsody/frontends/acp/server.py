"""The protocol's agent side: sessions, prompts, permission questions, cancel and modes.

One `Live` per session: a rhapsody agent built by the CLI's opener (the settings, trust rules,
sandbox, checkpoints and history exactly as the app gets them), its question queue served as
`session/request_permission`, and the turn running, if any. The session id is rhapsody's own, so
`session/load` with it resumes that history. Protocol choices where rhapsody asks more than the
protocol carries are documented in docs/editors.md (a denial's reason, a prompt sent while a turn
runs).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from acp import PROTOCOL_VERSION, RequestError
from acp.helpers import update_available_commands, update_current_mode
from acp.interfaces import Client
from acp.schema import (AgentCapabilities, ClientCapabilities, Implementation, InitializeResponse, McpCapabilities,
                        ListSessionsResponse, LoadSessionResponse, NewSessionResponse, PromptCapabilities,
                        PromptResponse, SessionCapabilities, SessionListCapabilities, SessionMode, SessionModeState,
                        SetSessionModeResponse, StopReason)

from rhapsody.commands.trust import start_notices
from rhapsody.config.settings import McpServer, Settings
from rhapsody.core import events as ev
from rhapsody.core.session import records as rec
from rhapsody.core.agent import ops
from rhapsody.core.toolbox.approval import HumanApprover
from rhapsody.core.errors import HistoryError, RhapsodyError
from rhapsody.core.session.history import discard_if_empty
from rhapsody.core.agent.loop import Agent
from rhapsody.core.access.permissions import MODES, mode_named
from rhapsody.core.toolbox.protocol import PlanReview
from rhapsody.frontends.acp.files import ClientFiles, offered
from rhapsody.frontends.acp.listing import listed
from rhapsody.frontends.acp.servers import client_servers
from rhapsody.frontends.acp.prompts import available_commands, prompt_text
from rhapsody.frontends.acp.questions import permission, plan_review
from rhapsody.frontends.acp.surface import EditorSurface
from rhapsody.frontends.controller import Controller, plan_answer
from rhapsody.frontends.acp.updates import STOPS, CallBook, Update, event_updates, replayed, said

MODE_NAMES = {"read-only": "Read only", "plan": "Plan", "ask": "Ask", "auto-edit": "Auto-edit", "yolo": "Yolo"}


class Opened(Protocol):
    """A built agent, as the CLI's opener returns it (the wiring)."""

    agent: Agent
    settings: Settings

    async def close(self) -> None:
        """Stop what the agent's tool sources started."""


Opener = Callable[[Path, "str | None", HumanApprover, "dict[str, McpServer]"], Opened]
"""Builds the agent for a project (a session id: resume it), asking its questions through the approver, with
the MCP servers the client passed beside the user's and the project's."""


@dataclass
class Live:
    """One session: its agent, its questions, its running turn."""

    opened: Opened
    calls: CallBook
    surface: EditorSurface
    """The controller's effects for this session; its `work` is what a prompt waits on."""
    controller: Controller
    """What a prompt's text means, decided as for a line typed in the app."""
    pump: asyncio.Task[None] | None = None
    """Reads the agent's one event queue for as long as the session lives."""
    stop: StopReason = "end_turn"
    """The stop reason of the work under way, so far."""
    open_calls: list[str] = field(default_factory=list)
    """Ids of the calls started and not finished: a question is about the last of them."""
    asking: set[asyncio.Future[None]] = field(default_factory=set)
    """The questions (a permission, a plan) the client is answering now."""
    sending: set[asyncio.Task[None]] = field(default_factory=set)
    """Updates to send once the answer being built has gone (held so they are not collected first)."""

    def ask(self, question: Coroutine[Any, Any, None]) -> None:
        """Put one question to the client beside the pump, held until answered (an interruption cancels it)."""
        asking = asyncio.ensure_future(question)
        self.asking.add(asking)
        asking.add_done_callback(self.asking.discard)

    @property
    def agent(self) -> Agent:
        """The session's agent."""
        return self.opened.agent

    @property
    def id(self) -> str:
        """The session id, rhapsody's own."""
        return self.agent.session.id


class RhapsodyAcp:
    """The protocol's `Agent`: every method the SDK routes to, on rhapsody's loop."""

    def __init__(self, opener: Opener) -> None:
        self.opener = opener
        self.client: Client | None = None
        self.capabilities = ClientCapabilities()
        self.sessions: dict[str, Live] = {}

    def on_connect(self, conn: Client) -> None:
        """The connection to the client, for updates and questions."""
        self.client = conn

    async def initialize(self, protocol_version: int, client_capabilities: ClientCapabilities | None = None,
                         client_info: Implementation | None = None, **kwargs: Any) -> InitializeResponse:
        """Agree on the version; say what rhapsody offers."""
        from rhapsody import __version__

        self.capabilities = client_capabilities or ClientCapabilities()
        capabilities = AgentCapabilities(load_session=True, session_capabilities=SessionCapabilities(
                                             list=SessionListCapabilities()),
                                         prompt_capabilities=PromptCapabilities(image=False, embedded_context=True),
                                         mcp_capabilities=McpCapabilities(http=True, sse=False))
        return InitializeResponse(protocol_version=min(protocol_version, PROTOCOL_VERSION),
                                  agent_capabilities=capabilities,
                                  agent_info=Implementation(name="rhapsody", title="rhapsody", version=__version__))

    async def new_session(self, cwd: str, mcp_servers: list[Any] | None = None, **kwargs: Any) -> NewSessionResponse:
        """A new rhapsody session in the project at `cwd`."""
        live = self._open(cwd, None, mcp_servers)
        return NewSessionResponse(session_id=live.id, modes=self._modes(live))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None,
                           **kwargs: Any) -> LoadSessionResponse:
        """Resume a rhapsody session: its history replayed as updates, then the answer."""
        live = self.sessions.get(session_id) or self._open(cwd, session_id, mcp_servers)
        for update in replayed(live.agent.session.records, live.agent.session.root):
            await self._send(live, update)
        return LoadSessionResponse(modes=self._modes(live))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None,
                            **kwargs: Any) -> ListSessionsResponse:
        """The project's sessions with a turn, newest first (each loads with `session/load`)."""
        root = Path(cwd or ".").expanduser()
        if not root.is_absolute() or not root.is_dir():
            raise RequestError.invalid_params({"cwd": cwd, "reason": "not an absolute path to a directory"})
        return listed(root.resolve(), cursor)

    async def set_session_mode(self, mode_id: str, session_id: str, **kwargs: Any) -> SetSessionModeResponse:
        """The permission mode, as `/permissions MODE` sets it."""
        live = self._live(session_id)
        mode = mode_named(mode_id)
        if mode is None:
            raise RequestError.invalid_params({"modeId": mode_id, "modes": list(MODES)})
        live.agent.submit(ops.SetMode(mode=mode))
        return SetSessionModeResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        """Stop the running turn as Esc does; its prompt answers `cancelled`."""
        live = self.sessions.get(session_id)
        if live is not None:
            live.agent.submit(ops.Interrupt())

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        """The prompt as a line typed in the app (frontends/controller.py): a `!command`, a slash command, a
        hint while a turn runs (answered when that turn ends, with its stop reason), or a new turn."""
        live = self._live(session_id)
        mode = live.agent.permission_mode
        await live.controller.line(prompt_text(prompt, live.agent.session.root))
        if live.agent.permission_mode != mode:
            await self._send(live, update_current_mode(live.agent.permission_mode))
        work = live.surface.work
        if work is None or work.done():  # nothing began, nothing runs: a command's answer, already sent
            return PromptResponse(stop_reason="end_turn")
        return PromptResponse(stop_reason=await asyncio.shield(work))

    async def _pump(self, live: Live) -> None:
        """Every event of the agent's one queue, as updates; a question as a permission request; `Idle` ends
        the prompt that waits."""
        async with aclosing(live.agent.events()) as events:
            async for event in events:
                try:
                    await self._dispatch(live, event)
                except Exception:  # noqa: BLE001 - one event's update failing must not leave every prompt waiting
                    logging.exception("an update could not be sent")

    async def _dispatch(self, live: Live, event: ev.Event) -> None:
        """One event of the agent's queue, to the client, and what the updates and the prompt's answer need
        from it: the calls open, how the work ended so far."""
        match event:
            case ev.ApprovalAsked():
                live.ask(self._ask(live, event))
            case ev.PlanReviewAsked():
                live.ask(self._review(live, event))
            case ev.Idle():
                work = live.surface.work
                if work is not None and not work.done():
                    work.set_result(live.stop)
                live.stop = "end_turn"
            case ev.ShellRan():
                await self._send(live, said(f"! {event.command} → exit {event.exit_code}\n```\n"
                                            f"{event.output.rstrip()}\n```\n[{event.hint_id} queued: {event.read_when}]"))
            case ev.ToolStarted(call=call):
                live.open_calls.append(call.id)
                await self._updates(live, event)
            case ev.ToolFinished(call=call):
                if call.id in live.open_calls:
                    live.open_calls.remove(call.id)
                await self._updates(live, event)
            case ev.TurnEnded(stop_reason=reason):
                live.stop = STOPS.get(reason or "end_turn", "end_turn")  # type: ignore[assignment]
            case ev.Interrupted():
                live.stop = "cancelled"
                for asking in live.asking:  # the question was dropped with the turn: the client's dialog is moot
                    asking.cancel()
                await self._updates(live, event)
            case _:  # every other event is the update mapping's, whose own match is exhaustive (updates.py)
                for update in event_updates(event, live.calls):
                    await self._send(live, update)

    async def _updates(self, live: Live, event: ev.Event) -> None:
        """The updates an event sends, to the client."""
        for update in event_updates(event, live.calls):
            await self._send(live, update)

    # -- sessions ----------------------------------------------------------------------------

    def _open(self, cwd: str, resume: str | None, mcp_servers: list[Any] | None) -> Live:
        root = Path(cwd).expanduser()
        if not root.is_absolute() or not root.is_dir():
            raise RequestError.invalid_params({"cwd": cwd, "reason": "not an absolute path to a directory"})
        servers, left_out = client_servers(mcp_servers)
        try:
            opened = self.opener(root.resolve(), resume, HumanApprover(), servers)
        except HistoryError as exc:  # no such session to load (or its history cannot be read)
            raise RequestError(-32002, "Resource not found", {"sessionId": resume, "details": str(exc)}) from None
        except RhapsodyError as exc:  # a setting, the key, the provider: the one line the CLI would print
            raise RequestError.internal_error({"details": str(exc)}) from None
        assert self.client is not None
        surface = EditorSurface(opened.agent, self.client, opened.agent.session.id, lambda u: self._send(live, u))
        live = Live(opened, CallBook(opened.agent.session.root), surface, Controller(opened.agent, surface))
        self.sessions[live.id] = live
        live.pump = asyncio.create_task(self._pump(live))
        if self.client is not None and offered(self.capabilities):
            opened.agent.edit_files_with(ClientFiles(self.client, live.id))
        # Sent once the answer is on its way: a client learns of the session from the answer.
        for notice in [*start_notices(live.agent.session.root, opened.settings.sandbox), *left_out,
                       *opened.agent.start_sources()]:  # stderr is no one's screen in an editor
            self._soon(live, said(f"! {notice}"))
        self._soon(live, update_available_commands(available_commands(live.agent.session.root)))
        return live

    def _soon(self, live: Live, update: Any) -> None:
        """Send `update` after the answer being built (the task is held until it is sent)."""
        task = asyncio.get_running_loop().create_task(self._send(live, update))
        live.sending.add(task)
        task.add_done_callback(live.sending.discard)

    def _live(self, session_id: str) -> Live:
        live = self.sessions.get(session_id)
        if live is None:
            raise RequestError.invalid_params({"sessionId": session_id, "reason": "no such session (new or load it first)"})
        return live

    def _modes(self, live: Live) -> SessionModeState:
        return SessionModeState(current_mode_id=live.agent.permission_mode,
                                available_modes=[SessionMode(id=m, name=MODE_NAMES.get(m, m)) for m in MODES])

    async def _send(self, live: Live, update: Update | Any) -> None:
        """One session update; dropped once the client is gone (nobody is left to tell, the history has it)."""
        assert self.client is not None
        try:
            await self.client.session_update(session_id=live.id, update=update)
        except ConnectionError:
            pass

    async def close(self) -> None:
        """Stop every session's turn and questions, then what their tools started."""
        for live in self.sessions.values():
            live.agent.submit(ops.Interrupt())
            running = live.agent.work.task
            if running is not None:
                await asyncio.gather(running, return_exceptions=True)
            if live.pump is not None:
                live.pump.cancel()
                await asyncio.gather(live.pump, return_exceptions=True)
            await live.opened.close()
            session = live.agent.session
            if rec.first(session.records, rec.MessageAdded) is None:  # opened, never prompted: as the app
                session.writer.close()
                discard_if_empty(session.path)

    # -- questions ---------------------------------------------------------------------------

    async def _ask(self, live: Live, question: ev.ApprovalAsked) -> None:
        """One question as `session/request_permission`; the client's answer back as an `ApprovalAnswer`."""
        assert self.client is not None
        call_id = live.open_calls[-1] if live.open_calls else f"ask-{question.id}"
        try:
            answer = await permission(self.client, live.id, question, call_id, live.agent.session.root)
        except RequestError as exc:  # a client that cannot answer: the call is denied, never run unasked
            live.agent.submit(ops.ApprovalAnswer(id=question.id, decision="deny"))
            await self._send(live, said(f"! the client did not answer the question: {exc}"))
            return
        live.agent.submit(answer)

    async def _review(self, live: Live, asked: ev.PlanReviewAsked) -> None:
        """exit_plan's plan, asked of the client, its answer back as a `PlanAnswer`; the mode it approves into is
        the session's mode then."""
        assert self.client is not None
        call_id = live.open_calls[-1] if live.open_calls else "plan"
        try:
            review = await plan_review(self.client, live.id, asked.plan, call_id)
        except RequestError as exc:  # a client that cannot answer: the plan is rejected, never approved unasked
            live.agent.submit(plan_answer(asked.id, PlanReview(False)))
            await self._send(live, said(f"! the client did not answer the plan: {exc}"))
            return
        live.agent.submit(plan_answer(asked.id, review))
        if review.approved:
            await self._send(live, update_current_mode(review.mode))
