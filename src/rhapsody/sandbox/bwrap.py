"""The OS sandbox for every command rhapsody runs on the model's behalf (bubblewrap, Linux).

Inside it a command sees the system read-only, the project root writable (or read-only
at level `read-only`) except `.git/config`, `.git/hooks/`, `.git/info/`, `.git/modules/`,
an in-tree `core.hooksPath` and `.rhapsody/`, which stay read-only; secret files in the
project and credential folders in the home directory read as empty; a private `/tmp`;
no network unless asked; its own PID namespace (so `/proc/$PPID` is not rhapsody); no
capabilities; `--die-with-parent` and `--new-session`. The environment it gets is
scrubbed of credentials (`scrubbed_env`).

Stdlib only: this module decides, `sandbox/procs.py` runs.
"""

from __future__ import annotations

import atexit
import functools
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from rhapsody.core.access.credentials import locations
from rhapsody.core.access.permissions import Confinement, Mode, SandboxSetting, writes_nothing
from rhapsody.core.secrets import mask
from rhapsody.core.userstate import state_home
from rhapsody.sandbox import gitguard, lifeline, seccomp
from rhapsody.sandbox.gitguard import git_redirects, hooks_path, undo_git_redirects
from rhapsody.sandbox.tree_index import TreeIndex, Walk

INDEX = TreeIndex()
"""The folders of the projects this process sandboxes commands in (sandbox/tree_index.py)."""

__all__ = ["bwrap_path", "effective_level", "git_redirects", "hooks_path", "scrubbed_env", "secret_values", "status",
           "undo_git_redirects", "wrap"]

SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/ssl/private", "/etc/sudoers",
                  "/etc/sudoers.d", "/root/.ssh", "/var/lib/rhapsody")
"""System files readable by root that stay hidden when rhapsody itself runs as root."""
_SECRET_NAME = re.compile(r"(KEYS?($|_)|TOKEN|SECRET|PASSW(OR)?D|(^|_)PASS($|_)|(^|_)PWD$|CREDENTIAL|AUTH|COOKIE"
                          r"|(^|_)DSN($|_)|SIGNATURE|(^|_)PAT($|_)|PRIVATE|SESSION|BEARER|OTP)", re.IGNORECASE)
"""Variable names treated as credentials: any name ending in KEY (or with a KEY_ part), TOKEN, SECRET..."""
_KEEP_ENV = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "SHELL", "TZ", "PWD"}


def _own_state(root: Path) -> list[str]:
    """rhapsody's state folder (checkpoints), read-only when it lies in the project (rhapsody run in the home
    folder): a command must not plant the shadow repository a checkpoint outside the sandbox would drive.
    Each folder between the project and it is bound onto itself (still writable): a mount point cannot be
    renamed, so `mv .local aside` cannot carry the read-only state folder away and leave room for a fresh one."""
    home = state_home().resolve()
    if root != home and root not in home.parents:  # rhapsody run in its own state folder: all of it read-only
        return []
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return []
    between = [p for p in reversed(home.parents) if root in p.parents]
    return [*(arg for p in between for arg in ("--bind", str(p), str(p))), "--ro-bind", str(home), str(home)]


def scrubbed_env() -> dict[str, str]:
    """rhapsody's environment minus anything named like a credential or holding a value shaped like one."""
    return {k: v for k, v in environ_now().items() if not _secret_var(k, v)}


def environ_now() -> dict[str, str]:
    """A copy of the environment; read again where another thread changed it while it was read (a checkpoint
    warms up in a thread of its own while the process sets or unsets a variable)."""
    while True:
        try:
            return dict(os.environ)
        except (KeyError, RuntimeError):
            continue


def secret_values() -> tuple[str, ...]:
    """Values of environment variables that are credentials (masked in tool output)."""
    return tuple(v for k, v in os.environ.items() if _secret_var(k, v) and len(v) >= 8)


