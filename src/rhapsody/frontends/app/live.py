"""The reply streaming now: one Static drawn as the finished reply will be, parsed at most once a frame.

Textual's `Markdown` widget mounts a child per block, restyles its blocks on every mount and lays the
screen out again for each append; this is one widget whose text is Rich's Markdown, as a finished
reply's is (widgets.py `Entry.widget`), so the reply keeps its lines when it ends and its widget
stays. The deltas that arrive between two frames cost one parse: the Markdown is built when the
frame draws it, not when the text arrives.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from textual.widgets import Static


class LiveReply(Static):
    """The live reply: its text so far, as Markdown."""

    def __init__(self) -> None:
        super().__init__(classes="assistant live")

    def show(self, text: str) -> None:
        """Draw `text`, the whole reply so far, at the next frame."""
        self.update(MarkdownSoFar(text))

    def finish(self, text: str) -> None:
        """The reply ended: it is an ordinary finished reply from now on."""
        self.update(MarkdownSoFar(text))
        self.remove_class("live")


class MarkdownSoFar:
    """Rich's Markdown of `text`, parsed the first time it is measured or drawn; its lines kept for each width.

    Textual renders a Rich renderable twice a frame, once to measure its height and once to draw it;
    the second, and any frame that draws the same text again, reuses the first's segments.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self._parsed: Any = None
        self._drawn: dict[tuple[object, ...], list[Segment]] = {}

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> list[Segment]:
        key = (options.max_width, options.min_width, options.height, options.justify, options.overflow,
               options.no_wrap, options.highlight, options.markup, options.legacy_windows)
        drawn = self._drawn.get(key)
        if drawn is None:
            if self._parsed is None:
                from rich.markdown import Markdown  # markdown-it loads with the first reply

                self._parsed = Markdown(self.text)
            drawn = self._drawn[key] = list(console.render(self._parsed, options))
        return drawn
