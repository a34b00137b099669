"""Reads for the provider from paths the human named (`@` words): confined as the file tools' reads are.

One mechanism for images (core/session/images.py) and attached files and folders (core/attachments.py): the
path is resolved inside the project root (an absolute or `~` path outside it, or a link to outside,
is refused), is never a protected path (secret-looking names, `.rhapsody/`, credential locations,
the user's `protected_paths`), and is opened through descriptors component by component without
following a link, so a link swapped in after the check is refused, not followed. Folders that no
walk of the project enters (`SKIP_WALK`) are named here, for the tree index and the listings alike.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from rhapsody.core.access.credentials import is_credential
from rhapsody.core.access.permissions import protected as protected_read

SKIP_WALK = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache", ".pytest_cache",
                       ".rhapsody"})
"""Folders no walk of the project enters (the tree index) and no attached listing shows."""
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | _CLOEXEC


def confined_parts(root: Path, path: Path, protected: tuple[str, ...] = (), noun: str = "files") -> tuple[str, ...]:
    """The parts of `path` under the resolved root; ValueError when it leaves the project or is protected."""
    base = root.resolve()
    target = path.resolve()
    if target != base and base not in target.parents:
        raise ValueError(f"it is outside the project ({base}), or a link to outside it; {noun} are attached "
                         "from inside the project")
    parts = target.relative_to(base).parts
    if parts and (protected_read("/".join(parts)) or is_credential(target, protected, resolved=True)):
        raise ValueError("it is a protected path (secret-looking, rhapsody's own state, or a credential location)")
    return parts


def read_confined(root: Path, path: Path, protected: tuple[str, ...], limit: int, noun: str, one: str) -> bytes:
    """The bytes of the regular file at `path`, confined, at most `limit` of them (`one`: what the limit is for)."""
    parts = confined_parts(root, path, protected, noun)
    if not parts:
        raise ValueError("not a regular file")
    with _opened(root.resolve(), parts, file=True) as fd, os.fdopen(os.dup(fd), "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_size > limit:
            raise ValueError(f"{info.st_size:,} bytes is over the {limit:,}-byte limit for {one}")
        return f.read(limit)


def list_confined(root: Path, path: Path, protected: tuple[str, ...] = ()) -> list[str]:
    """The names in the folder at `path`, confined, sorted, folders with `/`: none that a walk skips or
    that is protected."""
    parts = confined_parts(root, path, protected)
    base = root.resolve()
    with _opened(base, parts, file=False) as fd:
        names: list[str] = []
        for entry in os.scandir(fd):
            inner = (*parts, entry.name)
            if entry.name in SKIP_WALK or protected_read("/".join(inner)) or \
                    is_credential(base.joinpath(*inner), protected, resolved=True):
                continue
            names.append(entry.name + ("/" if entry.is_dir(follow_symlinks=False) else ""))
    return sorted(names)


class _opened:
    """A descriptor of `base/parts`, each folder down and the last part opened without following a link."""

    def __init__(self, base: Path, parts: tuple[str, ...], file: bool) -> None:
        self.base, self.parts, self.file = base, parts, file
        self.fd = -1

    def __enter__(self) -> int:
        try:
            self.fd = _open_down(self.base, self.parts, self.file)
        except FileNotFoundError:
            raise ValueError("no such file" if self.file else "no such folder") from None
        except NotADirectoryError:
            raise ValueError("not a folder" if not self.file else "no such file") from None
        except OSError as exc:
            raise ValueError(exc.strerror or str(exc)) from None
        return self.fd

    def __exit__(self, *_: object) -> None:
        os.close(self.fd)


def _open_down(base: Path, parts: tuple[str, ...], file: bool) -> int:
    folder = os.open(base, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)
    if not parts:
        return folder
    try:
        for part in parts[:-1]:
            inner = os.open(part, _OPEN | os.O_DIRECTORY, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(parts[-1], _OPEN | (os.O_NONBLOCK if file else os.O_DIRECTORY), dir_fd=folder)
    finally:
        os.close(folder)
