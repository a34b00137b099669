"""The one way text reaches a terminal: every write made visible-safe by `visible`.

Text rhapsody prints carries what others chose: a project's command descriptions and file names,
the model's words, a program's output, a history file's fields. A terminal obeys escape sequences
in any of them (OSC 52 writes the clipboard, a title change, a screen clear), so every front end
writes through a `Sink`: plain mode, headless text and JSON lines, the subcommands (`main` wraps
stdout and stderr in one while a subcommand runs), and the lines printed after the app ends.
The app draws its transcript from entries made safe the same way (frontends/app/widgets.py).
"""

from __future__ import annotations

import io
import json
import sys
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO


def visible(text: str) -> str:
    r"""`text` with control characters shown escaped (\r, \x1b...), so nothing can redraw it; \n and \t stay.

    The one function every byte for a terminal passes; what it returns passes it unchanged."""
    if text.replace("\n", "").replace("\t", "").isprintable():  # the common case, at C speed: nothing to escape
        return text
    if "\n" in text:  # only the lines that hold something to escape take the slow path (a long export, a log)
        return "\n".join(visible(line) for line in text.split("\n"))
    out = []
    for ch in text:
        code = ord(ch)
        if ch in "\n\t":
            out.append(ch)
        elif ch == "\r":
            out.append("\\r")
        elif code < 32 or code == 127 or 0x80 <= code < 0xA0 or ch in "\u2028\u2029" or unicodedata.category(ch) == "Cf":
            # Cf: bidi controls, zero-width and tag characters, which reorder or hide what a person approves
            out.append(f"\\x{code:02x}" if code < 256 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"))
        else:
            out.append(ch)
    return "".join(out)


class Sink(io.TextIOBase):
    """A text stream whose every write reaches the stream under it through `visible`."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        """Write `text` with its control and format characters shown escaped; returns len(text)."""
        self.stream.write(visible(text))
        return len(text)

    def flush(self) -> None:
        """Flush the stream under it."""
        self.stream.flush()

    def isatty(self) -> bool:
        """False: whoever asks (a table library choosing colours) must write plain text, not drive a terminal."""
        return False

    def fileno(self) -> int:
        """The descriptor of the stream under it (for the terminal's size)."""
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """The encoding of the stream under it."""
        return getattr(self.stream, "encoding", None) or "utf-8"


def safe_stream(stream: TextIO) -> TextIO:
    """`stream` through a Sink (once: a Sink is returned as it is)."""
    return stream if isinstance(stream, Sink) else Sink(stream)  # type: ignore[return-value]


@contextmanager
def terminal() -> Iterator[None]:
    """sys.stdout and sys.stderr through a Sink for the duration (a subcommand's prints)."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = safe_stream(out), safe_stream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def json_line(data: Any) -> str:
    """`data` as one line of JSON with every character the sink would escape written as a \\u escape, so the
    line passes a Sink unchanged and stays valid JSON (json.dumps leaves DEL, C1 and format characters raw)."""
    text = json.dumps(data, ensure_ascii=False)
    return text if text.isascii() and "\x7f" not in text else "".join(_json_char(c) for c in text)


def _json_char(ch: str) -> str:
    code = ord(ch)
    if code < 0x7F or not (code < 0xA0 or ch in "\u2028\u2029" or unicodedata.category(ch) == "Cf"):
        return ch
    if code < 0x10000:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"
