"""Files and folders from the human: an `@` word that names one sends its content with the prompt.

A prompt word `@README.md` (or `@src/`, `@.`) that names a file or folder in the project attaches
it; images are core/session/images.py's. It is read for the provider as read_file reads for the model,
through the same confinement as images (core/access/confined.py): inside the project, through no link
that leaves it, never a protected path. Only the words the human typed attach (a custom command's
own text attaches nothing). A word naming nothing (`@alice`) stays a word; one naming something
that cannot be attached gives one line saying why. A text file goes as a text block after the
human's words, capped like a tool's output (the cut marked in the middle); a folder as its
listing, one level, without what the tree walk skips and without protected names:

    <file path="README.md" bytes="1234">
    …the file's text…
    </file>

    <folder path="src" entries="3">
    main.py
    util/
    </folder>

The block is stored in the message record as sent, so a resumed session sends the same bytes;
`shown` reads one back for the transcript's folded line.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from rhapsody.core.access.confined import list_confined, read_confined
from rhapsody.core.session.images import EXTENSIONS
from rhapsody.core.session.messages import TextBlock
from rhapsody.core.toolbox.output_caps import cap_text

MAX_BYTES = 800_000
"""The largest file attached: read_file's own limit (a larger one is for a line range)."""
LISTED = 500
"""Entries of a folder listed; the rest are counted."""
_SHAPE = re.compile(r'<(file|folder) path="([^"\n]*)" (bytes|entries)="(\d+)">\n(.*)\n</\1>', re.DOTALL)


@dataclass(frozen=True)
class Attachment:
    """One file or folder the human attached, as it is sent."""

    word: str
    text: str

    def block(self) -> TextBlock:
        """The text block the message carries."""
        return TextBlock(text=self.text)


@dataclass(frozen=True)
class Shown:
    """An attachment block read back: what the transcript folds."""

    kind: str
    path: str
    size: int
    body: str

    def label(self) -> str:
        """The folded line: `attached README.md (1.2 KB)`, `attached src/ (12 entries)`."""
        if self.kind == "folder":
            return f"attached {self.path.rstrip('/')}/ ({self.size:,} {'entry' if self.size == 1 else 'entries'})"
        return f"attached {self.path} ({_size(self.size)})"


def shown(text: str) -> Shown | None:
    """The attachment a user text block is, or None when it is other text."""
    found = _SHAPE.fullmatch(text)
    return Shown(found[1], found[2], int(found[4]), found[5]) if found else None


def _size(n: int) -> str:
    return f"{n} B" if n < 1024 else f"{n / 1024:.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.1f} MB"


def mentioned(text: str, root: Path) -> list[tuple[str, Path]]:
    """The `@` words of the prompt that name something (images aside): (word, path), in order, once each."""
    try:
        words = shlex.split(text)
    except ValueError:  # an unbalanced quote: plain words still work
        words = text.split()
    found: dict[Path, tuple[str, Path]] = {}
    for word in (w for w in words if w.startswith("@") and len(w) > 1):
        for name in dict.fromkeys((word[1:], word[1:].rstrip(",;:!?)") or ".", word[1:].rstrip(".,;:!?)") or ".")):
            path = Path(name).expanduser()
            path = path if path.is_absolute() else root / path
            if os.path.lexists(path):
                if not name.lower().endswith(EXTENSIONS):
                    found.setdefault(path, (f"@{name}", path))
                break
    return list(found.values())


def attach(text: str, root: Path, protected: tuple[str, ...] = (), cap: int = 30_000) -> tuple[list[Attachment], list[str]]:
    """The files and folders the prompt names, each as its block; and one line per one not attached."""
    attached: list[Attachment] = []
    refused: list[str] = []
    for word, path in mentioned(text, root):
        try:
            attached.append(Attachment(word, _block_text(root, path, protected, cap)))
        except ValueError as exc:
            refused.append(f"{word} not attached: {exc}")
    return attached, refused


def _block_text(root: Path, path: Path, protected: tuple[str, ...], cap: int) -> str:
    if path.is_dir():
        names = list_confined(root, path, protected)
        where = _relative(root, path)
        more = f"\n[{len(names) - LISTED:,} more not listed]" if len(names) > LISTED else ""
        listing = "\n".join(names[:LISTED]) or "(empty)"
        return f'<folder path="{where}" entries="{len(names)}">\n{listing}{more}\n</folder>'
    data = read_confined(root, path, protected, MAX_BYTES, "files", "an attached file (ask for a line range)")
    if b"\x00" in data[:8192]:
        raise ValueError(f"it looks binary ({len(data):,} bytes); only text files are attached")
    where = _relative(root, path)
    body = cap_text(data.decode("utf-8", errors="replace"), cap)
    return f'<file path="{where}" bytes="{len(data)}">\n{body}\n</file>'


def _relative(root: Path, path: Path) -> str:
    """The path as the project names it (quotes and new lines, which would break the tag, escaped)."""
    base = root.resolve()
    target = path.resolve()
    name = "." if target == base else str(target.relative_to(base))
    return name.replace('"', "%22").replace("\n", "%0A")
