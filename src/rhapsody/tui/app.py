"""The Textual app: streaming narration, a live hint box, the handoff key, a truthful status bar.

The agent loop runs in an async worker on the app's event loop; each event is applied to
the transcript as it arrives. The input never locks: Enter while the agent works sends a
hint for the next tool boundary, ctrl+n queues a message for the end of the turn.

| Key | Action |
| :- | :- |
| enter | Send (hint while working, new turn while idle) |
| ctrl+n | Queue for the end of the turn |
| ctrl+o | Micro-handoff |
| escape | Interrupt the streaming turn |
| ctrl+u | Show earlier transcript entries |
| ctrl+c ctrl+c | Quit |
"""

from __future__ import annotations

import asyncio
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Button, Footer, Static
from textual.worker import Worker

from rhapsody.commands import is_command, run_command
from rhapsody.config import Settings
from rhapsody.core import events as ev
from rhapsody.core.approval import HumanApprover
from rhapsody.core.loop import Agent
from rhapsody.core.pricing import cost, price_of, priced
from rhapsody.core.session import USAGE_KEYS
from rhapsody.render import limit_line
from rhapsody.tui.entries import from_records, hint_text, tool_entry
from rhapsody.tui.widgets import Entry, PromptInput, StatusBar, TranscriptView, completions


