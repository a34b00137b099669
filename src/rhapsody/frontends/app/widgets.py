"""Widgets of the app: the prompt, the status bar and the windowed transcript.

The transcript keeps every entry as data and mounts only the newest WINDOW of them, so a
resumed session of thousands of messages paints as fast as a short one; older entries are
mounted on demand. Finished text renders as one Static each; only the reply being
streamed is a Markdown widget fed through `MarkdownStream`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Button, Static

from rhapsody.view.sink import visible

if TYPE_CHECKING:  # the renderer loads after the first frame
    from rhapsody.view.render import Line

WINDOW = 40
TRIM = 20
RESULT_PREVIEW = 4000
LIVE_SPLIT = 1500
FOLDABLE = ("tool", "seam", "thinking", "harness", "rewound", "attached", "subagent")


class StatusBar(Static):
    """One line of truth: model, context, cache, cost, git, directory, seams."""

    state: reactive[str] = reactive("idle")
    """idle, working, or a short note."""


@dataclass(eq=False)
class Entry:
    """One transcript item as data; `widget()` builds what is mounted for it (hashed by identity)."""

    kind: str
    text: str = ""
    body: str = ""
    key: str = ""
    state: str = ""

    def __setattr__(self, name: str, value: Any) -> None:
        # Every word the transcript draws passes the one sink's function, however the entry got it.
        super().__setattr__(name, visible(value) if name in ("text", "body") else value)

    @classmethod
    def of(cls, line: Line) -> Entry:
        """The entry of a rendered line."""
        return cls(line.kind, line.text, line.body, line.key, line.state)

    @property
    def classes(self) -> str:
        """CSS classes: the kind, and the state where it changes the colour."""
        bad = self.state in ("error", "denied", "interrupted") or (self.state == "exit" and "→ exit 0 " not in self.text)
        return f"{self.kind} {'error' if bad else ''}".strip()

    def widget(self) -> Widget:
        """A fresh widget for this entry."""
        if self.kind == "assistant":
            from rich.markdown import Markdown as RichMarkdown  # markdown-it loads with the first reply

            return Static(RichMarkdown(self.text), classes="assistant")
        if self.kind in FOLDABLE:
            return Foldable(self)
        if self.kind in ("notice", "error"):
            return NoticeLine(self)
        return Static(Text(self.text), classes=self.classes)


class NoticeLine(Static):
    """A command's output: wrapped lines hang under where their text starts (the /help table stays a table)."""

    def __init__(self, entry: Entry) -> None:
        super().__init__(classes=entry.classes)
        self.entry = entry

    def render(self) -> Any:
        return Hanging(self.entry.text)


