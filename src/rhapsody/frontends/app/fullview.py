"""The full view of one tool output: the result as the history holds it, scrollable, with search.

That is the result the agent received, so an output longer than the output cap is shown
capped, as the agent saw it, and the title says so with the original size. The view has no
line numbers of its own: read_file and search output carry the file's own numbers, and a
second column counting the lines of a capped result would disagree with them after the cut.

| Key | Action |
| :- | :- |
| enter | Next match of the search text. |
| pageup, pagedown, up, down | Scroll. |
| ctrl+home, ctrl+end | Top, bottom. |
| escape | Close. |
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static, TextArea
from textual.widgets.text_area import Selection

from rhapsody.view.sink import visible


class FullView(ModalScreen[None]):
    """A read-only, searchable view of a long text."""

    AUTO_FOCUS = "#search"

    BINDINGS = [
        Binding("escape", "dismiss_view", "Close"),
        Binding("pageup", "scroll('page_up')", "Page up", show=False),
        Binding("pagedown", "scroll('page_down')", "Page down", show=False),
        Binding("up", "scroll('up')", show=False),
        Binding("down", "scroll('down')", show=False),
        Binding("ctrl+home", "scroll('home')", show=False),
        Binding("ctrl+end", "scroll('end')", show=False),
    ]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.text = text
        self.match_at = -1

    def compose(self) -> ComposeResult:
        with Vertical(id="fullview"):
            yield Static(Text(visible(f"{self.title_text}  ({self.size_said()}; Esc closes)")), classes="why")
            yield TextArea(self.text, read_only=True, id="fulltext", soft_wrap=True, show_line_numbers=False)
            yield Input(placeholder="search (Enter: next match)", id="search")
            yield Static("", id="found")

    def size_said(self) -> str:
        """The text's size, and when the output cap cut it, that this is the capped result."""
        from rhapsody.core.toolbox.output_caps import original_size

        was = original_size(self.text)
        if was is None:
            return f"{len(self.text):,} characters"
        return (f"the result as the agent received it: capped to {len(self.text):,} characters of {was}, "
                "the middle cut")

    def on_mount(self) -> None:
        self.query_one("#fulltext", TextArea).cursor_blink = False

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.find(event.value)

    def find(self, needle: str) -> bool:
        """Select the next occurrence of `needle`, wrapping around; False when there is none."""
        found = self.query_one("#found", Static)
        if not needle:
            return False
        haystack = self.text.lower()
        at = haystack.find(needle.lower(), self.match_at + 1)
        if at < 0:
            at = haystack.find(needle.lower())
        if at < 0:
            found.update(Text(f"no match for {needle!r}"))
            return False
        self.match_at = at
        area = self.query_one("#fulltext", TextArea)
        start = _location(self.text, at)
        end = _location(self.text, at + len(needle))
        area.selection = Selection(start, end)
        area.scroll_cursor_visible(center=True, animate=False)
        count = haystack.count(needle.lower())
        found.update(Text(f"match {haystack.count(needle.lower(), 0, at) + 1} of {count}, line {start[0] + 1} of this text"))
        return True

    def action_scroll(self, how: str) -> None:
        """Scroll the text."""
        area = self.query_one("#fulltext", TextArea)
        getattr(area, f"scroll_{how}")(animate=False)

    def action_dismiss_view(self) -> None:
        """Close the view."""
        self.dismiss(None)


def _location(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    row = before.count("\n")
    return row, offset - (before.rfind("\n") + 1)
