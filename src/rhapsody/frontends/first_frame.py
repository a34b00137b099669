"""The app's first screen, written straight to the terminal before Textual is imported.

Importing Textual and laying out its first screen is most of a start; the session is built
meanwhile on one interpreter. So the command line draws the screen the app will draw first,
byte for byte on the same cells and in the same colours (the welcome with `…` for what the
session decides, the prompt, the status bar), builds the session, fills in the welcome's
facts, and only then starts the app, whose first paint lands on those cells: the terminal
is already on the alternate screen, which the app's entering again does not clear.

Only the standard library here: this runs before anything heavy is imported. A terminal too
small for the welcome to fit unwrapped gets no early frame (the app draws as before).
"""

from __future__ import annotations

import os
import sys
import termios
from typing import Any

ENTER = "\x1b[?1049h\x1b[?25l\x1b[?7l"
"""The alternate screen, the cursor hidden, no autowrap: what the app's driver sets first."""
LEAVE = "\x1b[?7h\x1b[?25h\x1b[?1049l"
BACK, BOX, TEXT = "48;5;233", "38;5;32;48;5;233", "38;5;253;48;5;233"
EDGE, FIELD, CARET, BAR = "38;5;214;48;5;234", "38;5;253;48;5;235", "38;5;233;48;5;253", "38;5;253;48;5;17"
LOW = 5
"""Rows below the transcript: a blank row under the welcome is its last; then the prompt's three, status, footer."""


def _cell(style: str, text: str) -> str:
    return f"\x1b[{style}m{text}\x1b[0m"


def _at(row: int, text: str) -> str:
    return f"\x1b[{row};1H{text}"


def welcome_rows(lines: list[str], cols: int, rows: int) -> dict[int, str]:
    """The welcome box's rows by screen row (1-based), bottom-aligned above the blank row over the prompt."""
    inner = cols - 6
    top = rows - LOW - (len(lines) + 2)
    out = {top: _cell(BACK, " ") + _cell(BOX, "╭" + "─" * (cols - 4) + "╮") + _cell(BACK, " ")}
    for i, line in enumerate(lines, start=1):
        out[top + i] = (_cell(BACK, " ") + _cell(BOX, "│") + _cell(BACK, " ") + _cell(TEXT, line) + _cell(BACK, " " * (inner - len(line)))
                        + _cell(BACK, " ") + _cell(BOX, "│") + _cell(BACK, " "))
    out[top + len(lines) + 1] = _cell(BACK, " ") + _cell(BOX, "╰" + "─" * (cols - 4) + "╯") + _cell(BACK, " ")
    return out


def screen(welcome: str, cols: int, rows: int) -> str | None:
    """The whole first screen at `cols`×`rows`; None where the welcome would not fit unwrapped."""
    lines = welcome.split("\n")
    if cols < 40 or rows - LOW - 1 < len(lines) + 2 or any(len(line) > cols - 6 or not line.isprintable() for line in lines):
        return None
    box = welcome_rows(lines, cols, rows)
    blank = _cell(BACK, " " * cols)
    body = [_at(row, box.get(row, blank)) for row in range(1, rows - LOW + 2)]
    prompt = [_cell(EDGE, "╭" + "─" * (cols - 2) + "╮"),
              _cell(EDGE, "│") + _cell("48;5;234", " ") + _cell(CARET, " ") + _cell(FIELD, " " * (cols - 5))
              + _cell("48;5;234", " ") + _cell(EDGE, "│"),
              _cell(EDGE, "╰" + "─" * (cols - 2) + "╯")]
    low = [_at(rows - 4 + i, row) for i, row in enumerate(prompt)]
    low += [_at(rows - 1, _cell(BAR, " starting…".ljust(cols))), _at(rows, _cell("48;5;17", " " * cols))]
    return ENTER + "".join(body + low)


class EarlyFrame:
    """The early frame on the terminal (none for an empty `welcome`): drawn, its welcome filled in, and left (on
    an error) or handed to the app."""

    def __init__(self, welcome: str) -> None:
        self.cols, self.rows, self.drawn = 0, 0, False
        self._attrs: list[Any] | None = None
        self._lines = len(welcome.split("\n"))
        if not welcome or os.environ.get("TERM", "dumb") == "dumb" or not (sys.stdin.isatty() and sys.stdout.isatty()):
            return
        try:
            self.cols, self.rows = os.get_terminal_size(sys.stdout.fileno())
            text = screen(welcome, self.cols, self.rows)
            if text is None:
                return
            self._quiet()
            self.drawn = self._write(text)
        except OSError:
            return

    def _quiet(self) -> None:
        """Keys typed while the session is built are not echoed over the frame; the app reads them as typed."""
        fd = sys.stdin.fileno()
        self._attrs = termios.tcgetattr(fd)
        quiet = termios.tcgetattr(fd)
        quiet[3] &= ~termios.ECHO
        termios.tcsetattr(fd, termios.TCSANOW, quiet)

    def _write(self, text: str) -> bool:
        try:
            os.write(sys.stdout.fileno(), text.encode("utf-8"))
        except OSError:  # a terminal gone meanwhile: the app's own start finds out
            return False
        return True

    def fill(self, welcome: str) -> None:
        """Redraw the welcome with what the session decided (the same rows: the box keeps its size)."""
        lines = welcome.split("\n")
        if self.drawn and len(lines) == self._lines and all(len(line) <= self.cols - 6 for line in lines):
            rows = welcome_rows(lines, self.cols, self.rows)
            self._write("".join(_at(row, text) for row, text in rows.items()))

    def hand_over(self, leave: bool = False) -> None:
        """Give the terminal back as it was found (its echo); `leave`: off the alternate screen too (an error)."""
        if self._attrs is not None:
            try:
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, self._attrs)
            except (termios.error, OSError):
                pass
            self._attrs = None
        if leave and self.drawn:
            self._write(LEAVE)
            self.drawn = False

