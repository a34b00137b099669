"""The Textual app: streaming narration, a live hint box, the handoff key, a truthful status bar.

The agent loop runs in an async worker on the app's event loop; each event becomes lines
through the one renderer (`rhapsody.view.render`) and is applied to the transcript as it
arrives. The input never locks: Enter while the agent works sends a hint for the next tool
boundary, ctrl+n queues a message for the end of the turn.

| Key | Action |
| :- | :- |
| enter | Send (hint while working, new turn while idle) |
| ctrl+n | Queue for the end of the turn |
| ctrl+o | Micro-handoff |
| escape, ctrl+c | Interrupt the working agent (what streamed stays, marked interrupted) |
| escape escape | Idle: clear the prompt (Up brings it back); on an empty prompt, rewind (as `/rewind`) |
| shift+tab | Cycle the permission mode: ask, auto-edit, read-only, plan (never into yolo) |
| ctrl+t | Move into the transcript (tab comes back) |
| ctrl+g | Edit the prompt in $VISUAL or $EDITOR |
| pageup, pagedown | Scroll the transcript |
| ctrl+l | Show earlier transcript entries (ctrl+u, ctrl+k, ctrl+w edit the prompt as in readline) |
| ctrl+p | Command palette |
| ctrl+c | Idle: clear the prompt; on an empty prompt, twice quits |
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, assert_never, cast

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Button, Footer, Static
from textual.widget import Widget
from textual.worker import Worker

from rhapsody.frontends.app.deferred import lazy, load_all
from rhapsody.frontends.hangup import STATUS as HANGUP_STATUS, Hangup
from rhapsody.frontends.prompt_aids import InputHistory
from rhapsody.frontends.app.rewind import Rewinder
from rhapsody.frontends.app.status import (
    MODEL_WAIT,
    Liveness,
    starting_text,
    status_line,
    welcome_text,
)
from rhapsody.frontends.app.widgets import Entry, Foldable, PromptInput, StatusBar, TranscriptView
from rhapsody.view.sink import visible

if TYPE_CHECKING:
    from rhapsody.commands import slash as commands
    from rhapsody.commands.custom import CustomCommand
    from rhapsody.view import render
    from rhapsody.config.settings import Settings
    from rhapsody.core import events as ev
    from rhapsody.core.session import records as rec
    from rhapsody.core.toolbox.approval import HumanApprover
    from rhapsody.core.agent import ops
    from rhapsody.core.toolbox.approval import Approval
    from rhapsody.core.agent.loop import Agent
    from rhapsody.frontends import controller as control
    from rhapsody.core.session.messages import ToolUseBlock
    from rhapsody.core.toolbox.protocol import PlanReview
else:  # loaded on first use, after the first frame (pydantic and the core are most of the start-up)
    commands = lazy("rhapsody.commands.slash")
    render = lazy("rhapsody.view.render")
    ev = lazy("rhapsody.core.events")
    rec = lazy("rhapsody.core.session.records")
    ops = lazy("rhapsody.core.agent.ops")
    control = lazy("rhapsody.frontends.controller")

T = TypeVar("T")

ESC_TWICE = 0.8
"""Seconds within which a second Esc clears the input."""

TODO_WIDTH = 26
"""Columns of the todo panel beside the transcript (app.tcss `#todo`): 54 stay for the transcript at 80."""

PALETTE_MARGIN = 6
"""Columns of the command palette's width that its descriptions cannot use (padding, scrollbar)."""

Boot = Callable[[], "tuple[Agent, Settings, HumanApprover | None]"]
"""Builds the agent after the first frame: reads the settings, opens the session, wires the tools."""


