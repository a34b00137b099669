"""The reply streaming now: one Static drawn as the finished reply will be, parsed at most once a frame.

Textual's `Markdown` widget mounts a child per block, restyles its blocks on every mount and lays the
screen out again for each append; this is one widget whose text is Rich's Markdown, as a finished
reply's is (widgets.py `Entry.widget`), so the reply keeps its lines when it ends and its widget
stays. It is drawn at most once a FRAME, and the Markdown is parsed when a frame draws it, so the
deltas that arrive between two drawings cost one parse and one layout.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from textual.timer import Timer
from textual.widgets import Static


FRAME = 0.05
"""Seconds between two drawings of the live reply at the most: deltas arrive faster than a person reads, and each
drawing lays the screen out again and repaints the transcript scrolled."""


class LiveReply(Static):
    """The live reply: its text so far, as Markdown, drawn at most once a FRAME."""

    def __init__(self) -> None:
        super().__init__(classes="assistant live")
        self.text = ""
        """The reply so far, drawn or about to be."""
        self._drawn_at = 0.0
        self._due: Timer | None = None

    def show(self, text: str) -> None:
        """Draw `text`, the whole reply so far: now, or when a FRAME has passed since the last drawing."""
        self.text = text
        if self._due is not None:
            return
        wait = self._drawn_at + FRAME - time.monotonic()
        if wait <= 0:
            self._draw()
        else:
            self._due = self.set_timer(wait, self._draw)

    def finish(self, text: str) -> None:
        """The reply ended: drawn whole now, an ordinary finished reply from now on."""
        if self._due is not None:
            self._due.stop()
        self.text = text
        self._draw()
        self.remove_class("live")

    def _draw(self) -> None:
        self._due = None
        self._drawn_at = time.monotonic()
        self.update(MarkdownSoFar(self.text))


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
        # Not the height: Rich's Markdown renders at any height (it drops it), and Textual measures without one.
        key = (options.max_width, options.min_width, options.justify, options.overflow, options.no_wrap,
               options.highlight, options.markup, options.legacy_windows)
        drawn = self._drawn.get(key)
        if drawn is None:
            if self._parsed is None:
                from rich.markdown import Markdown  # markdown-it loads with the first reply

                self._parsed = Markdown(self.text)
            drawn = self._drawn[key] = list(console.render(self._parsed, options))
        return drawn
