"""The transcript's live entries: lines drawn before their work is over, changed in place as its events arrive.

A tool call's line appears when it starts and takes its outcome when it finishes; a sub-agent is one
line that follows its steps; a hint waits as pending until it is delivered, then moves to where it
landed; a `!command` says it runs, then what it printed; thinking gathers into one line per block.
A notice said while a reply streams is held, and shown pinned below the reply, until the reply is
recorded. The app routes each event here (app.py `show`); the feed draws on the `TranscriptView`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, assert_never

from textual.widget import Widget

from rhapsody.frontends.app.deferred import lazy
from rhapsody.frontends.app.transcript import TranscriptView
from rhapsody.frontends.app.widgets import Entry

if TYPE_CHECKING:
    from rhapsody.core import events as ev
    from rhapsody.core.agent import ops
    from rhapsody.core.session import records as rec
    from rhapsody.core.session.messages import ToolUseBlock
    from rhapsody.core.session.session import Session
    from rhapsody.view import render
else:  # loaded on first use, after the first frame
    ev = lazy("rhapsody.core.events")
    rec = lazy("rhapsody.core.session.records")
    render = lazy("rhapsody.view.render")


class Feed:
    """The entries that change after they are drawn, and the notices held while a reply streams."""

    def __init__(self, view: Callable[[], TranscriptView]) -> None:
        """`view`: the transcript widget the entries are drawn on."""
        self._view = view
        self.hints: dict[str, Entry] = {}
        """Hints sent and not yet delivered, by id."""
        self.calls: dict[str, tuple[ToolUseBlock, Entry]] = {}
        """Running tool calls by id: the call, and its live entry."""
        self.subagents: dict[str, tuple[str, Entry]] = {}
        """Running sub-agents by id: the line that started each, and its live entry."""
        self.shells: dict[str, Entry] = {}
        """The human's `!command`s running, by command: their line changes in place once they ran."""
        self.thinking: Entry | None = None
        """The thinking block streaming now."""
        self.rebuilt_to = 0
        """The last history record the transcript was rebuilt from: what live events say of records up to it is drawn
        already."""
        self.typed: str | None = None
        """The human's words shown, their turn not yet in the history (a seam goes first; a rebuild keeps them)."""
        self.replying = False
        """A reply streams: notices said now are recorded after it."""
        self.held: list[ops.AddNotice] = []
        """The notices said while the reply streamed, to record once it is."""

    @property
    def view(self) -> TranscriptView:
        """The transcript widget."""
        return self._view()

    # -- the whole transcript ------------------------------------------------------------

    async def rebuild(self, session: Session, welcome: Callable[[], str]) -> None:
        """Draw the transcript from the session's records (the one renderer); `welcome`: what an empty one says."""
        lines = render.record_lines(session.records, session.root, session.id, session.conversation)
        entries = [Entry.of(line) for _, line in lines if line.kind != "todo"]  # the list has its panel
        if not entries:
            entries = [Entry("welcome", welcome())]
        self.rebuilt_to = session.records[-1].seq if session.records else 0
        if self.typed:  # typed and shown, its turn not yet begun: the checkpoint's seam came first
            entries.append(Entry("user", f"› {self.typed}"))
        await self.view.load(entries)
        self.hints = {e.key: e for e in entries if e.kind == "hint" and e.state == "pending"}

    def drawn(self, seq: int) -> bool:
        """Whether the record `seq` was drawn by the last rebuild already."""
        return seq <= self.rebuilt_to

    async def drop_welcome(self) -> None:
        """The welcome leaves once the session starts."""
        for entry in [e for e in self.view.entries if e.kind == "welcome"]:
            await self.view.remove_entry(entry)

    async def user_line(self, text: str | None) -> None:
        """A turn begins on the human's words (None: on what was pending)."""
        await self.drop_welcome()
        if text:
            await self.view.add(Entry("user", f"› {text}"))
        self.typed = text  # shown, not yet in the history while a seam goes first (a rebuild keeps it)

    def turn_started(self, event: ev.TurnStarted) -> None:
        """The turn is in the history, the human's words with it: a rebuild draws them from there."""
        if event.user_text:
            self.typed = None

    # -- notices -------------------------------------------------------------------------

    def hold(self, notice: ops.AddNotice) -> bool:
        """Keep `notice` to record after the reply streaming now; False when none streams (record it now)."""
        if self.replying:
            self.held.append(notice)
        return self.replying

    def release(self) -> list[ops.AddNotice]:
        """The reply is recorded: the notices held meanwhile, to record now in the order said."""
        held, self.held, self.replying = self.held, [], False
        return held

    async def noted(self, text: str, kind: str) -> Widget:
        """Draw a notice (kind `command`: the command itself), pinned below a reply that streams."""
        fields: dict[str, Any] = {"text": text, "shown": "as is", **({"error": True} if kind == "error" else {}),
                                  **({"command": True} if kind == "command" else {})}
        line = render.notice_line(rec.NoticeShown(**fields))
        return await self.view.add(Entry.of(line), pin=self.replying)

    def top_in_view(self, widget: Widget) -> None:
        """An output taller than the transcript (/help at 80x24) is shown from its first line; PageDown reads on."""
        view = self.view
        if widget.is_mounted and widget.outer_size.height > view.scrollable_content_region.height:
            view.anchor(False)  # the next message sent anchors it to the bottom again
            view.scroll_to_widget(widget, top=True, animate=False, immediate=True)

    # -- hints and the human's commands ----------------------------------------------------

    async def hinted(self, hint_id: str, text: str, mode: str) -> None:
        """A hint (on disk already) shown as pending."""
        entry = Entry.of(render.pending_hint(hint_id, text, mode))
        await self.view.add(entry)
        self.hints[hint_id] = entry

    async def hints_delivered(self, event: ev.HintDelivered) -> None:
        """A delivered hint moves to where it landed: after the result it followed, or the turn's end."""
        for hint_id in event.hint_ids:
            entry = self.hints.pop(hint_id, None)
            if entry is None:
                continue
            line = render.hint_line(hint_id, entry.body, event.where)
            entry.text, entry.state = line.text, line.state
            await self.view.move_to_end(entry)

    async def shell_started(self, command: str) -> None:
        """The human's `!command` runs: its line says so until it ran."""
        await self.drop_welcome()
        entry = Entry("tool", f"! {command} … running (yours: its output goes to the agent as your words)")
        self.shells[command] = entry
        await self.view.add(entry)

    async def shell_ran(self, run: ev.ShellRan) -> None:
        """`!command` ran in the agent's sandbox: its output is shown, queued as the human's own words."""
        await self.drop_welcome()
        entry = self.shells.pop(run.command, None) or Entry("tool", "")
        code = f"exit {run.exit_code}" if run.exit_code is not None else "error"
        entry.text = f"! {run.command} → {code} · {run.hint_id} queued: {run.read_when}"
        entry.body, entry.key, entry.state = run.output, run.hint_id, "exit" if run.exit_code is not None else "error"
        await self.redraw(entry)

    # -- the model's work ----------------------------------------------------------------

    async def stream_thinking(self, text: str) -> None:
        """Thinking gathers into one folded line per block."""
        if self.thinking is None:
            self.thinking = Entry("thinking", "thinking", "")
            await self.view.add(self.thinking)
        self.thinking.body += text

    def block_stopped(self) -> None:
        """A block ended: the next thinking is a line of its own."""
        self.thinking = None

    async def tool_started(self, event: ev.ToolStarted) -> None:
        """A call's line appears when it starts (and changes in place when it finishes)."""
        await self.view.end_text()
        entry = Entry.of(render.event_lines(event)[0])
        self.calls[event.call.id] = (event.call, entry)
        await self.view.add(entry)

    async def tool_finished(self, event: ev.ToolFinished) -> None:
        """A finished call's line takes its state in place (added when its start was never drawn)."""
        await self.view.end_text()
        line = render.tool_line(render.finished_view(event))
        entry = self.calls.pop(event.call.id, (event.call, Entry.of(line)))[1]
        entry.text, entry.body, entry.state = line.text, line.body, line.state
        await self.redraw(entry)

    def mark_calls(self, tool: str, state: str) -> None:
        """Running calls of `tool` say whether they wait for the human."""
        for call, entry in self.calls.values():
            if call.name == tool:
                line = render.tool_line(render.ToolView(call, state))
                entry.text, entry.state = line.text, line.state
                self.view.sync(entry)

    async def subagent_started(self, event: ev.SubagentStarted) -> None:
        """A sub-agent is one folded line that stays live: its latest step on the line, every step unfolded."""
        await self.view.end_text()
        line = render.event_lines(event)[0]
        entry = Entry("subagent", line.text, "", event.id, "running")
        self.subagents[event.id] = (line.text, entry)
        await self.view.add(entry)

    async def subagent_changed(self, event: ev.SubagentStep | ev.SubagentEnded) -> None:
        """A running sub-agent's line: the call under way, the step it just took, or how it ended."""
        await self.view.end_text()
        if event.id not in self.subagents:
            return
        head, entry = self.subagents[event.id]
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
        self.view.sync(entry)

    async def interrupted(self) -> None:
        """Esc: close the live reply, mark running calls interrupted, say so."""
        await self.view.end_text()
        for call, entry in self.calls.values():
            line = render.tool_line(render.ToolView(call, "interrupted"))
            entry.text, entry.state = line.text, line.state
            self.view.sync(entry)
        self.calls = {}
        for sid in list(self.subagents):  # Esc stopped them too: their end was never said
            await self.subagent_changed(ev.SubagentEnded(sid, "interrupted", "stopped by the human"))
        await self.view.add(Entry.of(render.event_lines(ev.Interrupted(""))[0]))

    async def redraw(self, entry: Entry) -> None:
        """Draw an entry whose data changed (added when it was never drawn)."""
        if entry not in self.view.entries:
            await self.view.add(entry)
        self.view.sync(entry)
