"""Widgets of the app: the prompt, the status bar and the windowed transcript.

The transcript keeps every entry as data and mounts only the newest WINDOW of them, so a
resumed session of thousands of messages paints as fast as a short one; older entries are
mounted on demand. Finished text renders as one Static each; only the reply being
streamed is a Markdown widget fed through `MarkdownStream`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.markdown import Markdown as RichMarkdown
from textual import events
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Button, Markdown, Static, TextArea

from rhapsody.commands import COMMANDS

WINDOW = 40
TRIM = 20
RESULT_PREVIEW = 4000
LIVE_SPLIT = 1500


class PromptInput(TextArea):
    """Multi-line input that stays live while the agent works.

    | Key | Action |
    | :- | :- |
    | enter | Send (a hint while the agent works, a new turn while idle). |
    | ctrl+n | Queue for the end of the turn instead of steering now. |
    | ctrl+j | New line. |
    | tab | Complete a slash command. |
    """

    class Submitted(Message):
        """The human sent the text; `queue` asks for end-of-turn delivery."""

        def __init__(self, text: str, queue: bool) -> None:
            self.text = text
            self.queue = queue
            super().__init__()

    async def _on_key(self, event: events.Key) -> None:
        if event.key in ("enter", "ctrl+n"):
            event.stop()
            event.prevent_default()
            text = self.text
            if text.strip():
                self.clear()
                self.post_message(self.Submitted(text.strip(), queue=event.key == "ctrl+n"))
            return
        if event.key == "ctrl+j":
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if event.key == "tab" and self.text.startswith("/"):
            event.stop()
            event.prevent_default()
            matches = completions(self.text)
            if matches:
                self.text = matches[0] + " "
                self.move_cursor(self.document.end)
            return
        await super()._on_key(event)


def completions(text: str) -> list[str]:
    """Slash commands that start with what was typed."""
    word = text.split(" ", 1)[0]
    return [name for name in COMMANDS if name.startswith(word)]


class StatusBar(Static):
    """One line of truth: model, context, cache, cost, git, directory, seams."""

    state: reactive[str] = reactive("idle")
    """idle, working, or a short note."""


@dataclass
class Entry:
    """One transcript item as data; `widget()` builds what is mounted for it."""

    kind: str
    text: str = ""
    title: str = ""
    classes: str = ""
    key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def widget(self) -> Widget:
        """A fresh widget for this entry."""
        classes = f"{self.kind} {self.classes}".strip()
        if self.kind == "assistant":
            return Static(RichMarkdown(self.text), classes="assistant")
        if self.kind in ("tool", "seam", "thinking"):
            return Foldable(self.title, self.text, classes=classes)
        return Static(self.text, markup=False, classes=classes)


class Foldable(Static, can_focus=True):
    """One line (a tool call, a seam, thinking) that unfolds to its full text on click or Enter.

    A single widget per entry: a Collapsible is four, and the transcript's paint time
    grows with the node count.
    """

    BINDINGS = [("enter", "fold", "Unfold")]

    expanded: reactive[bool] = reactive(False)
    """Whether the body is shown under the title."""

    def __init__(self, title: str, body: str, classes: str = "") -> None:
        super().__init__(markup=False, classes=classes)
        self.title = title
        self.body = body

    def render(self) -> Any:
        from rich.text import Text

        mark = "▼" if self.expanded else "▶"
        if not self.expanded:
            return Text(f"{mark} {self.title}", no_wrap=True, overflow="ellipsis")
        body = self.body[:RESULT_PREVIEW] + ("\n[…]" if len(self.body) > RESULT_PREVIEW else "")
        return Text(f"{mark} {self.title}\n{body}")

    def on_click(self) -> None:
        self.expanded = not self.expanded

    def action_fold(self) -> None:
        """Fold or unfold."""
        self.expanded = not self.expanded


class TranscriptView(VerticalScroll):
    """The conversation, windowed: data for everything, widgets for the newest entries."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entries: list[Entry] = []
        self.first_mounted = 0
        self.widgets: dict[int, Widget] = {}
        self.live: Markdown | None = None
        self.live_stream: Any = None
        self.live_text: list[str] = []
        self.live_chunks: list[int] = []
        """Entries that hold earlier chunks of the reply still streaming."""

    def compose(self) -> ComposeResult:
        yield Button("▲ earlier entries", id="earlier", classes="hidden")

    async def add(self, entry: Entry) -> Widget:
        """Append an entry and mount its widget at the bottom."""
        self.entries.append(entry)
        index = len(self.entries) - 1
        widget = entry.widget()
        self.widgets[index] = widget
        await self.mount(widget)
        await self._trim()
        return widget

    async def load(self, entries: list[Entry]) -> None:
        """Replace everything with `entries`, mounting only the newest WINDOW."""
        old = list(self.widgets.values())
        if old:
            await self.remove_children(old)
        self.entries = list(entries)
        self.first_mounted = max(0, len(entries) - WINDOW)
        widgets = {i: entries[i].widget() for i in range(self.first_mounted, len(entries))}
        self.widgets = widgets
        if widgets:
            await self.mount_all(list(widgets.values()))
        self._update_earlier()
        self.scroll_end(animate=False)

    async def load_earlier(self, count: int = 50) -> None:
        """Mount up to `count` older entries above the window."""
        start = max(0, self.first_mounted - count)
        new = {i: self.entries[i].widget() for i in range(start, self.first_mounted)}
        if new:
            await self.mount_all(list(new.values()), after=self.query_one("#earlier"))
        self.widgets.update(new)
        self.first_mounted = start
        self._update_earlier()

    async def _trim(self) -> None:
        mounted = len(self.entries) - self.first_mounted
        if mounted <= WINDOW + TRIM:
            return
        doomed = range(self.first_mounted, self.first_mounted + TRIM)
        for i in doomed:
            widget = self.widgets.pop(i, None)
            if widget is not None:
                await widget.remove()
        self.first_mounted += TRIM
        self._update_earlier()

    def _update_earlier(self) -> None:
        button = self.query_one("#earlier", Button)
        button.label = f"▲ {self.first_mounted} earlier entries (ctrl+u loads more)"
        button.set_class(self.first_mounted == 0, "hidden")

    def widget_for(self, index: int) -> Widget | None:
        """The mounted widget of entry `index`, if it is in the window."""
        return self.widgets.get(index)

    # -- the live reply ---------------------------------------------------------------

    async def stream_text(self, text: str) -> None:
        """Append streamed text to the live reply, starting one when needed.

        A Markdown widget re-parses and re-lays-out its last block on every append, so one
        widget fed a whole long reply costs time quadratic in its size. Past LIVE_SPLIT
        characters the reply moves to a fresh widget at the next line break (inside a code
        fence too: the fence is closed on screen and reopened in the next widget), which
        keeps every append bounded and the whole stream linear.
        """
        if self.live is not None and "\n" in text and self._live_chars() > LIVE_SPLIT:
            cut = text.rindex("\n") + 1
            await self._write_live(text[:cut])
            fence = self._open_fence()
            count = len(self.entries)
            await self._close_live(discard=False)
            self.live_chunks += range(count, len(self.entries))  # void if the stream is retried
            text = (fence + "\n" if fence else "") + text[cut:]
        if text:
            await self._write_live(text)

    async def _write_live(self, text: str) -> None:
        if self.live is None:
            self.anchor()
            self.live = Markdown(classes="assistant live")
            self.live_text = []
            await self.mount(self.live)
            self.live_stream = Markdown.get_stream(self.live)
        self.live_text.append(text)
        await self.live_stream.write(text)

    def _open_fence(self) -> str:
        """The opening line of a code fence left open in the live text, or ''."""
        opener = ""
        for line in "".join(self.live_text).splitlines():
            stripped = line.strip()
            if stripped.startswith(("```", "~~~")):
                opener = "" if opener and stripped[:3] == opener.strip()[:3] and stripped.strip("`~") == "" \
                    else (opener or stripped)
        return opener

    def _live_chars(self) -> int:
        return sum(len(t) for t in self.live_text)

    async def end_text(self, discard: bool = False) -> None:
        """Close the live reply; keep it as an entry, or drop it with its earlier chunks (a retried stream)."""
        chunks, self.live_chunks = self.live_chunks, []
        if discard:
            for index in chunks:
                widget = self.widgets.pop(index, None)
                if widget is not None:
                    await widget.remove()
                self.entries[index] = Entry("assistant", "")
        await self._close_live(discard)

    async def _close_live(self, discard: bool) -> None:
        if self.live is None:
            return
        await self.live_stream.stop()
        live, text = self.live, "".join(self.live_text)
        self.live, self.live_stream, self.live_text = None, None, []
        if discard or not text.strip():
            await live.remove()
            return
        entry = Entry("assistant", text)
        self.entries.append(entry)
        # A finished reply becomes one Static: a Markdown widget keeps a child per block,
        # and every child is laid out again whenever the transcript changes.
        static = entry.widget()
        self.widgets[len(self.entries) - 1] = static
        await self.mount(static, after=live)
        await live.remove()
        await self._trim()