class RhapsodyApp(App[int]):
    """rhapsody's full-screen front end."""

    CSS_PATH = "app.tcss"
    TITLE = "rhapsody"
    BINDINGS = [
        Binding("ctrl+o", "handoff", "Handoff", id="handoff", priority=True),
        Binding("escape", "interrupt", "Interrupt", id="interrupt", priority=True),
        Binding("ctrl+n", "noop", "Queue for end of turn", id="queue", show=True),
        Binding("ctrl+j", "noop", "New line", id="newline", show=True),
        Binding("ctrl+u", "earlier", "Earlier", id="earlier", priority=True),
        Binding("ctrl+c", "quit_twice", "Quit (twice)", id="quit", priority=True),
    ]

    def __init__(self, agent: Agent, settings: Settings, approver: HumanApprover | None = None,
                 initial: str = "") -> None:
        """`approver` is the one the agent's toolbox asks (None: questions are refused, as headless)."""
        super().__init__()
        self.agent = agent
        self.settings = settings
        self.approver = approver
        self._questions: asyncio.Task[None] | None = None
        self.initial = initial
        self.hint_entries: dict[str, int] = {}
        self.tool_entries: dict[str, int] = {}
        self.worker: Worker[None] | None = None
        self._ctrl_c_at = 0.0
        self._git = ""

    def compose(self) -> ComposeResult:
        yield TranscriptView(id="transcript")
        yield Static("", id="completions", classes="hidden")
        yield PromptInput(self.initial, id="prompt", soft_wrap=True, show_line_numbers=False)
        yield StatusBar("", id="status")
        yield Footer()

    async def on_mount(self) -> None:
        if self.approver is not None:
            self._questions = asyncio.create_task(self.serve_questions(self.approver))
        if self.settings.keymap:
            self.set_keymap(self.settings.keymap)
        await self.reload()
        for notice in self.agent.toolbox.start_sources():  # MCP servers start now; the first paint does not wait
            await self.transcript.add(Entry("notice", f"! {notice}"))
        self.query_one(PromptInput).focus()
        self.refresh_status()
        self.refresh_git()

    @property
    def transcript(self) -> TranscriptView:
        """The transcript widget."""
        return self.query_one(TranscriptView)

    @property
    def busy(self) -> bool:
        """Whether a turn is running."""
        return self.agent.busy or (self.worker is not None and self.worker.is_running)

    # -- input -------------------------------------------------------------------------

    @on(PromptInput.Submitted)
    async def submitted(self, message: PromptInput.Submitted) -> None:
        text = message.text
        if is_command(text):
            await self.command(text)
        elif self.busy:
            await self.add_hint(text, "queue" if message.queue else "steer")
        else:
            await self.transcript.add(Entry("user", f"› {text}"))
            self.start_turn(text)

    @on(PromptInput.Changed)
    def show_completions(self, event: PromptInput.Changed) -> None:
        box = self.query_one("#completions", Static)
        text = event.text_area.text
        matches = completions(text) if text.startswith("/") and " " not in text else []
        box.update("  ".join(matches))
        box.set_class(not matches, "hidden")

    async def reload(self) -> None:
        """Rebuild the transcript from history, so stripped calls show as stripped."""
        session = self.agent.session
        entries = from_records(session.records, session.root, session.id, session.conversation)
        await self.transcript.load(entries)
        self.hint_entries = {e.key: i for i, e in enumerate(entries) if e.kind == "hint" and e.key}

    async def add_hint(self, text: str, mode: str) -> None:
        """Queue a hint (on disk at once) and show it as pending."""
        hint = self.agent.session.hint(text, mode)
        where = "end of turn" if mode == "queue" else "next tool boundary"
        entry = Entry("hint", hint_text(hint.id, text, f"pending · {where}"), key=hint.id, extra={"text": text})
        await self.transcript.add(entry)
        self.hint_entries[hint.id] = len(self.transcript.entries) - 1

    async def command(self, text: str) -> None:
        """Run a slash command and show what it said."""
        outcome = run_command(self.agent, text)
        if outcome.quit:
            self.exit(0)
            return
        if text.startswith("/clear"):
            await self.transcript.load([])
        if outcome.text:
            await self.transcript.add(Entry("notice", outcome.text))
        if text.startswith("/unhandoff") and "undone" in outcome.text:
            await self.reload()
            await self.transcript.add(Entry("notice", outcome.text))
        if outcome.run_turn:
            self.start_turn(None)
        self.refresh_status()

    # -- the agent worker ----------------------------------------------------------------

    def start_turn(self, text: str | None) -> None:
        """Run one turn in the agent worker."""
        self.worker = self.run_agent(text)

    @work(exclusive=True, group="agent", exit_on_error=False)
    async def run_agent(self, text: str | None) -> None:
        """Drive the loop and apply each event to the transcript."""
        self.set_state("working")
        try:
            async with aclosing(self.agent.run(text)) as stream:
                async for event in stream:
                    await self.apply(event)
        except asyncio.CancelledError:
            await self.transcript.end_text()
            await self.transcript.add(Entry("notice", "⏹ interrupted: what streamed so far is kept"))
            raise
        finally:
            self.set_state("idle")
            self.refresh_git()

    async def apply(self, event: ev.Event) -> None:
        """Show one loop event."""
        t = self.transcript
        if isinstance(event, ev.TextDelta):
            await t.stream_text(event.text)
            return  # the status line has nothing new to say per delta; repainting it costs a frame
        if isinstance(event, ev.BlockStopped) and event.kind == "text":
            await t.end_text()
        elif isinstance(event, ev.RetryCountdown):  # the status bar counts the wait down, second by second
            self.set_state(f"retry {event.attempt} in {event.remaining:.0f} s")
            if event.remaining <= 1:
                self.set_timer(event.remaining, lambda: self.set_state("working") if self.busy else None)
            return
        elif isinstance(event, ev.ThinkingDelta):
            await t.add(Entry("thinking", event.text, title="thinking"))
        elif isinstance(event, ev.Retrying):
            await t.end_text(discard=True)
            await t.add(Entry("notice", f"↻ retry {event.attempt} in {event.delay:.1f} s: {event.reason}"))
        elif isinstance(event, ev.ToolStarted):
            await self.tool_started(event)
        elif isinstance(event, ev.ToolFinished):
            await self.tool_finished(event)
        elif isinstance(event, ev.NarrationViolation):
            await t.add(Entry("violation", f"✗ {event.call.name} not run: {event.words} words of narration, "
                                           f"{event.required} required (violations this session: {event.total})"))
        elif isinstance(event, ev.HintDelivered):
            self.hints_delivered(event)
        elif isinstance(event, ev.Notice):
            await t.add(Entry("notice", f"! {event.text}"))
        else:
            await self.apply_turn_event(event)
        self.refresh_status()

    async def apply_turn_event(self, event: ev.Event) -> None:
        """Events about seams and the turn's end."""
        t = self.transcript
        if isinstance(event, ev.SeamCommitted):
            await t.end_text()
            await self.reload()
        elif isinstance(event, ev.ContextPruned):
            await t.end_text()
            await self.reload()
            await t.add(Entry("notice", f"── rolling cut: {len(event.record['ids'])} older calls left the context "
                                        f"({event.record['before']['request_bytes']:,} → {event.record['after']['request_bytes']:,} bytes)"))
        elif isinstance(event, ev.HandoffAsked):
            await t.add(Entry("notice", "✎ reminder sent: call micro_handoff" if event.reminder else
                              "✎ micro-handoff requested with the tool results"))
        elif isinstance(event, ev.HandoffFailed):
            await t.add(Entry("error", f"✗ handoff: {event.reason}"))
        elif isinstance(event, ev.Failed):
            await t.end_text()
            await t.add(Entry("error", f"✗ {event.message}"))
        elif isinstance(event, ev.LimitsExceeded):
            await t.end_text()
            await t.add(Entry("error", f"■ {limit_line(event)}"))
        elif isinstance(event, ev.TurnEnded):
            await t.end_text()

    async def tool_started(self, event: ev.ToolStarted) -> None:
        await self.transcript.end_text()
        entry = tool_entry(event.call, "(running)", False, 0, None)
        entry.title = entry.title.replace("→ ok (0.0 s)", "…")
        await self.transcript.add(entry)
        self.tool_entries[event.call.id] = len(self.transcript.entries) - 1

    async def tool_finished(self, event: ev.ToolFinished) -> None:
        index = self.tool_entries.pop(event.call.id, None)
        entry = tool_entry(event.call, event.output, event.is_error, event.duration_ms, event.exit_code)
        if index is None:
            await self.transcript.add(entry)
            return
        self.transcript.entries[index] = entry
        old = self.transcript.widget_for(index)
        if old is not None:
            new = entry.widget()
            self.transcript.widgets[index] = new
            await self.transcript.mount(new, after=old)
            await old.remove()

    def hints_delivered(self, event: ev.HintDelivered) -> None:
        for hint_id in event.hint_ids:
            index = self.hint_entries.pop(hint_id, None)
            if index is None:
                continue
            entry = self.transcript.entries[index]
            entry.text = hint_text(hint_id, entry.extra.get("text", ""), f"delivered · {event.where}")
            widget = self.transcript.widget_for(index)
            if isinstance(widget, Static):
                widget.update(entry.text)

    async def serve_questions(self, approver: HumanApprover) -> None:
        """Ask each permission question in a modal, one at a time, for as long as the app runs."""
        from rhapsody.tui.approval import ApprovalScreen

        while True:
            question = await approver.next_question()
            self.set_state("waiting for you")
            screen = ApprovalScreen(question.tool, question.argument, question.why)
            await self.push_screen(screen, callback=question.answer)
            await asyncio.wait([question.reply])  # answered, or dropped when the turn was interrupted
            if question.reply.cancelled() and self.screen is screen:
                self.pop_screen()
            self.set_state("working")

    def on_unmount(self) -> None:
        if self._questions is not None:
            self._questions.cancel()

    # -- actions ------------------------------------------------------------------------

    async def action_handoff(self) -> None:
        """The handoff key: same as /handoff."""
        await self.command("/handoff")

    def action_interrupt(self) -> None:
        """Esc: cancel the running turn."""
        if self.busy:
            self.workers.cancel_group(self, "agent")

    def action_noop(self) -> None:
        """Bindings handled by the prompt, listed here so the Footer shows them."""

    async def action_earlier(self) -> None:
        """Mount older transcript entries."""
        await self.transcript.load_earlier()

    @on(Button.Pressed, "#earlier")
    async def earlier_pressed(self) -> None:
        await self.transcript.load_earlier()

    def action_quit_twice(self) -> None:
        """Ctrl+C twice within two seconds quits."""
        now = time.monotonic()
        if now - self._ctrl_c_at < 2.0:
            self.exit(0)
            return
        self._ctrl_c_at = now
        self.notify("Press ctrl+c again to quit", timeout=2)

    # -- status ---------------------------------------------------------------------------

    def set_state(self, state: str) -> None:
        """Set the state shown in the status bar."""
        self.query_one(StatusBar).state = state
        self.refresh_status()

    @work(thread=True, exclusive=True, group="git", exit_on_error=False)
    def refresh_git(self) -> None:
        """Read branch and dirty-file count off the event loop."""
        from rhapsody.tools.git import git_facts

        facts = git_facts(self.agent.session.root)
        text = f"{facts['branch']} ±{len(facts['dirty'])}" if facts.get("git_root") else "no git"
        self.call_from_thread(self._set_git, text)

    def _set_git(self, text: str) -> None:
        self._git = text
        self.refresh_status()

    def refresh_status(self) -> None:
        """Recompute the status line from the session's counters."""
        self.query_one(StatusBar).update(status_line(self.agent.session, self._git, self.query_one(StatusBar).state))


def status_line(session: Any, git: str, state: str) -> str:
    """model · context · cache · cost · git · cwd · seams · violations · state."""
    model = session.spec.model
    price, exact = price_of(model)
    c = session.counters
    usage = c.last_usage
    reported = sum(usage.get(k, 0) for k in USAGE_KEYS[:3])
    tokens = reported or c.last_request_tokens
    source = "" if reported else "~"
    cache = f"cache {usage.get('cache_read_input_tokens', 0) / reported:.0%}" if reported else "cache —"
    total_cost = cost(model, c.usage)  # priced at the current model: a /model switch reprices the past
    dollars = f"${total_cost:.2f}" + ("" if exact else "?") if priced(model) else "cost unknown"
    share = f" ({tokens / price.window:.1%})" if priced(model) else ""  # an unknown model's window is unknown too
    cwd = str(session.root).replace(str(Path.home()), "~")
    return (f" {state} │ {model} │ ctx {source}{tokens:,}{share} │ {cache} │ {dollars} │ "
            f"seams {c.seams} │ violations {c.violations} │ {git} │ {cwd}")