class RhapsodyApp(App[int]):
    """rhapsody's full-screen front end."""

    CSS_PATH = "app.tcss"
    AUTO_FOCUS = "#prompt"
    TITLE = "rhapsody"
    BINDINGS = [
        Binding("ctrl+o", "handoff", "Handoff", id="handoff", priority=True),
        Binding("escape", "interrupt", "Interrupt", id="interrupt"),
        Binding("escape", "escape_idle", "Clear", id="clear", tooltip="Press twice to clear the input"),
        Binding("shift+tab", "cycle_mode", "Mode", id="mode", priority=True, show=False),
        Binding("ctrl+t", "to_transcript", "Transcript", id="transcript", show=False),
        Binding("ctrl+g", "edit_prompt", "Editor", id="editor", priority=True, show=False),
        Binding("ctrl+n", "noop", "Queue", id="queue", show=True, tooltip="Queue the message for the end of the turn"),
        Binding("ctrl+j", "noop", "New line", id="newline", show=False),
        Binding("ctrl+l", "earlier", "Earlier", id="earlier", priority=True, show=False),
        Binding("ctrl+c", "stop", "Interrupt", id="stop", priority=True, tooltip="Stop the agent"),
        Binding("ctrl+c", "clear_or_quit", "Quit", id="quit", priority=True,
                tooltip="Clear the prompt; on an empty prompt, press twice to quit"),
    ]

    def __init__(self, agent: Agent | None = None, settings: Settings | None = None,
                 approver: HumanApprover | None = None, initial: str = "", welcome: str = "", *,
                 boot: Boot | None = None, root: Path | None = None, typed_ahead: tuple[str, ...] = (),
                 hangup: Hangup | None = None) -> None:
        """Either `agent` and `settings`, ready; or `boot` and `root`: the app paints first and calls `boot`
        right after its first frame. `approver` is the one the agent's toolbox asks (None: questions are
        refused, as headless). A `boot` that raises ends the app; the exception is kept in `boot_error`.
        `typed_ahead`: lines the person typed and sent with Enter before the app started; they are sent
        once the session exists, together, as the first message. `hangup`: what to do when the terminal goes
        (frontends/hangup.py); the app then writes through a driver that a dead terminal cannot wedge."""
        if hangup is not None and sys.platform != "win32":
            from rhapsody.frontends.app.driver import GuardedDriver

            super().__init__(driver_class=GuardedDriver)
        else:
            super().__init__()
        self.hangup = hangup
        self.agent: Agent
        self.settings: Settings
        if agent is not None and settings is not None:
            self.agent, self.settings = agent, settings
            self.root = agent.session.root
        elif boot is not None and root is not None:
            self.root = root
        else:
            raise ValueError("RhapsodyApp needs agent and settings, or boot and root")
        self._boot = boot if agent is None else None
        self.ready = self._boot is None
        if self.ready:  # no paint until the session shows: the first one lands on the early frame's cells (cli.py)
            self._begin_batch()
        self.boot_error: Exception | None = None
        self._early = [PromptInput.Submitted("\n".join(typed_ahead), queue=False)] if typed_ahead else []
        if typed_ahead:  # what was typed ahead is the first message: a suggested one (the demo's task) steps aside
            initial = ""
        self.approver = approver
        """The agent's approver; the app takes only its grace period from it (questions come as events)."""
        self.asking: tuple[ev.ApprovalAsked, Widget] | None = None
        """The question open in its panel, and the panel."""
        self.controller: control.Controller | None = None
        self.initial = initial
        self.welcome = welcome
        self.hints: dict[str, Entry] = {}
        self.calls: dict[str, tuple[ToolUseBlock, Entry]] = {}
        self.subagents: dict[str, tuple[str, Entry]] = {}
        """Running sub-agents by id: the line that started each, and its live entry."""
        self.worker: Worker[None] | None = None
        self.live = Liveness()
        self._rebuilt_to = 0
        """The last history record the transcript was rebuilt from: what live events say of records up to it is drawn
        already."""
        self.shells: dict[str, Entry] = {}
        """The human's `!command`s running, by command: their line changes in place once they ran."""
        self._thinking: Entry | None = None
        self._ctrl_c_at = 0.0
        self._esc_at = 0.0
        self.signalled: list[str] = []
        """What was written to the terminal to say the agent waits (the bell or a notification)."""
        self._replying = False
        self._held: list[ops.AddNotice] = []
        self._git = ""
        self._cold = False
        self._typed: str | None = None
        """The status bar last showed the cache cold (repainted when it goes cold while idle)."""
        self.rewinder = Rewinder(self)
        self._palette_custom: tuple[weakref.ref[Screen[Any]], list[CustomCommand]] | None = None
        """The custom commands as read for the screen on top (the open palette, which asks on every key)."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield TranscriptView(id="transcript")
            yield Static("", id="todo", classes="hidden")
        yield Static("", id="completions", classes="hidden")
        yield PromptInput(self.initial, id="prompt", soft_wrap=True, show_line_numbers=False)
        yield StatusBar("", id="status")
        yield Footer()

    async def on_mount(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):  # leave as ctrl+c does: the terminal restored, history closed
            if sig != signal.SIGHUP or self.hangup is None:  # the hangup's own handler runs even on a stuck loop
                loop.add_signal_handler(sig, self.terminated, sig)
        if self.hangup is not None:
            self.hangup.arm(loop, self.hang_up)
        prompt = self.query_one(PromptInput)
        prompt.inputs = InputHistory(self.root)
        prompt.root = self.root
        prompt.move_cursor(prompt.document.end)
        prompt.focus()
        if self._boot is None:
            await self.started()
            self.call_after_refresh(self.show_first)
            await self.send_early()
            return
        await self.transcript.load([Entry("welcome", starting_text(self.root))])
        self.query_one(StatusBar).update(Text(" starting…"))
        self.call_after_refresh(self.run_boot)  # the first frame is drawn before the session is built

    def terminated(self, sig: int) -> None:
        """SIGTERM or SIGHUP: end as ctrl+c does, with the shell's status for a signal."""
        self.exit(return_code=128 + sig)

    async def hang_up(self) -> None:
        """The terminal is gone (frontends/hangup.py): the turn stops as Esc stops it, which records what was
        interrupted, an open question goes with it, and the app ends; nothing new starts."""
        from textual.worker import WorkerCancelled, WorkerFailed

        worker = self.worker
        if worker is not None and not worker.is_finished:
            self.agent.submit(ops.Interrupt())
            await self.agent.settled()  # the turn recorded what was interrupted; the worker reads it to Idle
            try:
                await worker.wait()
            except (WorkerCancelled, WorkerFailed):
                pass
        self.exit(return_code=HANGUP_STATUS)

    @property
    def hung_up(self) -> bool:
        """Whether the terminal went away."""
        return self.hangup is not None and self.hangup.fired

    async def run_boot(self) -> None:
        """Build the agent (keys typed meanwhile wait in the queue), then start as a ready app would."""
        assert self._boot is not None
        if self.hung_up:  # gone before the session was built: build none
            return
        try:
            self.agent, self.settings, self.approver = self._boot()
        except Exception as exc:  # noqa: BLE001 - the CLI prints it as its one line once the screen is restored
            self.boot_error = exc
            self.exit(return_code=2)
            return
        if self.hung_up:  # gone while it was built: the session exists, and nothing starts in it
            return
        self.ready = True
        await self.started()
        await self.send_early()

    def show_first(self) -> None:
        """The session is laid out: paint, for the first time."""
        self._end_batch()
        self.screen.refresh()

    async def send_early(self) -> None:
        """What was typed ahead of the session, sent now: in the order typed."""
        for message in self._early:
            await self.submitted(message)
        self._early = []

    async def started(self) -> None:
        """The agent exists: show the session, start the MCP servers, the status bar and the SDK import."""
        load_all()  # the rest of the lazy modules, here rather than on the SDK's import thread
        self.controller = control.Controller(self.agent, self)
        if self.settings.keymap:
            self.set_keymap(self.settings.keymap)
        await self.reload()
        for notice in self.agent.start_sources():  # MCP servers start now; the first paint does not wait
            await self.note(f"! {notice}")
        self.refresh_status()
        self.refresh_git()
        self.set_interval(0.125, self.tick)
        warm = getattr(self.agent.model, "warm", None)
        if warm is not None:  # the SDK imports while the human reads the first frame
            thread = threading.Thread(target=warm, name="sdk-import", daemon=True)
            self.set_timer(0.1, thread.start)  # after the first frame, which it would otherwise slow

    @property
    def transcript(self) -> TranscriptView:
        """The transcript widget."""
        return self.query_one(TranscriptView)

    @property
    def peek_rows(self) -> tuple[int, int]:
        """Lines of a tool result, and of an applied diff, shown under a call's folded line."""
        return (self.settings.result_lines, self.settings.diff_lines) if self.ready else (0, 0)

    @property
    def busy(self) -> bool:
        """Whether a turn is running."""
        return self.ready and self.agent.busy or (self.worker is not None and not self.worker.is_finished)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        """A toast, its words through the one sink's function and never read as markup (an error names a path)."""
        super().notify(visible(message), title=visible(title), severity=severity, timeout=timeout, markup=markup)

    def get_system_commands(self, screen: Screen[Any]) -> Any:
        """The command palette lists rhapsody's own commands first."""
        for name, help_text in commands.COMMANDS.items():
            head, _, rest = help_text.partition(": ")
            takes = bool(rest) and head.split()[0].strip("[]").isupper()
            short = rest if takes else f"{head} {rest}" if rest else help_text  # "[anyway] write…", no colon
            short = self.palette_line(short).replace("[", "\\[")  # the palette reads markup: `[FILE]` would vanish
            if takes and not head.startswith("["):  # a required argument: into the prompt to finish
                yield SystemCommand(name, short, lambda n=name: self.to_prompt(f"{n} "))
                continue
            yield SystemCommand(name, short, lambda n=name: self.run_worker(self.command(n)))
        yield from self.custom_commands()
        yield from super().get_system_commands(screen)

    def toast(self, message: str, **options: Any) -> None:
        """A short notice over the transcript's corner; it replaces the one before, so notices never stack."""
        self.clear_notifications()
        self.notify(message, **options)

    def palette_line(self, text: str) -> str:
        """`text` cut to one line of the command palette, as wide as it is."""
        room = max(24, self.size.width - PALETTE_MARGIN)
        return text if len(text) <= room else text[: room - 1].rstrip() + "…"

    def custom_commands(self) -> Iterator[SystemCommand]:
        """The palette's entries for custom commands: one that takes arguments goes into the prompt to finish."""
        for command in self.palette_custom():
            takes = bool(command.argument_hint) or "$" in command.prompt
            run = (lambda n=command.name: self.to_prompt(f"{n} ")) if takes else (
                lambda n=command.name: self.run_worker(self.command(n)))
            shown = self.palette_line(command.description or f"custom command ({command.origin})")
            yield SystemCommand(command.name, shown.replace("[", "\\["), run)

    def palette_custom(self) -> list[CustomCommand]:
        """The custom commands, read once per opening of the palette (the screen on top while it is open), though
        it asks for its entries on every key: a command file added while it is closed is in the next one."""
        held = self._palette_custom
        if held is None or held[0]() is not self.screen:
            from rhapsody.commands.custom import load

            held = (weakref.ref(self.screen), list(load(self.root, tuple(commands.COMMANDS))[0].values()))
            self._palette_custom = held
        return held[1]

    def to_prompt(self, text: str) -> None:
        """Put a command that needs an argument into the prompt."""
        prompt = self.query_one(PromptInput)
        prompt.text = text
        prompt.move_cursor(prompt.document.end)
        prompt.focus()

    # -- input -------------------------------------------------------------------------

    @on(PromptInput.Submitted)
    async def submitted(self, message: PromptInput.Submitted) -> None:
        self.transcript.anchor()  # whatever was sent, its result is seen: back to the bottom, and follow it
        if not self.ready:
            self._early.append(message)
            return
        text = message.text
        if commands.is_command(text):
            await self.command(text)
        else:
            assert self.controller is not None
            await self.controller.line(text, queued=message.queue)

    @on(PromptInput.Changed)
    def show_completions(self, event: PromptInput.Changed) -> None:
        box = self.query_one("#completions", Static)
        prompt = self.query_one(PromptInput)
        matches = prompt.suggestions()
        box.update(Text(visible("  ".join(matches)) + ("   (tab completes)" if matches else "")))  # project file names
        box.set_class(not matches, "hidden")

    async def reload(self) -> None:
        """Rebuild the transcript from history (the one renderer); command outputs are `notice` records, kept in place."""
        session = self.agent.session
        lines = render.record_lines(session.records, session.root, session.id, session.conversation)
        entries = [Entry.of(line) for _, line in lines if line.kind != "todo"]  # the list has its panel
        self.show_todos([i.model_dump() for i in session.todos.items()])
        if not entries:
            entries = [Entry("welcome", welcome_text(self.agent, self.settings, self.welcome))]
        self._rebuilt_to = session.records[-1].seq if session.records else 0
        if self._typed:  # typed and shown, its turn not yet begun: the checkpoint's seam came first
            entries.append(Entry("user", f"› {self._typed}"))
        await self.transcript.load(entries)
        self.hints = {e.key: e for e in entries if e.kind == "hint" and e.state == "pending"}

    async def drop_welcome(self) -> None:
        """The welcome leaves once the session starts."""
        for entry in [e for e in self.transcript.entries if e.kind == "welcome"]:
            await self.transcript.remove_entry(entry)

    async def note(self, text: str, kind: str = "notice") -> Widget:
        """Show a command's output (kind `command`: the command itself); a `notice` record keeps it in place
        on a rebuild and on --continue, drawn by the renderer from that record.

        The reply streaming now is recorded when it ends, so a notice said meanwhile is
        recorded after it, and shown pinned below it: the reply grows above the notice, as
        a rebuild from history shows them.
        """
        fields: dict[str, Any] = {"text": text, "shown": "as is", **({"error": True} if kind == "error" else {}),
                                  **({"command": True} if kind == "command" else {})}
        notice = ops.AddNotice(text=text, error=kind == "error", command=kind == "command")
        if self._replying:
            self._held.append(notice)
        else:
            self.agent.submit(notice)
        line = render.notice_line(rec.NoticeShown(**fields))
        shown = await self.transcript.add(Entry.of(line), pin=self._replying)
        if kind != "command":
            self.call_after_refresh(self.top_in_view, shown)  # a long answer (/help at 80x24) from its first line
        return shown

    def record_held(self) -> None:
        """Notices said while a reply streamed are recorded after it."""
        self._replying = False
        for notice in self._held:
            self.agent.submit(notice)
        self._held = []

    def top_in_view(self, widget: Widget) -> None:
        """An output taller than the transcript (/help at 80x24) is shown from its first line; PageDown reads on."""
        view = self.transcript
        if widget.is_mounted and widget.outer_size.height > view.scrollable_content_region.height:
            view.anchor(False)  # the next message sent anchors it to the bottom again
            view.scroll_to_widget(widget, top=True, animate=False, immediate=True)

    async def hinted(self, receipt: ops.Receipt, text: str, mode: str) -> None:
        """A hint (on disk already) shown as pending."""
        entry = Entry.of(render.pending_hint(receipt.id, text, mode))
        await self.transcript.add(entry)
        self.hints[receipt.id] = entry

    async def shell_ran(self, run: ev.ShellRan) -> None:
        """`!command` ran in the agent's sandbox: its output is shown, queued as the human's own words."""
        await self.drop_welcome()
        entry = self.shells.pop(run.command, None) or Entry("tool", "")
        code = f"exit {run.exit_code}" if run.exit_code is not None else "error"
        entry.text = f"! {run.command} → {code} · {run.hint_id} queued: the agent reads it with your next message"
        entry.body, entry.key, entry.state = run.output, run.hint_id, "exit" if run.exit_code is not None else "error"
        if entry not in self.transcript.entries:
            await self.transcript.add(entry)
        self.transcript.sync(entry)

    async def in_history(self, text: str) -> None:
        """A command's answer on record: the reload that came with it drew it."""

    def refill(self, text: str) -> None:
        """Put a rewound message back in the prompt."""
        self.to_prompt(text)

    def quit(self) -> None:
        """/quit."""
        self.exit(0)

    async def command(self, text: str, echo: bool = True) -> None:
        """Run a slash command and show what it said, below the command itself (`echo`: typed or chosen in the
        palette, not a key such as ctrl+o)."""
        if not self.ready:  # the palette or a key before the session is built
            return
        if text.strip() == "/rewind":  # the list to pick from; with arguments it runs as in plain mode
            await self.rewinder.open()
            return
        if text.strip() == "/resume" and not self.busy:  # the picker; with an id it runs as in plain mode
            self.pick_session()
            return
        assert self.controller is not None
        await self.controller.command(text, echo)
        self.refresh_status()

    def pick_session(self) -> None:
        """`/resume`: the project's other sessions to pick from; the one picked continues here."""
        from rhapsody.frontends.app.picker import PickerScreen

        async def picked(session: str | None) -> None:
            if session:
                await self.command(f"/resume {session}")

        self.push_screen(PickerScreen(self.agent.session.root, exclude=self.agent.session.id), callback=picked)

    async def confirm(self, outcome: commands.Outcome, then: Callable[[bool], Awaitable[None]]) -> None:
        """Ask the outcome's question in its screen; `then` gets the answer."""
        from rhapsody.frontends.app.confirm import ConfirmScreen

        async def answered(yes: bool | None) -> None:
            await then(bool(yes))

        self.push_screen(ConfirmScreen(outcome.text, outcome.confirm), callback=answered)

    # -- the agent worker ----------------------------------------------------------------

    def start_turn(self, text: str | None, typed: str | None = None) -> None:
        """Start one turn and read it in the agent worker (`typed`: the words of a custom command's prompt the
        human typed; none once the terminal is gone)."""
        op = ops.UserTurn(text=text or "", typed=typed)
        if not self.hung_up and self.agent.submit(op).started:
            self.worker = self.run_agent(op)

    async def work_began(self, op: ops.Op) -> None:
        """Work began (the controller submitted it): read it in the agent worker."""
        if isinstance(op, ops.ShellCommand):
            await self.drop_welcome()
            entry = Entry("tool", f"! {op.command} … running (yours: the agent reads the output with your next message)")
            self.shells[op.command] = entry
            await self.transcript.add(entry)
        if not self.hung_up:
            self.worker = self.run_agent(op)

    @work(exclusive=True, group="agent", exit_on_error=False)
    async def run_agent(self, op: ops.Op) -> None:
        """Apply each of the agent's events to the transcript until its work is over."""
        text = op.text if isinstance(op, ops.UserTurn) and op.text else None
        await self.drop_welcome()
        if text:
            await self.transcript.add(Entry("user", f"› {text}"))
        self._typed = text  # shown, not yet in the history while a seam goes first (a rebuild keeps it)
        began = time.monotonic()
        self.live.start("working")
        self.set_state("working")
        try:
            async for event in self.agent.events():
                match event:
                    case ev.Idle():
                        break
                    case _:
                        await self.apply(event)  # apply shows it through `show`, whose match is exhaustive
            if time.monotonic() - began > self.settings.notify_after:
                self.signal("turn_end", "rhapsody: the agent has finished and waits for you")
        except asyncio.CancelledError:
            self.agent.submit(ops.Interrupt())  # the app is closing: its work stops with it
            raise
        finally:
            await self.close_question()
            self.record_held()
            self.transcript.unpin()
            self.live.stop()
            self.set_state("idle")
            self.refresh_git()

    async def interrupted(self) -> None:
        """Esc: close the live reply, mark running calls interrupted, say so."""
        await self.transcript.end_text()
        for call, entry in self.calls.values():
            line = render.tool_line(render.ToolView(call, "interrupted"))
            entry.text, entry.state = line.text, line.state
            self.transcript.sync(entry)
        self.calls = {}
        for sid in list(self.subagents):  # Esc stopped them too: their end was never said
            self.subagent_changed(ev.SubagentEnded(sid, "interrupted", "stopped by the human"), *self.subagents[sid])
        await self.transcript.add(Entry.of(render.event_lines(ev.Interrupted(""))[0]))

    async def apply(self, event: ev.Event) -> None:
        """Show one loop event.

        The first event after a reply is recorded (a call starting, the turn ending, ...)
        records the notices held meanwhile, after whatever the loop recorded for that event;
        so they stay pinned under the event's own lines, and are let go after them.
        """
        if isinstance(event, ev.STREAMING):
            return await self.show(event)
        self.record_held()
        await self.show(event)
        self.transcript.unpin()

    async def show(self, event: ev.Event) -> None:
        """Add the lines of one loop event: every event has its case, then the renderer's lines (none for most)."""
        t = self.transcript
        match event:
            case ev.TextDelta():
                self.live.writing()
                self.live.streamed(len(event.text))
                await t.stream_text(event.text)
                return  # the status line repaints on the spinner's tick
            case ev.ThinkingDelta():
                self.live.thinking()
                self.live.streamed(len(event.text))
                await self.stream_thinking(event.text)
                return
            case ev.Interrupted():
                await self.close_question()
                return await self.interrupted()
            case ev.ApprovalAsked():
                return await self.ask(event)
            case ev.PlanReviewAsked():
                return await self.review_plan(event)
            case ev.ShellRan():
                return await self.shell_ran(event)
            case ev.RetryCountdown():  # the status bar counts the wait down
                self.live.start(f"retry {event.attempt} in {event.remaining:.0f} s,")
                return self.refresh_status()
            case ev.ToolStarted():
                await self.tool_started(event)
                return self.refresh_status()
            case ev.ToolFinished():
                await self.tool_finished(event)
                return self.refresh_status()
            case ev.HarnessSaid() if event.seq <= self._rebuilt_to:  # a rebuild drew it already
                return
            case ev.SeamCommitted() | ev.ContextPruned():
                await t.end_text()
                await self.reload()
                return self.refresh_status()
            case ev.TodoUpdated():
                return self.show_todos(list(event.items))
            case ev.SubagentStarted():
                await t.end_text()
                return await self.subagent_started(event)
            case ev.SubagentStep() | ev.SubagentEnded():
                await t.end_text()
                if event.id in self.subagents:
                    self.subagent_changed(event, *self.subagents[event.id])
                return
            case ev.BlockStopped():
                await t.end_text()
                self._thinking = None
            case ev.Retrying():
                await t.end_text(discard=True)
            case ev.RequestSent():
                self.live.start(MODEL_WAIT)
                self._replying = True
            case ev.HintDelivered():
                await self.hints_delivered(event)
            case ev.TurnStarted():
                if event.user_text:
                    self._typed = None  # the human's words are in the history now; nothing to draw, the status below
            case ev.TurnEnded() | ev.Failed():
                await t.end_text()
            case (ev.UsageReported() | ev.ModelResponse() | ev.NarrationViolation() | ev.HarnessSaid()
                  | ev.DenialDelivered() | ev.MemoryReminded() | ev.HandoffAsked() | ev.HandoffFailed()
                  | ev.LimitsExceeded() | ev.Notice() | ev.ImagesAttached() | ev.FilesAttached() | ev.Idle()):
                pass  # the renderer's lines below are all they show
            case _:
                assert_never(event)
        for line in render.event_lines(event):
            await t.add(Entry.of(line))
        self.refresh_status()

    def show_todos(self, items: list[dict[str, str]]) -> None:
        """The todo list in its panel beside the transcript; hidden while the list is empty."""
        import textwrap

        panel = self.query_one("#todo", Static)
        head, *rows = render.todo_line(items).text.split("\n")
        width = TODO_WIDTH - 3  # the panel's padding and its border
        wrapped = [textwrap.fill(r.strip(), width, subsequent_indent="    ") for r in rows]
        panel.update(Text("\n".join([head, *wrapped])) if items else Text(""))
        panel.set_class(not items, "hidden")

    async def review_plan(self, asked: ev.PlanReviewAsked) -> None:
        """The plan exit_plan proposes, for the human to approve (as edited) or reject with a reason; the answer
        goes back as a `PlanAnswer` op."""
        from rhapsody.core.toolbox.protocol import PlanReview
        from rhapsody.frontends.app.plan_review import PlanScreen

        self.set_state("waiting for you")
        self.signal("approval", "rhapsody: a plan waits for your answer")
        self.live.pause()

        def settle(review: PlanReview | None) -> None:
            self.agent.submit(control.plan_answer(asked.id, review or PlanReview(False)))
            self.live.resume()
            self.set_state("working" if self.agent.working else "idle")

        self.push_screen(PlanScreen(asked.plan), callback=settle)

    async def stream_thinking(self, text: str) -> None:
        """Thinking gathers into one folded line per block."""
        if self._thinking is None:
            self._thinking = Entry("thinking", "thinking", "")
            await self.transcript.add(self._thinking)
        self._thinking.body += text

    async def tool_started(self, event: ev.ToolStarted) -> None:
        """A call's line appears when it starts (and changes in place when it finishes)."""
        await self.transcript.end_text()
        entry = Entry.of(render.event_lines(event)[0])
        self.calls[event.call.id] = (event.call, entry)
        self.live.start(f"{event.call.name}")
        await self.transcript.add(entry)

    async def tool_finished(self, event: ev.ToolFinished) -> None:
        """A finished call's line takes its state in place (added when its start was never drawn)."""
        await self.transcript.end_text()
        line = render.tool_line(render.finished_view(event))
        entry = self.calls.pop(event.call.id, (event.call, Entry.of(line)))[1]
        entry.text, entry.body, entry.state = line.text, line.body, line.state
        if entry not in self.transcript.entries:
            await self.transcript.add(entry)
        self.transcript.sync(entry)
        self.live.start("working")

    async def subagent_started(self, event: ev.SubagentStarted) -> None:
        """A sub-agent is one folded line that stays live: its latest step on the line, every step unfolded."""
        line = render.event_lines(event)[0]
        entry = Entry("subagent", line.text, "", event.id, "running")
        self.subagents[event.id] = (line.text, entry)
        await self.transcript.add(entry)

    def subagent_changed(self, event: ev.SubagentStep | ev.SubagentEnded, head: str, entry: Entry) -> None:
        """A running sub-agent's line: the call under way, the step it just took, or how it ended."""
        lines = render.event_lines(event)
        match event:
            case ev.SubagentEnded():
                entry.text, entry.state = lines[0].text, "error" if event.status in ("failed", "interrupted") else ""
                self.subagents.pop(event.id, None)
            case ev.SubagentStep(step=ev.ToolStarted() as started):
                entry.text = f"{head} · running {render.one_line(render.tool_line(render.ToolView(started.call)).text, 80)}"
            case ev.SubagentStep():
                if lines:
                    taken = [line.text.removeprefix(render.SUBAGENT_INDENT) for line in lines]
                    entry.body = "\n".join([entry.body, *taken]).strip("\n")
                    entry.text = f"{head} · {entry.body.count(chr(10)) + 1} steps · {render.one_line(taken[-1], 80)}"
            case _:
                assert_never(event)
        self.transcript.sync(entry)

    async def hints_delivered(self, event: ev.HintDelivered) -> None:
        """A delivered hint moves to where it landed: after the result it followed, or the turn's end."""
        for hint_id in event.hint_ids:
            entry = self.hints.pop(hint_id, None)
            if entry is None:
                continue
            line = render.hint_line(hint_id, entry.body, event.where)
            entry.text, entry.state = line.text, line.state
            await self.transcript.move_to_end(entry)

    async def ask(self, question: ev.ApprovalAsked) -> None:
        """Dock the question above the prompt; its answer goes back as an `ApprovalAnswer` op."""
        from rhapsody.core.toolbox.approval import wait_grace
        from rhapsody.frontends.controller import answer_of
        from rhapsody.frontends.app.approval import question as panel_for

        self.mark_calls(question.tool, "asking")
        self.set_state("waiting for you")
        self.signal("approval", f"rhapsody: {question.tool} waits for your answer")
        self.live.pause()
        grace = self.approver.grace if self.approver is not None else wait_grace
        panel = panel_for(question.tool, question.argument, question.why, question.args, self.agent.session.root,
                          question.rules, self.agent.read_denied(), grace)

        def answered(approval: Approval | None) -> None:
            self.agent.submit(answer_of(question.id, approval))
            self.run_worker(self.close_question())

        panel.answered = answered
        self.asking = (question, panel)
        await self.mount(panel, before=self.query_one("#completions"))
        self.transcript.scroll_end(animate=False)  # what led to the question stays in view above it

    async def close_question(self) -> None:
        """The open question is over: answered, or dropped when the turn was interrupted."""
        if self.asking is None:
            return
        question, panel = self.asking
        self.asking = None
        refocus = panel.has_focus or panel.has_focus_within
        await panel.remove()
        if refocus:
            self.query_one(PromptInput).focus()
        self.live.resume()
        self.mark_calls(question.tool, "running")
        self.set_state("working" if self.agent.working else "idle")  # ctrl+c during the question ended the turn

    def signal(self, reason: str, message: str) -> None:
        """Tell a person who looks elsewhere that the agent waits for them, as `notify` and `notify_with` say."""
        from rhapsody.frontends.app.notify import sequence, wanted

        if not wanted(self.settings.notify, reason):
            return
        text = sequence(self.settings.notify_with, message)
        self.signalled.append(text)
        if self._driver is not None:
            self._driver.write(text)

    def mark_calls(self, tool: str, state: str) -> None:
        """Running calls of `tool` say whether they wait for the human."""
        for call, entry in self.calls.values():
            if call.name == tool:
                line = render.tool_line(render.ToolView(call, state))
                entry.text, entry.state = line.text, line.state
                self.transcript.sync(entry)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A turn started or ended: the footer's ctrl+c follows (not once the app is closing and its screens are gone)."""
        if self.screen_stack:
            self.refresh_bindings()

    @on(Foldable.FullView)
    def full_view(self, message: Foldable.FullView) -> None:
        """Open the output as the history holds it, or the unfolded body when that holds more (an edit's diff)."""
        from rhapsody.frontends.app.fullview import FullView

        entry = message.entry
        text = render.full_result(self.agent.session.records, entry.key) if entry.kind == "tool" else None
        self.push_screen(FullView(entry.text, entry.body if text is None or len(entry.body) > len(text) else text))

    # -- actions ------------------------------------------------------------------------

    async def action_handoff(self) -> None:
        """The handoff key: same as /handoff."""
        await self.command("/handoff", echo=False)

    def action_interrupt(self) -> None:
        """Esc: cancel the running turn."""
        if self.busy:
            self.agent.submit(ops.Interrupt())

    def action_escape_idle(self) -> None:
        """Esc while idle: a second Esc soon after clears the input (Up brings it back)."""
        now = time.monotonic()
        twice, self._esc_at = now - self._esc_at < ESC_TWICE, now
        prompt = self.query_one(PromptInput)
        if not twice:
            if prompt.text.strip():
                self.toast("Esc again clears the input", timeout=ESC_TWICE)
            return
        self._esc_at = 0.0
        if prompt.text.strip():
            prompt.set_aside()
        else:
            self.escape_twice_on_empty()

    def escape_twice_on_empty(self) -> None:
        """Esc Esc on an empty input: go back to an earlier message (as /rewind)."""
        if self.ready:
            self.run_worker(self.rewinder.open())

    def action_cycle_mode(self) -> None:
        """shift+tab: the next permission mode of ask, auto-edit, read-only and plan; yolo only by flag or /permissions."""
        if not self.ready:
            return
        mode = commands.next_mode(self.agent.permission_mode)
        self.agent.submit(ops.SetMode(mode=mode))
        self.refresh_status()
        self.toast(f"permissions: {mode} (shift+tab cycles ask, auto-edit, read-only, plan)", timeout=2)

    def action_edit_prompt(self) -> None:
        """ctrl+g: edit the draft in $VISUAL or $EDITOR; what the editor saves becomes the draft."""
        from rhapsody.frontends.app.editor import edit_in_editor

        prompt = self.query_one(PromptInput)
        try:
            text = edit_in_editor(self, prompt.text)
        except OSError as exc:
            self.toast(f"the editor did not start: {exc}", severity="error", timeout=4)
            return
        prompt.text = text
        prompt.move_cursor(prompt.document.end)
        prompt.focus()

    def action_to_transcript(self) -> None:
        """ctrl+t: onto the transcript's newest line (Up and Down move, Enter unfolds, Tab comes back)."""
        lines = self.transcript.foldables()
        if lines:
            lines[-1].focus()

    def action_noop(self) -> None:
        """Bindings handled by the prompt, listed here so the Footer shows them."""

    async def action_earlier(self) -> None:
        """Mount older transcript entries."""
        await self.transcript.load_earlier()

    @on(Button.Pressed, "#earlier")
    async def earlier_pressed(self) -> None:
        await self.transcript.load_earlier()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """ctrl+c stops the agent while it works and clears or quits while it is idle; the footer says which."""
        if action == "stop":
            return self.busy
        if action in ("clear_or_quit", "escape_idle"):
            return not self.busy
        if action == "interrupt":
            return self.busy
        return True

    def action_stop(self) -> None:
        """ctrl+c while the agent works: as Esc, the turn stops and what streamed stays, marked interrupted."""
        self.action_interrupt()
        self.refresh_bindings()

    def action_clear_or_quit(self) -> None:
        """ctrl+c while idle: a prompt with text is cleared (Up brings it back); an empty one quits on a second press."""
        prompt = self.query_one(PromptInput)
        if prompt.text.strip():
            prompt.set_aside()
            self._ctrl_c_at = 0.0
            return
        now = time.monotonic()
        if now - self._ctrl_c_at < 2.0:
            self.exit(0)
            return
        self._ctrl_c_at = now
        self.toast("Press ctrl+c again to quit", timeout=2)

    # -- status ---------------------------------------------------------------------------

    def set_state(self, state: str) -> None:
        """Set the state shown in the status bar."""
        self.query_one(StatusBar).state = state
        self.refresh_status()
        self.refresh_bindings()  # the footer's ctrl+c says Interrupt while working, Quit while idle

    def on_resize(self) -> None:
        """The status line is fitted to the width again."""
        self.call_after_refresh(self.refresh_status)

    def tick(self) -> None:
        """The spinner's beat: only repaint while something runs, or when the cache has just gone cold."""
        cold = not self.live.active and self.ready and self.agent.session.figures.cache_cold(time.time())
        if self.live.active or cold != self._cold:
            self._cold = cold
            self.refresh_status()

    @work(exclusive=True, group="git", exit_on_error=False)
    async def refresh_git(self) -> None:
        """Read branch and dirty-file count off the event loop. The thread that reads them never waits for the
        loop (`call_from_thread` would: a loop held by the app's shutdown then holds the thread, and the exit)."""
        from rhapsody.tools.git import git_facts

        facts = await off_loop(lambda: git_facts(self.root))
        self._set_git(f"{facts['branch']} ±{len(facts['dirty'])}" if facts.get("git_root") else "no git")

    def _set_git(self, text: str) -> None:
        self._git = text
        self.refresh_status()

    def refresh_status(self) -> None:
        """Recompute the status line from the session's figures."""
        if not self.ready:
            return
        session = self.agent.session
        bar = self.query_one(StatusBar)
        state = self.live.text() if self.live.active else bar.state
        mode = self.agent.permission_mode
        bar.update(Text(visible(status_line(session.figures, session, self._git, state, self.size.width, mode))))


async def off_loop(read: Callable[[], T]) -> T:
    """`read()` in a daemon thread, awaited: the thread hands its result over without waiting for the loop, and
    a process that ends meanwhile does not wait for it (as `asyncio.to_thread`'s executor would)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(cast(T, result))

    def run() -> None:
        try:
            result, error = read(), None
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop has closed: nobody waits for it any more
            pass

    threading.Thread(target=run, name="rhapsody-off-loop", daemon=True).start()
    return await done
