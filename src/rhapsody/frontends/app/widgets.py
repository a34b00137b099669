"""The transcript's entries as data and the widgets drawn for them: a line, a command's output, a foldable line.

The windowed view that holds them is transcript.py; the prompt is prompt.py, the status bar status_bar.py
(both named here too, where the app's widgets have always been found).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Self, runtime_checkable

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from rhapsody.view.sink import visible

if TYPE_CHECKING:  # the renderer loads after the first frame
    from rhapsody.view.render import Line

WINDOW = 40
TRIM = 20
RESULT_PREVIEW = 4000
LIVE_SPLIT = 1500
FOLDABLE = ("tool", "seam", "thinking", "harness", "rewound", "attached", "subagent")


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


@runtime_checkable
class Lines(Protocol):
    """What a foldable line steps through: the transcript (transcript.py, which imports this module)."""

    first_mounted: int

    def foldables(self) -> list[Foldable]:
        """The mounted lines that take focus, top to bottom."""
        ...

    async def load_earlier(self, count: int = 50) -> None:
        """Mount older entries above the window."""
        ...


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

    _restyling = False
    """Whether the focus restyles the line now (`watch_has_focus`)."""

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

    def watch_has_focus(self, _has_focus: bool) -> None:
        """Restyle for the focus, without a layout: `Foldable:focus` changes colours and the edge drawn over the
        padding, never a size, but Textual lays the whole screen out again when an outline edge comes or goes."""
        self._restyling = True
        try:
            super().watch_has_focus(_has_focus)
        finally:
            self._restyling = False

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False) -> Self:
        """As Textual's, with no layout asked for while the focus restyles the line (`watch_has_focus`)."""
        return super().refresh(*regions, repaint=repaint, layout=layout and not self._restyling, recompose=recompose)

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
        if not isinstance(view, Lines):
            return
        lines = view.foldables()
        while lines.index(self) + by < 0 and view.first_mounted > 0:
            await view.load_earlier()
            lines = view.foldables()
        index = lines.index(self) + by
        if 0 <= index < len(lines):
            self.screen.set_focus(lines[index])  # at once, not after a callback: the next queued key finds it moved
        else:
            self.scroll_visible(animate=False)

    def action_to_prompt(self) -> PromptInput:
        """Back to the prompt, at once: the keys that follow go to it even if they are already queued."""
        prompt = self.app.query_one(PromptInput)
        self.screen.set_focus(prompt)
        return prompt

    def on_key(self, event: events.Key) -> None:
        if self.app.focused is not self:  # focus moved on (another line, the prompt) while these keys were queued
            event.stop()                  # here: they follow it, in order, as a burst of Up does line by line
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


from rhapsody.frontends.app.prompt import PromptInput  # noqa: E402  (the prompt imports nothing from here)

from rhapsody.frontends.app.status_bar import StatusBar  # noqa: E402  (the bar imports nothing from here)

__all__ = ["Entry", "Foldable", "NoticeLine", "PromptInput", "StatusBar"]
