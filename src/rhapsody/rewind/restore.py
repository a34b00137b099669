"""Writing a checkpoint's files back into the project root, never outside it and never through a link.

`refusal` checks a whole restore before anything is written: each path must be a plain
relative path inside the root (no `..`, no `.git`, not rhapsody's state), no folder on the
way may be a symbolic link or a file the restore does not remove, and nothing may stand
where a file goes that the restore cannot replace. `apply` then walks every folder by file
descriptor with O_NOFOLLOW, deletes first (deepest first), and writes each file to a
temporary name beside it, fsynced, then renamed over the old one, so a kill -9 leaves every
file whole: either as it was or as restored (finishing an interrupted restore redoes it).
The executable bit follows the checkpoint; other permission bits of an existing file stay.

Stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from rhapsody.core.session.history import STATE_DIR
from rhapsody.rewind.shadow import Change

TEMP = ".rhapsody-restore"
"""Suffix of the temporary file a restored file is written to before its rename."""
GITLINK = "160000"
LINK = "120000"


def refusal(root: Path, changes: list[Change]) -> str:
    """Why the restore cannot be exact, in one line; '' when it can."""
    removed = {c.path for c in changes if not c.new_mode}
    for change in changes:
        wrong = _bad_path(change.path) or _bad_mode(change)
        if not wrong and change.new_mode:
            wrong = _blocked(root, change.path, removed)
        if wrong:
            return f"cannot restore {change.path!r} exactly: {wrong}; nothing was changed"
    return ""


def _bad_path(path: str) -> str:
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or any(p in ("", ".", "..", ".git") for p in parts) or parts[0] == STATE_DIR:
        return "the path leads outside the project or into .git or .rhapsody"
    return ""


def _bad_mode(change: Change) -> str:
    if GITLINK in (change.old_mode, change.new_mode):
        return "it is a nested repository, which checkpoints do not record"
    return ""


def _blocked(root: Path, path: str, removed: set[str]) -> str:
    """What stands in the way of writing `path`: a linked or file folder on the way, or a folder at the path."""
    parts = PurePosixPath(path).parts
    for depth in range(1, len(parts)):
        folder = "/".join(parts[:depth])
        try:
            info = os.lstat(root / folder)
        except FileNotFoundError:
            return ""
        if stat.S_ISDIR(info.st_mode):
            continue
        if folder in removed:
            return ""
        return f"{folder!r} is {'a symbolic link' if stat.S_ISLNK(info.st_mode) else 'not a folder'} now"
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISDIR(os.lstat(root / path).st_mode):
            return "a folder stands where the file goes"
    return ""


def apply(root: Path, changes: list[Change], blobs: dict[str, bytes]) -> None:
    """Make every path as the checkpoint has it (see the module docstring for the order and the safety)."""
    for change in sorted((c for c in changes if not c.new_mode), key=lambda c: -c.path.count("/")):
        _remove(root, change.path)
    for change in sorted((c for c in changes if c.new_mode), key=lambda c: c.path):
        _write(root, change.path, change.new_mode, blobs[change.new_blob])


def _remove(root: Path, path: str) -> None:
    parts = PurePosixPath(path).parts
    with _folder(root, parts[:-1], create=False) as fd:
        if fd < 0:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(parts[-1], dir_fd=fd)
    for depth in range(len(parts) - 1, 0, -1):  # folders the checkpoint did not have go too, when empty
        with _folder(root, parts[:depth - 1], create=False) as fd:
            try:
                os.rmdir(parts[depth - 1], dir_fd=fd)
            except OSError:
                return


def _write(root: Path, path: str, mode: str, data: bytes) -> None:
    parts = PurePosixPath(path).parts
    name, temp = parts[-1], parts[-1] + TEMP
    with _folder(root, parts[:-1], create=True) as fd:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=fd)
        if mode == LINK:
            os.symlink(os.fsdecode(data), temp, dir_fd=fd)
        else:
            _write_file(fd, temp, data, _permissions(fd, name, mode == "100755"))
        os.replace(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
        os.fsync(fd)


def _write_file(folder: int, name: str, data: bytes, mode: int) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        os.fsync(fd)
    finally:
        os.close(fd)


def _permissions(folder: int, name: str, executable: bool) -> int:
    """The file's own bits when it exists (a regular file), else 0644; the executable bit as the checkpoint says."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
        bits = stat.S_IMODE(info.st_mode) if stat.S_ISREG(info.st_mode) else 0o644
    except FileNotFoundError:
        bits = 0o644
    return bits | ((bits & 0o444) >> 2) if executable else bits & ~0o111


@contextlib.contextmanager
def _folder(root: Path, parts: tuple[str, ...], create: bool) -> Iterator[int]:
    """A descriptor of root/parts, opened one step at a time without following a link (-1: missing, not created)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=fd)
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if create:
                    raise
                os.close(fd)
                fd = -1
                break
            os.close(fd)
            fd = child
        yield fd
    finally:
        if fd >= 0:
            os.close(fd)
