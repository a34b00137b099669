"""Which paths of a project changed since the last look: Linux inotify on every folder of the tree.

A checkpoint of a large tree (rewind/shadow.py) would otherwise stat every file to find the few
that changed. A watch is armed on each folder (not `.git` folders, not rhapsody's `.rhapsody/`)
before the full scan it then stands in for; a folder created later is armed when its creation
is read, and is reported whole (files made in it before it was armed are under it). Anything
that makes the events incomplete (the queue overflowed, a watch could not be added, more than
MAX_FOLDERS folders, the root itself moved) makes `changed` answer None: the caller scans it all.
Events are drained before the caller scans, so a change during the scan is seen again next time.

Not reported by the kernel: writes through a shared memory map. The shadow therefore still
scans the whole tree for each turn's checkpoint; the ones between a turn's calls use the events.

Stdlib only (ctypes to libc); on other systems `TreeWatch.start` answers None.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
import weakref
from pathlib import Path

MAX_FOLDERS = 20_000
"""Folders watched at most; a larger tree is scanned whole each time."""
_SKIP = frozenset({".git", ".rhapsody"})
_MODIFY, _ATTRIB, _CLOSE_WRITE, _MOVED_FROM, _MOVED_TO = 0x2, 0x4, 0x8, 0x40, 0x80
_CREATE, _DELETE, _DELETE_SELF, _MOVE_SELF = 0x100, 0x200, 0x400, 0x800
_OVERFLOW, _IGNORED, _ISDIR = 0x4000, 0x8000, 0x40000000
_ONLYDIR, _DONT_FOLLOW, _EXCL_UNLINK = 0x01000000, 0x02000000, 0x04000000
_MASK = (_MODIFY | _ATTRIB | _CLOSE_WRITE | _MOVED_FROM | _MOVED_TO | _CREATE | _DELETE | _DELETE_SELF
         | _MOVE_SELF | _ONLYDIR | _DONT_FOLLOW | _EXCL_UNLINK)
_HEAD = struct.Struct("iIII")


class TreeWatch:
    """The changes under one root since the last `changed` (or since `start`)."""

    def __init__(self, root: Path, fd: int, libc: ctypes.CDLL) -> None:
        self.root = root
        self._fd = fd
        self._libc = libc
        self._folders: dict[int, str] = {}
        self._changed: set[str] = set()
        self._lost = False
        weakref.finalize(self, os.close, fd)

    @classmethod
    def start(cls, root: Path) -> TreeWatch | None:
        """A watch on every folder under `root`, or None where inotify is not to be had."""
        if not sys.platform.startswith("linux"):
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        if fd < 0:
            return None
        watch = cls(root, fd, libc)
        watch._arm("")
        return None if watch._lost else watch

    def changed(self) -> set[str] | None:
        """Paths (relative to the root; a folder stands for all below it) changed since the last call, or
        None when some change may have gone unseen."""
        self._drain()
        found, lost = self._changed, self._lost
        self._changed, self._lost = set(), False
        return None if lost else found

    def _arm(self, rel: str) -> None:
        """Watch `rel` and every folder below it (links not followed)."""
        for folder, dirs, _ in os.walk(self.root / rel if rel else self.root):
            dirs[:] = [d for d in dirs if d not in _SKIP and not os.path.islink(os.path.join(folder, d))]
            if len(self._folders) >= MAX_FOLDERS:
                self._lost = True
                return
            wd = self._libc.inotify_add_watch(self._fd, os.fsencode(folder), _MASK)
            if wd < 0:
                self._lost = True
                return
            self._folders[wd] = os.path.relpath(folder, self.root) if folder != str(self.root) else ""

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                self._lost = True
                return
            self._read(data)

    def _read(self, data: bytes) -> None:
        pos = 0
        while pos + _HEAD.size <= len(data):
            wd, mask, _, size = _HEAD.unpack_from(data, pos)
            name = data[pos + _HEAD.size:pos + _HEAD.size + size].rstrip(b"\0").decode("utf-8", "surrogateescape")
            pos += _HEAD.size + size
            self._event(wd, mask, name)

    def _event(self, wd: int, mask: int, name: str) -> None:
        if mask & _OVERFLOW:
            self._lost = True
            return
        folder = self._folders.get(wd)
        if folder is None:
            return  # a folder no longer watched: its parent's event names it
        if mask & (_DELETE_SELF | _MOVE_SELF | _IGNORED):
            self._folders.pop(wd, None)
            self._lost = self._lost or folder == ""
            return
        if name == ".rhapsody" and folder == "" or name == ".git" and folder == "":
            return  # rhapsody's own state, the project's own repository: never in a checkpoint
        if name == ".git":
            name = ""  # a folder that became (or stopped being) a nested repository: scanned whole
        path = f"{folder}/{name}" if folder and name else name or folder
        self._changed.add(path)
        if mask & _ISDIR and mask & (_CREATE | _MOVED_TO):
            self._arm(path)