@functools.lru_cache(maxsize=1024)
def _secret_var(name: str, value: str) -> bool:
    """Named like a credential (`*_TOKEN`, `GH_PAT`), or a value with a credential's shape under any name
    (`DATABASE_URL=postgres://user:password@host`, a provider key in `MY_SETTING`)."""
    if name in _KEEP_ENV:
        return False
    return bool(_SECRET_NAME.search(name)) or mask(value) != value


@functools.cache
def bwrap_path() -> str | None:
    """The bwrap binary when it is installed and can build a sandbox here; None otherwise."""
    if not sys.platform.startswith("linux"):
        return None
    found = shutil.which("bwrap")
    if found is None:
        return None
    return found if _starts(found) else None


_PROBE = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all", "--die-with-parent",
          "--new-session", "--cap-drop", "ALL"]


def _starts(bwrap: str, fd: int | None = None) -> bool:
    extra = ["--seccomp", str(fd)] if fd is not None else []
    try:
        done = lifeline.run([bwrap, *_PROBE, *extra, "--", "true"], stdin=subprocess.DEVNULL, capture_output=True,
                            timeout=10, pass_fds=() if fd is None else (fd,))
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        if fd is not None:
            os.close(fd)
    return done.returncode == 0


@functools.cache
def _seccomp_works() -> bool:
    bwrap = bwrap_path()
    fd = seccomp.program_fd()
    return bwrap is not None and fd is not None and _starts(bwrap, fd)


def effective_level(setting: SandboxSetting, permission_mode: Mode) -> SandboxSetting:
    """The sandbox a command gets: `read-only` permission mode always means a read-only project."""
    if setting == "off":
        return "off"
    return "read-only" if writes_nothing(permission_mode) else setting


def status(setting: SandboxSetting) -> str:
    """One short line for a status bar or a headless notice."""
    if setting == "off":
        return "sandbox off (sandbox = \"off\")"
    if bwrap_path() is None:
        return "sandbox off: install bubblewrap" if sys.platform.startswith("linux") else "sandbox off: not available on this system"
    return f"sandbox {setting}"


def wrap(argv: list[str], root: Path, level: Confinement, network: bool = False, protected: tuple[str, ...] = (),
         walk: Walk | None = None) -> tuple[list[str], tuple[int, ...]]:
    """`argv` run inside the sandbox for `root` at `level`, and the descriptors the child must inherit
    (the caller closes them once it has started); `protected`: the user's own protected paths, mounted
    empty like the built-in credential locations; `walk`: the project's walk when the caller took it
    just now (otherwise taken here). Raises when no sandbox is available."""
    bwrap = bwrap_path()
    if bwrap is None or level == "off":
        raise RuntimeError("no sandbox available")
    root = root.resolve()
    # /run holds the host's sockets (docker, dbus, ssh and gpg agents, systemd): a read-only
    # mount does not stop connect(), so they are hidden, as /tmp's are.
    cmd = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp",
           "--tmpfs", "/dev/shm", "--tmpfs", "/run"]
    if network:
        cmd += ["--ro-bind-try", "/run/systemd/resolve", "/run/systemd/resolve"]
    walk = walk or INDEX.walk(root)
    if level == "workspace-write":
        state = root / ".rhapsody"
        if not os.path.lexists(state):
            state.mkdir(mode=0o700)
        cmd += ["--bind", str(root), str(root), "--ro-bind", str(state), str(state), *gitguard.binds(root, walk.nested)]
        cmd += _own_state(root)
    else:
        cmd += ["--ro-bind", str(root), str(root)]
    empty = empty_file(root)  # one look for the whole command
    cmd += _home_masks(root, empty, protected)  # after the project's bind, so a home inside the project is masked too
    for path in walk.secrets:
        cmd += ["--ro-bind", empty, str(path)]
    filter_fd = seccomp.program_fd() if _seccomp_works() else None
    fds = () if filter_fd is None else (filter_fd,)
    cmd += [*(["--seccomp", str(filter_fd)] if filter_fd is not None else []), "--unshare-all",
            *(["--share-net"] if network else []), "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--chdir", str(root), *_temp_env(), "--", *argv]
    return cmd, fds


