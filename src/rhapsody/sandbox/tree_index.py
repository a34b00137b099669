"""The project's folders as the sandbox needs them: secret-named files and nested `.git` entries.

One walk serves a sandboxed command's set-up (sandbox/bwrap.py masks the secrets) and the
nested-repository guard (sandbox/gitguard.py). The index keeps each folder's listing with the
folder's stamp (device, inode, mtime and ctime): a folder whose stamp is unchanged lists the
same names, so the next walk stats it instead of listing it again. A stamp within SETTLE_NS of
the moment the folder was listed is not trusted (a file created in the same clock tick would
leave it unchanged); ctime cannot be set back by a command, so a folder changed since it was
listed is always listed again. Only names are kept: every secret-named file is resolved afresh
on each walk, so a link retargeted since still masks what it names now.

Stdlib only.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rhapsody.core.access.confined import SKIP_WALK as SKIP_WALK  # one list: the walks and the attached listings
from rhapsody.core.access.permissions import PROTECTED_READS

WALK_LIMIT = 50_000
"""Entries examined when looking for secret files; past it the walk stops (docs/security.md)."""
SETTLE_NS = 2_000_000_000
"""A folder changed this recently (before it was listed) is listed again on every walk: coarse file system
clocks (2 s on FAT) could give a change right after the listing the same stamp."""
_HIDDEN_ROOTS = (("proc",), ("sys",), ("dev",), ("run",))
_Stamp = tuple[int, int, int, int]


@dataclass(frozen=True)
class Walk:
    """What one walk of a project found: secret files (resolved) and nested `.git` entries."""

    secrets: list[Path]
    nested: list[Path]


@dataclass(frozen=True)
class _Listing:
    stamp: _Stamp | None
    """None: not to be trusted next time (changed too recently, or unreadable)."""
    folders: tuple[str, ...]
    """Sub-folders to descend into (not links, not SKIP_WALK)."""
    entries: int
    """Entries counted against WALK_LIMIT: every file and every folder (links included) not skipped."""
    secret_names: tuple[str, ...]
    has_git: bool


@functools.cache
def _secret_pattern() -> re.Pattern[str]:
    return re.compile("|".join(fnmatch.translate(p) for p in PROTECTED_READS))


def is_secret_name(name: str) -> bool:
    """Whether a file name looks like a secret (case-insensitive)."""
    return _secret_pattern().match(name.lower()) is not None


class TreeIndex:
    """Listings of the folders of the projects walked, kept current by each folder's stamp."""

    def __init__(self, clock: Callable[[], int] = time.time_ns, settle_ns: int = SETTLE_NS) -> None:
        self._clock = clock
        self._settle_ns = settle_ns
        self._listings: dict[str, _Listing] = {}

    def walk(self, root: Path) -> Walk:
        """Secret-looking files and nested `.git` entries under `root` (resolved), in os.walk's order, bounded."""
        root = root.resolve()
        secrets: list[Path] = []
        nested: list[Path] = []
        seen = 0
        pending = [str(root)]
        visited: dict[str, _Listing] = {}
        while pending and seen <= WALK_LIMIT:
            folder = pending.pop()
            listing = visited[folder] = self._listing(folder)
            if folder != str(root) and listing.has_git:
                nested.append(Path(folder, ".git"))
            secrets += _resolved(root, folder, listing.secret_names)
            seen += listing.entries
            pending += [os.path.join(folder, name) for name in reversed(listing.folders)]
        self._keep(str(root), visited)
        return Walk(secrets, nested)

    def _keep(self, root: str, visited: dict[str, _Listing]) -> None:
        """Keep this walk's listings for `root` (those of folders gone since are dropped)."""
        prefix = root.rstrip(os.sep) + os.sep
        self._listings = {k: v for k, v in self._listings.items() if k != root and not k.startswith(prefix)}
        self._listings.update(visited)

    def _listing(self, folder: str) -> _Listing:
        stamp = _stamp(folder)
        known = self._listings.get(folder)
        if stamp is not None and known is not None and known.stamp == stamp:
            return known
        started = self._clock()
        listing = _list(folder)
        if listing.stamp is not None and max(listing.stamp[2:]) < started - self._settle_ns:
            return listing
        return dataclasses.replace(listing, stamp=None)


def _stamp(folder: str) -> _Stamp | None:
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns


def _list(folder: str) -> _Listing:
    """One folder's listing, with the stamp it had before it was read."""
    stamp = _stamp(folder)
    folders: list[str] = []
    secret_names: list[str] = []
    entries = 0
    has_git = False
    try:
        with os.scandir(folder) as it:
            for entry in it:
                has_git = has_git or entry.name == ".git"
                if _is_dir(entry):
                    if entry.name in SKIP_WALK:
                        continue
                    entries += 1
                    if not entry.is_symlink():
                        folders.append(entry.name)
                else:
                    entries += 1
                    if is_secret_name(entry.name):
                        secret_names.append(entry.name)
    except OSError:
        stamp = None
    return _Listing(stamp, tuple(folders), entries, tuple(secret_names), has_git)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _resolved(root: Path, folder: str, names: tuple[str, ...]) -> list[Path]:
    """The files the secret-named entries name now (links followed) that a sandboxed command could see: in the
    project (bound into the sandbox wherever it lives, /dev/shm and /run included), or anywhere else outside
    /proc, /sys, /dev and /run (the sandbox has its own; a file there is not in it, and could not be masked)."""
    out = []
    for name in names:
        real = Path(folder, name).resolve()
        if real.is_file() and (real.is_relative_to(root) or tuple(real.parts[1:2]) not in _HIDDEN_ROOTS):
            out.append(real)
    return out
