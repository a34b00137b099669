"""The Textual app: streaming narration, a live hint box, the handoff key, a truthful status bar.

The agent loop runs in an async worker on the app's event loop; each event becomes lines
through the one renderer (`rhapsody.view.render`) and is applied to the transcript as it
arrives. The input never locks: Enter while the agent works sends a hint for the next tool
boundary, ctrl+n queues a message for the end of the turn.

The app composes the screen, boots the session, runs the worker and routes each event (`show`)
to the panel that owns what it changes: the transcript's live entries (feed.py), the status
bar (status_bar.py), the prompt (prompt.py), the question's panel (approval.py), the todo panel;
they ask the app for what is the app's by typed messages (docs/architecture.md).

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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, assert_never

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.widgets import Button
from textual.worker import Worker

from rhapsody.frontends.app.deferred import lazy, load_all
from rhapsody.frontends.app.feed import Feed
from rhapsody.frontends.app.footer import KeyBar
from rhapsody.frontends.app.notify import Signals
from rhapsody.frontends.app.palette import Palette
from rhapsody.frontends.app.prompt import Completions, PromptInput
from rhapsody.frontends.app.status import MODEL_WAIT, starting_text
from rhapsody.frontends.app.status_bar import StatusBar
from rhapsody.frontends.app.surface import AppSurface
from rhapsody.frontends.app.todo import TodoPanel
from rhapsody.frontends.app.transcript import TranscriptView
from rhapsody.frontends.app.widgets import Entry, Foldable
from rhapsody.frontends.hangup import STATUS as HANGUP_STATUS, Hangup
from rhapsody.frontends.prompt_aids import InputHistory
from rhapsody.view.sink import visible

if TYPE_CHECKING:
    from rhapsody.commands import slash as commands
    from rhapsody.view import render
    from rhapsody.config.settings import Settings
    from rhapsody.core import events as ev
    from rhapsody.core.toolbox.approval import HumanApprover
    from rhapsody.core.agent import ops
    from rhapsody.core.agent.loop import Agent
    from rhapsody.frontends import controller as control
    from rhapsody.frontends.app.approval import ApprovalPanel
else:  # loaded on first use, after the first frame (pydantic and the core are most of the start-up)
    commands = lazy("rhapsody.commands.slash")
    render = lazy("rhapsody.view.render")
    ev = lazy("rhapsody.core.events")
    ops = lazy("rhapsody.core.agent.ops")
    control = lazy("rhapsody.frontends.controller")

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
        once the session exists, together, as the first message (Enter alone sends `initial`, the suggested
        one, as Enter would in the prompt). `hangup`: what to do when the terminal goes
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
        lines = [line for line in typed_ahead if line.strip()]
        if typed_ahead and not lines and initial.strip():  # Enter alone, typed ahead: it sends the suggested message
            lines = [initial]
        self._early = [PromptInput.Submitted("\n".join(lines), queue=False)] if lines else []
        if lines:  # what was typed ahead is the first message: a suggested one (the demo's task) steps aside
            initial = ""
        self.approver = approver
        """The agent's approver; the app takes only its grace period from it (questions come as events)."""
        self.controller: control.Controller | None = None
        self.initial = initial
        self.worker: Worker[None] | None = None
        self.feed = Feed(lambda: self.transcript)
        """The transcript's live entries (feed.py): what the events in flight change in place."""
        self.signals = Signals()
        """What was written to the terminal to say the agent waits (notify.py)."""
        self.surface = AppSurface(self, lambda: self.controller, welcome)
        """What a typed line's effects are on the panels (surface.py), for the controller."""
        self.palette = Palette(self.root, lambda name: self.run_worker(self.surface.command(name)),
                               lambda text: self.prompt.put(text))

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield TranscriptView(id="transcript")
            yield TodoPanel("", id="todo", classes="hidden")
        yield Completions("", id="completions", classes="hidden")
        yield PromptInput(self.initial, id="prompt", soft_wrap=True, show_line_numbers=False)
        yield StatusBar("", id="status", root=self.root)
        yield KeyBar()

    async def on_mount(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGHUP):  # leave as ctrl+c does: the terminal restored, history closed
            if sig != signal.SIGHUP or self.hangup is None:  # the hangup's own handler runs even on a stuck loop
                loop.add_signal_handler(sig, self.terminated, sig)
        if self.hangup is not None:
            self.hangup.arm(loop, self.hang_up)
        prompt = self.prompt
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
        self.status_bar.update(Text(" starting…"))
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
        self.controller = control.Controller(self.agent, self.surface)
        if self.settings.keymap:
            self.set_keymap(self.settings.keymap)
        self.status_bar.attach(self.agent)
        await self.surface.reload()
        for notice in self.agent.start_sources():  # MCP servers start now; the first paint does not wait
            await self.surface.note(f"! {notice}")
        self.refresh_status()
        self.refresh_git()
        self.set_interval(0.125, self.status_bar.tick)
        warm = getattr(self.agent.model, "warm", None)
        if warm is not None:  # the SDK imports while the human reads the first frame
            thread = threading.Thread(target=warm, name="sdk-import", daemon=True)
            self.set_timer(0.1, thread.start)  # after the first frame, which it would otherwise slow

    @property
    def transcript(self) -> TranscriptView:
        """The transcript widget."""
        return self.query_one(TranscriptView)

    @property
    def prompt(self) -> PromptInput:
        """The prompt widget."""
        return self.query_one(PromptInput)

    @property
    def status_bar(self) -> StatusBar:
        """The status bar widget."""
        return self.query_one(StatusBar)

    @property
    def todo(self) -> TodoPanel:
        """The todo list's panel."""
        return self.query_one(TodoPanel)

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
        """The command palette lists rhapsody's own commands first (palette.py)."""
        yield from self.palette.entries(self.screen, self.size.width)
        yield from super().get_system_commands(screen)

    def toast(self, message: str, **options: Any) -> None:
        """A short notice over the transcript's corner; it replaces the one before, so notices never stack."""
        self.clear_notifications()
        self.notify(message, **options)

    def signal(self, reason: str, message: str) -> None:
        """Tell a person who looks elsewhere that the agent waits for them, as `notify` and `notify_with` say."""
        text = self.signals.signal(self.settings.notify, self.settings.notify_with, reason, message)
        if text is not None and self._driver is not None:
            self._driver.write(text)

    # -- input -------------------------------------------------------------------------

    @on(PromptInput.Submitted)
    async def submitted(self, message: PromptInput.Submitted) -> None:
        self.transcript.anchor()  # whatever was sent, its result is seen: back to the bottom, and follow it
        if not self.ready:
            self._early.append(message)
            return
        text = message.text
        if commands.is_command(text):
            await self.surface.command(text)
        else:
            assert self.controller is not None
            await self.controller.line(text, queued=message.queue)

    @on(PromptInput.Changed)
    def show_completions(self, event: PromptInput.Changed) -> None:
        # None is found once the app is closing (its widgets go first, and the prompt's last change can be
        # handled after): that change must not end the app with an error.
        for shown in self.query(Completions):
            shown.show(self.prompt.suggestions())

    def on_prompt_input_rewind(self) -> None:
        """The prompt's Esc Esc on an empty input."""
        self.escape_twice_on_empty()

    def escape_twice_on_empty(self) -> None:
        """Esc Esc on an empty input: go back to an earlier message (as /rewind)."""
        if self.ready:
            self.run_worker(self.surface.rewinder.open())

    @on(PromptInput.Quit)
    def quit(self) -> None:
        """ctrl+c twice on an empty prompt, or /quit."""
        self.exit(0)

    # -- the agent worker (what the controller's lines do on the panels is surface.py) ----

    def start_turn(self, text: str | None, typed: str | None = None) -> None:
        """Start one turn and read it in the agent worker (`typed`: the words of a custom command's prompt the
        human typed; none once the terminal is gone)."""
        op = ops.UserTurn(text=text or "", typed=typed)
        if not self.hung_up and self.agent.submit(op).started:
            self.worker = self.run_agent(op)

    def read_work(self, op: ops.Op) -> None:
        """Read the work `op` started in the agent worker (none once the terminal is gone)."""
        if not self.hung_up:
            self.worker = self.run_agent(op)

    @work(exclusive=True, group="agent", exit_on_error=False)
    async def run_agent(self, op: ops.Op) -> None:
        """Apply each of the agent's events to the transcript until its work is over."""
        await self.feed.user_line(op.text if isinstance(op, ops.UserTurn) and op.text else None)
        began = time.monotonic()
        self.status_bar.live.start("working")
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
            self.status_bar.live.stop()
            self.set_state("idle")
            self.refresh_git()

    def record_held(self) -> None:
        """Notices said while a reply streamed are recorded after it."""
        for notice in self.feed.release():
            self.agent.submit(notice)

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
        """Route one loop event to the panels it changes (every event has its case), then add the renderer's lines
        (none for most)."""
        t, feed, live = self.transcript, self.feed, self.status_bar.live
        match event:
            case ev.TextDelta():
                live.writing()
                live.streamed(len(event.text))
                await t.stream_text(event.text)
                return  # the status line repaints on the spinner's tick
            case ev.ThinkingDelta():
                live.thinking()
                live.streamed(len(event.text))
                return await feed.stream_thinking(event.text)
            case ev.Interrupted():
                await self.close_question()
                return await feed.interrupted()
            case ev.ApprovalAsked():
                return await self.ask(event)
            case ev.PlanReviewAsked():
                return await self.review_plan(event)
            case ev.ShellRan():
                return await feed.shell_ran(event)
            case ev.RetryCountdown():  # the status bar counts the wait down
                live.start(f"retry {event.attempt} in {event.remaining:.0f} s,")
                return self.refresh_status()
            case ev.ToolStarted():
                await feed.tool_started(event)
                live.start(f"{event.call.name}")
                return self.refresh_status()
            case ev.ToolFinished():
                await feed.tool_finished(event)
                live.start("working")
                return self.refresh_status()
            case ev.HarnessSaid() if feed.drawn(event.seq):  # a rebuild drew it already
                return
            case ev.SeamCommitted() | ev.ContextPruned():
                await t.end_text()
                await self.surface.reload()
                return self.refresh_status()
            case ev.TodoUpdated():
                return self.todo.show(list(event.items))
            case ev.SubagentStarted():
                return await feed.subagent_started(event)
            case ev.SubagentStep() | ev.SubagentEnded():
                return await feed.subagent_changed(event)
            case ev.BlockStopped():
                await t.end_text()
                feed.block_stopped()
            case ev.Retrying():
                await t.end_text(discard=True)
            case ev.RequestSent():
                live.start(MODEL_WAIT)
                feed.replying = True
            case ev.HintDelivered():
                await feed.hints_delivered(event)
            case ev.TurnStarted():
                feed.turn_started(event)  # the human's words are in the history now; nothing to draw, the status below
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

    # -- asking the human: the question docked above the prompt (approval.py), the plan (plan_review.py) --

    async def ask(self, question: ev.ApprovalAsked) -> None:
        """Dock the question above the prompt; its answer comes back as the panel's `Answered` message."""
        from rhapsody.core.toolbox.approval import wait_grace
        from rhapsody.frontends.app.approval import question as panel_for

        self.feed.mark_calls(question.tool, "asking")
        self.waiting(f"rhapsody: {question.tool} waits for your answer")
        grace = self.approver.grace if self.approver is not None else wait_grace
        await self.mount(panel_for(question.tool, question.argument, question.why, question.args, self.agent.session.root,
                                   question.rules, self.agent.read_denied(), grace, question.id),
                         before=self.query_one(Completions))
        self.transcript.scroll_end(animate=False)  # what led to the question stays in view above it

    def on_approval_panel_answered(self, message: ApprovalPanel.Answered) -> None:
        """The panel's answer goes to the agent as an `ApprovalAnswer` op; the panel goes."""
        self.agent.submit(control.answer_of(message.question_id, message.approval))
        self.run_worker(self.close_question())

    async def close_question(self) -> None:
        """The open question is over: answered, or dropped when the turn was interrupted."""
        from rhapsody.frontends.app.approval import ApprovalPanel

        panel = next((p for p in self.query(ApprovalPanel) if not p.taken), None)
        if panel is None:
            return
        if await panel.take_away():
            self.prompt.focus()
        self.feed.mark_calls(panel.tool, "running")
        self.answered()

    async def review_plan(self, asked: ev.PlanReviewAsked) -> None:
        """The plan exit_plan proposes, for the human to approve (as edited) or reject with a reason; the answer
        goes back as a `PlanAnswer` op."""
        from rhapsody.core.toolbox.protocol import PlanReview
        from rhapsody.frontends.app.plan_review import PlanScreen

        self.waiting("rhapsody: a plan waits for your answer")

        def settle(review: PlanReview | None) -> None:
            self.agent.submit(control.plan_answer(asked.id, review or PlanReview(False)))
            self.answered()

        self.push_screen(PlanScreen(asked.plan), callback=settle)

    def waiting(self, message: str) -> None:
        """The human is asked: the status bar says so and its clock stops; a person who looks elsewhere is told."""
        self.status_bar.waiting()
        self.refresh_bindings()
        self.signal("approval", message)

    def answered(self) -> None:
        """The human answered (or the question went): the status bar says what the agent does now."""
        self.status_bar.answered(self.agent.working)  # ctrl+c during the question ended the turn
        self.refresh_bindings()

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

    # -- actions: the app-wide keys; what a key does to one panel, that panel does ------

    async def action_handoff(self) -> None:
        """The handoff key: same as /handoff."""
        await self.surface.command("/handoff", echo=False)

    def action_interrupt(self) -> None:
        """Esc: cancel the running turn."""
        if self.busy:
            self.agent.submit(ops.Interrupt())

    def action_escape_idle(self) -> None:
        """Esc while idle: a second Esc soon after clears the input (Up brings it back)."""
        self.prompt.escape()

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
        self.prompt.open_editor()

    def action_to_transcript(self) -> None:
        """ctrl+t: onto the transcript's newest line (Up and Down move, Enter unfolds, Tab comes back)."""
        lines = self.transcript.foldables()
        if lines:
            lines[-1].focus()

    def action_noop(self) -> None:
        """Bindings handled by the prompt, listed here so the Footer shows them."""

    @on(Button.Pressed, "#earlier")
    async def action_earlier(self) -> None:
        """ctrl+l or the button: mount older transcript entries."""
        await self.transcript.load_earlier()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """ctrl+c stops the agent while it works and clears or quits while it is idle; the footer says which."""
        if action in ("stop", "interrupt"):
            return self.busy
        if action in ("clear_or_quit", "escape_idle"):
            return not self.busy
        return True

    def action_stop(self) -> None:
        """ctrl+c while the agent works: as Esc, the turn stops and what streamed stays, marked interrupted."""
        self.action_interrupt()
        self.refresh_bindings()

    def action_clear_or_quit(self) -> None:
        """ctrl+c while idle: a prompt with text is cleared (Up brings it back); an empty one quits on a second press."""
        self.prompt.clear_or_quit()

    # -- the status bar (status_bar.py) --------------------------------------------------

    def set_state(self, state: str) -> None:
        """Set the state shown in the status bar; the footer's ctrl+c says Interrupt while working, Quit while idle."""
        self.status_bar.set_state(state)
        self.refresh_bindings()

    def refresh_status(self) -> None:
        """Redraw the status line from the session's figures."""
        self.status_bar.refresh_status()

    def refresh_git(self) -> Worker[None]:
        """Read the branch and changed files again, off the event loop."""
        return self.status_bar.refresh_git()
