"""The run's temporary files on a memory file system, where the machine has one to spare.

Every test works in temporary folders: git repositories, histories (each record is fsync'd, as it is
for a user), checkpoints, homes, sockets. On a disk those writes and syncs are most of what some tests
wait for; on /dev/shm (tmpfs) they cost no I/O. tests/conftest.py calls `choose` before any worker starts,
and the workers, the fork servers and every process they start inherit the folder as TMPDIR.

`RHAPSODY_TEST_TMP=disk` keeps the temporary files where TMPDIR (or /tmp) puts them; a path puts them
there. A TMPDIR the user set is kept too. /dev/shm is used only when it is a tmpfs mounted without
`noexec` (tests run scripts they write), with room to spare, and the folder in it is this user's own.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

ENV = "RHAPSODY_TEST_TMP"
MEMORY = Path("/dev/shm")
ROOM = 1 << 30
"""Free space /dev/shm must have (a whole run writes about 20 MB; pytest keeps its last three)."""


def choose() -> Path | None:
    """Point TMPDIR at the run's temporary folder (for this process and what it starts) and return it;
    None where the temporary files stay where they were."""
    folder = chosen()
    if folder is None:
        return None
    os.environ[ENV] = os.environ["TMPDIR"] = str(folder)  # the workers read ENV, to know it was chosen
    tempfile.tempdir = None  # read TMPDIR again
    return folder


def chosen() -> Path | None:
    """The temporary folder this run chooses (or chose), or None."""
    given = os.environ.get(ENV)
    if given == "disk":
        return None
    if given:
        if not os.path.isdir(given) or not os.access(given, os.W_OK | os.X_OK):
            raise pytest.UsageError(f"{ENV}={given}: not a folder this user can write (or 'disk' for TMPDIR's)")
        return Path(given)
    if "TMPDIR" in os.environ:
        return None
    return _own_folder(MEMORY / f"rhapsody-tests-{os.getuid()}") if _memory(MEMORY) else None


def _memory(mount: Path) -> bool:
    """Whether `mount` is a tmpfs mount point that runs programs and has ROOM free."""
    try:
        with open("/proc/self/mounts", encoding="utf-8") as mounts:
            fields = [line.split() for line in mounts]
        free = os.statvfs(mount)
    except OSError:
        return False
    found = [f for f in fields if len(f) >= 4 and f[1] == str(mount)]
    if not found or found[-1][2] != "tmpfs" or "noexec" in found[-1][3].split(","):
        return False
    return free.f_bavail * free.f_frsize >= ROOM and os.access(mount, os.W_OK | os.X_OK)


def _own_folder(folder: Path) -> Path | None:
    """`folder`, made if missing, when it is a real folder only this user can enter (a shared /dev/shm could
    hold another user's link or folder by that name); None otherwise."""
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return folder