class Hanging:
    """Text wrapped with hanging indents at whatever width it is drawn (measured and painted alike)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rhapsody.view.render import hanging

        yield Text(hanging(self.text, options.max_width), no_wrap=False)


class Foldable(Static, can_focus=True):
    """One line (a tool call, a seam, thinking) that unfolds to its text on click or Enter.

    A single widget per entry: a Collapsible is four, and the transcript's paint time
    grows with the node count. Printable keys typed here go to the prompt.

    | Key | Action |
    | :- | :- |
    | enter | Unfold; on an unfolded line: fold it, or on a cut output open the full view. |
    | escape, left | Fold an unfolded line (while the agent works, Esc interrupts it instead: that key is never taken). |
    | up, down | Previous or next line; past the first, earlier entries load (focus stays in the transcript). |
    | tab | Back to the prompt. |
    """

    BINDINGS = [
        Binding("enter", "unfold", "Unfold"),
        Binding("enter", "full_view", "Full view"),
        Binding("enter", "fold_whole", "Fold"),
        Binding("escape", "fold_idle", "Fold"),
        Binding("left", "fold", "Fold", show=False),
        Binding("up", "step(-1)", "Previous", show=False),
        Binding("down", "step(1)", "Next", show=False),
        Binding("tab", "to_prompt", "Prompt", show=False),
    ]

    expanded: reactive[bool] = reactive(False, layout=True)
    """Whether the body is shown under the title."""

    class FullView(Message):
        """Open the whole output of this entry."""

        def __init__(self, entry: Entry) -> None:
            self.entry = entry
            super().__init__()

    def __init__(self, entry: Entry) -> None:
        super().__init__(classes=entry.classes)
        self.entry = entry

    @property
    def title(self) -> str:
        """The folded line."""
        return self.entry.text

    @property
    def cut(self) -> bool:
        """Whether the unfolded body is a preview of a longer output."""
        return len(self.entry.body) > RESULT_PREVIEW

    def render(self) -> Any:
        mark = "▼" if self.expanded else "▶"
        if not self.expanded:
            title = self.title
            if self.entry.kind == "tool" and self.size.width:
                title = wrap_title(title, self.content_size.width - 2)
            return Text(f"{mark} {title}") + self.peeked()
        body = self.entry.body[:RESULT_PREVIEW]
        if self.cut:
            body = body[: body.rfind("\n")] if "\n" in body else body  # whole lines only
            more = len(self.entry.body) - len(body)
            body += f"\n[… {more:,} more characters: Enter for the full view, Esc folds]"
        title = self.title.split(" · recall ", 1)[0] if self.entry.body.startswith("recall ") else self.title
        if self.entry.kind == "tool" and self.entry.state in ("error", "denied"):
            from rhapsody.view.render import unfolded_title

            title = unfolded_title(title)  # the reason once: the body holds it whole
        return Text(f"{mark} {title}\n{body or '(empty)'}")  # whole, but a recall id once: the body's first line

    def peeked(self) -> Text:
        """The first lines of a finished call's result (an applied diff's, coloured) under the folded line."""
        if self.entry.kind != "tool":
            return Text()
        from rhapsody.view.peek import applied_diff, peek

        result_lines, diff_lines = getattr(self.app, "peek_rows", (4, 12))
        lines = [line.expandtabs(4) for line in peek(self.entry.body, self.entry.state, result_lines, diff_lines,
                                                          self.entry.text)]
        if not lines:
            return Text()
        if applied_diff(self.entry.body):
            from rhapsody.frontends.app.diff_style import diff_text

            shown = diff_text("\n".join(lines))
        else:
            shown = Text("\n".join(lines), style="dim")
        text = Text()
        room = max(8, self.content_size.width - 4)
        for i, line in enumerate(shown.split()):
            line.truncate(room, overflow="ellipsis")  # a result's lines are cut, never wrapped: the lines stay few
            text.append("\n    " if i else "\n  ⎿ ")
            text.append_text(line)
        return text

    def watch_expanded(self, expanded: bool) -> None:
        self.set_class(expanded, "-expanded")
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # One key model, said in the footer: Enter unfolds, then opens the full view of a cut
        # output or folds a whole one; Esc and Left fold. A folded line lets Esc reach the app.
        if action == "unfold":
            return not self.expanded
        if action == "full_view":
            return self.expanded and self.cut
        if action == "fold_whole":
            return self.expanded and not self.cut
        if action == "fold":
            return self.expanded
        if action == "fold_idle":  # Esc stops a working agent wherever the focus is
            return self.expanded and not getattr(self.app, "busy", False)
        return True

    def sync(self) -> None:
        """Redraw after the entry changed (a call finished)."""
        self.set_classes(self.entry.classes)
        self.set_class(self.expanded, "-expanded")
        self.refresh(layout=True)

    def on_click(self) -> None:
        self.expanded = not self.expanded

    def action_unfold(self) -> None:
        """Show the body under the title."""
        self.expanded = True

    def action_fold(self) -> None:
        """Show the title alone."""
        self.expanded = False

    def action_fold_idle(self) -> None:
        """Esc on an unfolded line while the agent is idle: fold it."""
        self.expanded = False

    def action_fold_whole(self) -> None:
        """Enter on an unfolded output shown whole folds it."""
        self.expanded = False

    def action_full_view(self) -> None:
        """Open the whole output of a cut one."""
        self.post_message(self.FullView(self.entry))

    async def action_step(self, by: int) -> None:
        """Focus the line `by` steps away; past the first, earlier entries are mounted; past either end, stay."""
        view = self.parent
        if not isinstance(view, TranscriptView):
            return
        lines = view.foldables()
        while lines.index(self) + by < 0 and view.first_mounted > 0:
            await view.load_earlier()
            lines = view.foldables()
        index = lines.index(self) + by
        if 0 <= index < len(lines):
            lines[index].focus()
        else:
            self.scroll_visible(animate=False)

    def action_to_prompt(self) -> PromptInput:
        """Back to the prompt, at once: the keys that follow go to it even if they are already queued."""
        prompt = self.app.query_one(PromptInput)
        self.screen.set_focus(prompt)
        return prompt

    def on_key(self, event: events.Key) -> None:
        prompt = self.app.query_one(PromptInput)
        if self.app.focused is prompt:  # focus moved on while these keys were queued here: they follow it, in order
            event.stop()
            event.prevent_default()
            self.app.post_message(events.Key(event.key, event.character))
        elif event.key == "tab":
            event.stop()
            event.prevent_default()
            self.action_to_prompt()
        elif event.is_printable and event.character and event.key not in ("enter", "tab"):
            event.stop()
            event.prevent_default()
            self.action_to_prompt().insert(event.character)


def wrap_title(title: str, width: int) -> str:
    """A folded call's line for `width` columns: only the command or path is cut, so that it and the outcome
    start on the first row; the reason of a refusal and a stripped call's recall id stay whole and wrap."""
    from rhapsody.view.render import OUTCOME

    found = list(OUTCOME.finditer(title))
    if len(title) <= width or not found or width < 20:
        return title
    head, outcome = title[: found[-1].start()], title[found[-1].start():]
    state = outcome.split(": ", 1)[0].split(" · ", 1)[0]
    room = max(12, width - len(state))
    return (head if len(head) <= room else head[: room - 1] + "…") + outcome


class TranscriptView(VerticalScroll):
    """The conversation, windowed: data for everything, widgets for the newest entries."""

    can_focus = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entries: list[Entry] = []
        self.first_mounted = 0
        self.widgets: dict[Entry, Widget] = {}
        self.live: Any = None
        self.live_stream: Any = None
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
            self.live_chunks += self.entries[count:]  # void if the stream is retried
            text = (fence + "\n" if fence else "") + text[cut:]
        if text:
            await self._write_live(text)

    async def _write_live(self, text: str) -> None:
        if self.live is None:
            from textual.widgets import Markdown

            self.anchor()
            self.live = Markdown(classes="assistant live")
            self.live_text = []
            await self.mount(self.live, before=self._pinned_widget())
            self.live_stream = Markdown.get_stream(self.live)
        text = visible(text)  # the model's words never drive the terminal
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
            for entry in chunks:
                if entry in self.entries:
                    await self.remove_entry(entry)
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
        self._insert(entry)
        # A finished reply becomes one Static: a Markdown widget keeps a child per block,
        # and every child is laid out again whenever the transcript changes.
        static = entry.widget()
        self.widgets[entry] = static
        await self.mount(static, after=live)
        await live.remove()
        await self._trim()


from rhapsody.frontends.app.prompt import PromptInput  # noqa: E402  (the prompt imports nothing from here)

__all__ = ["Entry", "Foldable", "NoticeLine", "PromptInput", "StatusBar", "TranscriptView"]
