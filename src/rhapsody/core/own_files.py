"""Files rhapsody reads on its own account (AGENTS.md, CLAUDE.md, memory): data from inside the project only.

A file qualifies only when it is a regular file, not a symlink, whose resolved path is
inside the project root and not a credential location (`core/access/credentials.py`); it is read up to a size cap through a descriptor opened with
O_NOFOLLOW (so a link swapped in after the check is not followed either), and values
that look like credentials are masked before the text reaches a prompt or the history.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rhapsody.core.access.credentials import is_credential
from rhapsody.core.secrets import mask

MAX_BYTES = 256_000
"""No file read on rhapsody's own account is read past this many bytes."""


def inside(root: Path, path: Path) -> bool:
    """Whether `path`, resolved, is inside the resolved `root`."""
    base = root.resolve()
    target = path.resolve()
    return target == base or base in target.parents


def read_own(root: Path, path: Path, cap: int = MAX_BYTES, known: tuple[str, ...] = ()) -> str | None:
    """The masked text of `path` when it qualifies (see the module docstring), else None."""
    try:
        if path.is_symlink() or not inside(root, path) or _guarded(root, path):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, min(cap, MAX_BYTES) + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    text = data[: min(cap, MAX_BYTES)].decode("utf-8", errors="replace")
    return mask(text, known, assignments=True)


def _guarded(root: Path, path: Path) -> bool:
    """Whether `path` is in a credential location the caller did not name as its root: rhapsody's own
    config folder (`~/.config/rhapsody`, itself protected from the tools) is read for the user's commands."""
    return is_credential(path.absolute()) and not is_credential(root.absolute())


def own_files(root: Path, folder: Path, pattern: str) -> list[Path]:
    """Files in `folder` matching `pattern` that qualify, sorted; nothing when the folder itself leaves the root."""
    if not folder.is_dir() or folder.is_symlink() or not inside(root, folder):
        return []
    return sorted(p for p in folder.glob(pattern) if not p.is_symlink() and inside(root, p) and p.is_file())
