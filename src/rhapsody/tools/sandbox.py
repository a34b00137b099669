"""The OS sandbox for every command rhapsody runs on the model's behalf (bubblewrap, Linux).

Inside it a command sees the system read-only, the project root writable (or read-only
at level `read-only`) except `.git/config`, `.git/hooks/`, `.git/info/`, `.git/modules/`,
an in-tree `core.hooksPath` and `.rhapsody/`, which stay read-only; secret files in the
project and credential folders in the home directory read as empty; a private `/tmp`;
no network unless asked; its own PID namespace (so `/proc/$PPID` is not rhapsody); no
capabilities; `--die-with-parent` and `--new-session`. The environment it gets is
scrubbed of credentials (`scrubbed_env`).

Stdlib only: this module decides, `tools/procs.py` runs.
"""

from __future__ import annotations

import atexit
import fnmatch
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rhapsody.tools import seccomp

LEVELS = ("workspace-write", "read-only", "off")
SECRET_FILES = (".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_ed25519*", "id_ecdsa*", "id_dsa*",
                ".netrc", ".pgpass", ".git-credentials", "credentials.json", "*.keystore", "*.jks")
"""Project files that read as empty inside the sandbox (matched case-insensitively on the name)."""
HOME_SECRETS = (".ssh", ".aws", ".gnupg", ".azure", ".kube", ".docker", ".config/gcloud", ".config/gh",
                ".config/rhapsody", ".netrc", ".git-credentials", ".npmrc", ".pypirc", ".pgpass", ".password-store",
                ".local/share/keyrings", ".config/anthropic", ".anthropic")
"""Paths under $HOME hidden inside the sandbox (folders become empty, files read empty)."""
SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-", "/etc/ssl/private", "/etc/sudoers",
                  "/etc/sudoers.d", "/root/.ssh", "/var/lib/rhapsody")
"""System files readable by root that stay hidden when rhapsody itself runs as root."""
_HIDDEN_ROOTS = (("proc",), ("sys",), ("dev",), ("run",))
SKIP_WALK = {".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache", ".pytest_cache"}
WALK_LIMIT = 50_000
"""Entries examined when looking for secret files; past it the walk stops (docs/security.md)."""
_SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSW(OR)?D|CREDENTIAL|PRIVATE_?KEY|AUTH)", re.IGNORECASE)
_KEEP_ENV = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "SHELL", "TZ", "PWD"}


def scrubbed_env() -> dict[str, str]:
    """rhapsody's environment minus anything named like a credential."""
    return {k: v for k, v in os.environ.items() if k in _KEEP_ENV or not _SECRET_NAME.search(k)}


