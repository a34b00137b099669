"""The windowed transcript: every entry kept as data, widgets mounted only for the newest WINDOW.

A resumed session of thousands of messages paints as fast as a short one; older entries are
mounted on demand. Text renders as one Static each, Rich's Markdown of it, the reply being streamed too
(`LiveReply`, drawn as it will be once finished); widgets.py holds the entries and their widgets.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Button, Static

from rhapsody.frontends.app.live import LiveReply
from rhapsody.frontends.app.widgets import LIVE_SPLIT, TRIM, WINDOW, Entry, Foldable, NoticeLine
from rhapsody.view.sink import visible


class TranscriptView(VerticalScroll):
    """The conversation, windowed: data for everything, widgets for the newest entries."""

    can_focus = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entries: list[Entry] = []
        self.first_mounted = 0
        self.widgets: dict[Entry, Widget] = {}
        self.live: LiveReply | None = None
        self.live_text: list[str] = []
        self.live_chunks: list[Entry] = []
        """Entries that hold earlier chunks of the reply still streaming."""
        self.pinned: list[Entry] = []
        """Entries said while a reply streams: they stay below it, where history records them."""

    def compose(self) -> ComposeResult:
        yield Button("▲ earlier entries", id="earlier", classes="hidden")

    async def add(self, entry: Entry, pin: bool = False) -> Widget:
        """Append an entry and mount its widget at the bottom, above the pinned entries unless `pin`."""
        below = None if pin else self._pinned_widget()
        self._insert(entry, pin)
        widget = entry.widget()
        self.widgets[entry] = widget
        await self.mount(widget, before=below)
        await self._trim()
        return widget

    def foldables(self) -> list[Foldable]:
        """The mounted lines that take focus, top to bottom."""
        return [w for w in self.children if isinstance(w, Foldable)]

    def unpin(self) -> None:
        """The reply ended: pinned entries become ordinary ones, and new entries go below them."""
        self.pinned = []

    def _insert(self, entry: Entry, pin: bool = False) -> None:
        if pin:
            self.pinned.append(entry)
        if pin or not self.pinned:
            self.entries.append(entry)
        else:
            self.entries.insert(self.entries.index(self.pinned[0]), entry)

    def _pinned_widget(self) -> Widget | None:
        return self.widgets.get(self.pinned[0]) if self.pinned else None

    async def remove_entry(self, entry: Entry) -> None:
        """Take one entry out."""
        index = self.entries.index(entry)
        self.entries.pop(index)
        if entry in self.pinned:
            self.pinned.remove(entry)
        if index < self.first_mounted:
            self.first_mounted -= 1
        widget = self.widgets.pop(entry, None)
        if widget is not None:
            await widget.remove()

    async def move_to_end(self, entry: Entry) -> None:
        """Move an entry to the bottom (a hint lands where it was delivered)."""
        if entry in self.entries:
            await self.remove_entry(entry)
        await self.add(entry)

    def sync(self, entry: Entry) -> None:
        """Redraw the widget of an entry whose data changed."""
        widget = self.widgets.get(entry)
        if isinstance(widget, Foldable):
            widget.sync()
        elif isinstance(widget, NoticeLine):
            widget.set_classes(entry.classes)
            widget.refresh(layout=True)
        elif isinstance(widget, Static):
            widget.update(Text(entry.text))
            widget.set_classes(entry.classes)

    async def load(self, entries: list[Entry]) -> None:
        """Replace everything with `entries`, mounting only the newest WINDOW."""
        old = list(self.widgets.values())
        if old:
            await self.remove_children(old)
        self.entries = list(entries)
        self.pinned = []  # a rebuild comes from history, where pinned entries are recorded by now
        self.first_mounted = max(0, len(entries) - WINDOW)
        self.widgets = {e: e.widget() for e in entries[self.first_mounted:]}
        if self.widgets:
            await self.mount_all(list(self.widgets.values()))
        self._update_earlier()
        self.scroll_end(animate=False)
        self.anchor()

    async def load_earlier(self, count: int = 50) -> None:
        """Mount up to `count` older entries above the window."""
        start = max(0, self.first_mounted - count)
        new = {e: e.widget() for e in self.entries[start:self.first_mounted]}
        if new:
            await self.mount_all(list(new.values()), after=self.query_one("#earlier"))
        self.widgets.update(new)
        self.first_mounted = start
        self._update_earlier()

    async def _trim(self) -> None:
        mounted = len(self.entries) - self.first_mounted
        if mounted <= WINDOW + TRIM:
            return
        for entry in self.entries[self.first_mounted:self.first_mounted + TRIM]:
            widget = self.widgets.pop(entry, None)
            if widget is not None:
                await widget.remove()
        self.first_mounted += TRIM
        self._update_earlier()

    def _update_earlier(self) -> None:
        button = self.query_one("#earlier", Button)
        button.label = f"▲ {self.first_mounted} earlier {'entry' if self.first_mounted == 1 else 'entries'} (ctrl+l loads more)"
        button.set_class(self.first_mounted == 0, "hidden")

    # -- the live reply ---------------------------------------------------------------

    async def stream_text(self, text: str) -> None:
        """Append streamed text to the live reply, starting one when needed.

        The live reply is parsed again whole each frame it changes, so one widget fed a whole long
        reply would cost time quadratic in its size. Past LIVE_SPLIT characters the reply moves to a
        fresh widget at the next line break (inside a code fence too: the fence is closed on screen
        and reopened in the next widget), which keeps every frame's parse bounded and the whole
        stream linear.
        """
        if self.live is not None and "\n" in text and self._live_chars() > LIVE_SPLIT:
            cut = text.rindex("\n") + 1
            await self._write_live(text[:cut])
            fence = self._open_fence()
            count = len(self.entries)
            await self._close_live(discard=False)
            self.live_chunks += self.entries[count:]  # void if the stream is retried
            text = (fence + "\n" if fence else "") + text[cut:]
        if text:
            await self._write_live(text)

    async def _write_live(self, text: str) -> None:
        if self.live is None:
            self.anchor()
            self.live = LiveReply()
            self.live_text = []
            await self.mount(self.live, before=self._pinned_widget())
        text = visible(text)  # the model's words never drive the terminal
        self.live_text.append(text)
        self.live.show("".join(self.live_text))

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
            for entry in chunks:
                if entry in self.entries:
                    await self.remove_entry(entry)
        await self._close_live(discard)

    async def _close_live(self, discard: bool) -> None:
        if self.live is None:
            return
        live, text = self.live, "".join(self.live_text)
        self.live, self.live_text = None, []
        if discard or not text.strip():
            await live.remove()
            return
        entry = Entry("assistant", text)
        self._insert(entry)
        self.widgets[entry] = live
        live.finish(entry.text)  # the widget stays: it was drawn as the finished reply is
        await self._trim()