TEMP_VARS = ("TMPDIR", "TMP", "TEMP")
"""Where programs make temporary files. Inside the sandbox that is its own empty /tmp: a folder named
outside (pam_tmpdir's /tmp/user/1000, /run/user/1000, /dev/shm/x) is hidden there, and `mktemp` would fail."""


def _temp_env() -> list[str]:
    """TMPDIR, and TMP and TEMP where they are set, pointed at the sandbox's /tmp."""
    named = environ_now()
    return [arg for var in TEMP_VARS if var == "TMPDIR" or var in named for arg in ("--setenv", var, "/tmp")]


def _home_masks(root: Path, empty: str, protected: tuple[str, ...] = ()) -> list[str]:
    """Credential locations (`core/access/credentials.py`: the home list and the user's `protected_paths`) and
    system secrets: folders become empty, files read empty."""
    ssh_keys = [str(p) for p in Path("/etc/ssh").glob("ssh_host_*_key")]
    return _masks(root, locations(protected) + [Path(p) for p in (*SYSTEM_SECRETS, *ssh_keys)], empty)


_EMPTY: list[str] = []
_TEMPORARY: list[str] = []
EMPTY_NAME = "sandbox-empty"


def empty_file(root: Path) -> str:
    """An empty read-only file to bind over secrets in the sandbox for `root` (a device node such as /dev/null
    cannot be opened on the sandbox's nodev mounts, so it would read as "Permission denied", not empty).

    It is made once, in rhapsody's state folder (read-only in the sandbox, `_own_state`), and used again
    while it is still an empty, unwritable regular file of this user's with no other name: a folder of its
    own in /tmp was left behind by every rhapsody killed. For a project inside the state folder, and where
    the state folder cannot be written, a temporary folder removed at exit serves."""
    try:
        home = state_home().resolve()
    except RuntimeError:  # no home folder to be found
        home = None
    if home is not None and root != home and home not in root.parents:
        try:
            return _kept(_EMPTY, lambda: _made_empty(home / EMPTY_NAME))
        except OSError:
            pass
    return _kept(_TEMPORARY, _temporary_empty)


def _kept(cache: list[str], make: Callable[[], str]) -> str:
    """The file `cache` holds while it is still empty, else the one `make` makes (kept in its place)."""
    if not cache or not _still_empty(cache[0]):
        cache[:] = [make()]
    return cache[0]


def _still_empty(path: str) -> bool:
    """A regular file of this user's, empty, that nobody may write and that has no other name (a hard link
    planted beside a writable name could be filled later); anything else is made anew."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (stat.S_ISREG(st.st_mode) and st.st_size == 0 and st.st_nlink == 1 and st.st_uid == os.getuid()
            and not st.st_mode & 0o222)


def _made_empty(path: Path) -> str:
    if not _still_empty(str(path)):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, made = tempfile.mkstemp(prefix=f".{EMPTY_NAME}-", dir=path.parent)
        os.close(fd)
        os.chmod(made, 0o444)
        os.replace(made, path)  # whole or not at all, whichever rhapsody gets there first
    return str(path)


def _temporary_empty() -> str:
    folder = tempfile.mkdtemp(prefix="rhapsody-sandbox-")
    path = os.path.join(folder, "empty")
    with open(path, "w", encoding="utf-8"):
        pass
    os.chmod(path, 0o444)
    atexit.register(shutil.rmtree, folder, True)
    return path


def _masks(root: Path, paths: list[Path], empty: str) -> list[str]:
    """Folders become empty and read-only, files read empty; skipped when the project is inside one."""
    out: list[str] = []
    holding = {root, *root.parents}
    for path in paths:
        if path in holding or not os.path.lexists(path):
            continue
        real = path.resolve()
        if real.is_dir():
            out += ["--tmpfs", str(real), "--remount-ro", str(real)]
        elif real.is_file():
            out += ["--ro-bind", empty, str(real)]
    return out