def secret_values() -> tuple[str, ...]:
    """Values of environment variables named like credentials (masked in tool output)."""
    return tuple(v for k, v in os.environ.items() if _SECRET_NAME.search(k) and k not in _KEEP_ENV and len(v) >= 8)


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
        done = subprocess.run([bwrap, *_PROBE, *extra, "--", "true"], stdin=subprocess.DEVNULL, capture_output=True,
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


def effective_level(setting: str, permission_mode: str) -> str:
    """The sandbox a command gets: `read-only` permission mode always means a read-only project."""
    if setting == "off":
        return "off"
    return "read-only" if permission_mode == "read-only" else setting


def status(setting: str) -> str:
    """One short line for a status bar or a headless notice."""
    if setting == "off":
        return "sandbox off (sandbox = \"off\")"
    if bwrap_path() is None:
        return "sandbox off: install bubblewrap" if sys.platform.startswith("linux") else "sandbox off: not available on this system"
    return f"sandbox {setting}"


def wrap(argv: list[str], root: Path, level: str, network: bool = False) -> tuple[list[str], tuple[int, ...]]:
    """`argv` run inside the sandbox for `root` at `level`, and the descriptors the child must inherit
    (the caller closes them once it has started); raises when no sandbox is available."""
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
    cmd += _home_masks(root)
    if level == "workspace-write":
        cmd += ["--bind", str(root), str(root), *_protected_inside(root)]
    else:
        cmd += ["--ro-bind", str(root), str(root)]
    cmd += _secret_masks(root)
    filter_fd = seccomp.program_fd() if _seccomp_works() else None
    fds = () if filter_fd is None else (filter_fd,)
    cmd += [*(["--seccomp", str(filter_fd)] if filter_fd is not None else []), "--unshare-all",
            *(["--share-net"] if network else []), "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--chdir", str(root), "--", *argv]
    return cmd, fds


def _home_masks(root: Path) -> list[str]:
    home = Path(os.path.expanduser("~"))
    ssh_keys = [str(p) for p in Path("/etc/ssh").glob("ssh_host_*_key")]
    return _masks(root, [home / rel for rel in HOME_SECRETS] + [Path(p) for p in (*SYSTEM_SECRETS, *ssh_keys)])


_EMPTY: list[str] = []


def empty_file() -> str:
    """An empty read-only file to bind over secrets (a device node such as /dev/null cannot be
    opened on the sandbox's nodev mounts, so it would read as "Permission denied", not empty)."""
    if not _EMPTY or not os.path.isfile(_EMPTY[0]):
        folder = tempfile.mkdtemp(prefix="rhapsody-sandbox-")
        path = os.path.join(folder, "empty")
        with open(path, "w", encoding="utf-8"):
            pass
        os.chmod(path, 0o444)
        atexit.register(shutil.rmtree, folder, True)
        _EMPTY[:] = [path]
    return _EMPTY[0]


def _masks(root: Path, paths: list[Path]) -> list[str]:
    """Folders become empty and read-only, files read empty; skipped when the project is inside one."""
    out: list[str] = []
    for path in paths:
        if root == path or path in root.parents or not os.path.lexists(path):
            continue
        real = path.resolve()
        if real.is_dir():
            out += ["--tmpfs", str(real), "--remount-ro", str(real)]
        elif real.is_file():
            out += ["--ro-bind", empty_file(), str(real)]
    return out


def _protected_inside(root: Path) -> list[str]:
    """Read-only binds over what would let a command run code later outside the sandbox.

    `.git` is bound onto itself first: a mount point cannot be renamed or removed, so a
    command cannot swap in a fresh `.git` with a config of its own.
    """
    state = root / ".rhapsody"
    state.mkdir(mode=0o700, exist_ok=True)
    out = ["--ro-bind", str(state), str(state)]
    git_dir = root / ".git"
    if git_dir.is_dir() and not git_dir.is_symlink():
        (git_dir / "hooks").mkdir(exist_ok=True)
        out += ["--bind", str(git_dir), str(git_dir)]
        for name in ("config", "config.worktree", "hooks", "info", "modules", "worktrees", "commondir"):
            path = git_dir / name
            if path.exists() and not path.is_symlink():
                out += ["--ro-bind", str(path), str(path)]
        for path in _included_configs(root, git_dir):
            out += ["--ro-bind", str(path), str(path)]
    elif os.path.lexists(git_dir):  # a .git file (worktree, submodule) or a link: freeze the pointer itself
        out += ["--ro-bind", str(git_dir), str(git_dir)] if git_dir.exists() else []
    hooks = hooks_path(root)
    if hooks is not None:
        out += ["--ro-bind", str(hooks), str(hooks)]
    return out


def _included_configs(root: Path, git_dir: Path) -> list[Path]:
    """Files inside the root (outside .git) that .git/config includes: editing them edits the config."""
    try:
        text = (git_dir / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for match in re.finditer(r"^\s*path\s*=\s*(.+?)\s*$", text, re.IGNORECASE | re.MULTILINE):
        path = (git_dir / os.path.expanduser(match.group(1).strip('"'))).resolve()
        if root in path.parents and git_dir not in path.parents and path.is_file():
            out.append(path)
    return out


GIT_REDIRECTS = ("commondir", "config.worktree")
"""Files that, created in `.git`, would make git read a config the sandbox does not protect."""


def git_redirects(root: Path) -> set[str]:
    """Which GIT_REDIRECTS exist now (taken before a command runs)."""
    return {name for name in GIT_REDIRECTS if os.path.lexists(root / ".git" / name)}


def undo_git_redirects(root: Path, before: set[str]) -> list[str]:
    """Remove GIT_REDIRECTS a command created; returns a note for each."""
    notes = []
    for name in sorted(git_redirects(root) - before):
        path = root / ".git" / name
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError as exc:
            notes.append(f"[rhapsody could not remove .git/{name} that the command created: {exc}]")
            continue
        notes.append(f"[rhapsody removed .git/{name} that the command created: it would point git at "
                     "another config]")
    return notes


def hooks_path(root: Path) -> Path | None:
    """An existing `core.hooksPath` folder inside the root (husky and friends), read from .git/config."""
    config = root / ".git" / "config"
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(r"^\s*hookspath\s*=\s*(.+?)\s*$", text, re.IGNORECASE | re.MULTILINE)
    if not match:
        return None
    path = (root / os.path.expanduser(match.group(1).strip('"'))).resolve()
    inside = path != root and root in path.parents
    return path if inside and path.exists() else None


def _secret_masks(root: Path) -> list[str]:
    out: list[str] = []
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_WALK and d != ".rhapsody"]
        for name in files:
            seen += 1
            if is_secret_name(name):
                real = Path(folder, name).resolve()
                if real.is_file() and tuple(real.parts[1:2]) not in _HIDDEN_ROOTS:
                    out += ["--ro-bind", empty_file(), str(real)]
        seen += len(dirs)
        if seen > WALK_LIMIT:
            break
    return out


def is_secret_name(name: str) -> bool:
    """Whether a file name looks like a secret (case-insensitive)."""
    lowered = name.lower()
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in SECRET_FILES)
