"""What keeps git's own programs out of reach of a sandboxed command (see sandbox/bwrap.py).

git runs programs named by a repository's config and hooks, so a command that could
edit them would run code later, outside the sandbox, the next time anyone uses git. For
every git directory of the project (`.git`, the folder a `.git` file points to inside the
project, a common dir it names, and nested repositories): the folder is bound onto itself
(a mount point cannot be renamed or removed, so no fresh `.git` can replace it), and its
config, hooks, info, modules and worktrees, config files it includes from the tree, and an
in-tree `core.hooksPath`, are read-only. A `commondir` or `config.worktree` a command
creates is removed afterwards (`undo_git_redirects`).

Stdlib only.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from rhapsody.sandbox import lifeline

_FROZEN = ("config", "config.worktree", "hooks", "info", "modules", "worktrees", "commondir")


def binds(root: Path, nested: list[Path]) -> list[str]:
    """bwrap arguments protecting every git directory of `root` (after the root's own bind)."""
    out: list[str] = []
    for entry in [root / ".git", *nested]:
        if entry.is_symlink() or entry.is_file():
            out += ["--ro-bind", str(entry), str(entry)]  # the pointer itself (a link is bound as what it names)
        for git_dir in _dirs_of(root, entry):
            out += _freeze(root, git_dir)
    hooks = hooks_path(root, create=True)
    if hooks is not None:
        out += ["--ro-bind", str(hooks), str(hooks)]
    for started in (".mcp.json", *CLAUDE_SETTINGS):
        path = root / started
        if path.is_file() and not path.is_symlink():
            out += ["--ro-bind", str(path), str(path)]
    return out


def guarded(root: Path, path: Path, nested: list[Path]) -> bool:
    """Whether `path` (resolved) is, or is inside, anything the sandbox freezes for the git directories of
    `root/.git`, the `.git` entries of the folders above `path`, and `nested`: a file tool must not write it
    (with `.git/config` a link to `gitconfig`, or a `.git` file naming `gitdata/`, the real config is elsewhere)."""
    entries = [root / ".git", *nested, *(folder / ".git" for folder in path.parents if _inside(root, folder))]
    frozen: list[Path] = []
    for entry in dict.fromkeys(entries):
        for git_dir in _dirs_of(root, entry):
            frozen += [git_dir / name for name in _FROZEN]
            frozen += [(git_dir / name).resolve() for name in _FROZEN if (git_dir / name).is_symlink()]
            frozen += _included_configs(root, git_dir)
    hooks = hooks_path(root)
    frozen += [hooks] if hooks is not None else []
    return any(path == f or f in path.parents for f in frozen)


def _dirs_of(root: Path, entry: Path) -> list[Path]:
    """The git directory an entry stands for (a `.git` folder, or what a `.git` file names), and its common dir."""
    if not entry.exists():
        return []
    target = entry.resolve()
    git_dir = target if target.is_dir() else _pointed(target)
    found = [git_dir] if git_dir is not None and _inside(root, git_dir) and git_dir.is_dir() else []
    common = _pointed(git_dir / "commondir", relative_to=git_dir) if git_dir is not None else None
    if common is not None and _inside(root, common) and common.is_dir() and common not in found:
        found.append(common)
    return found


def _pointed(file: Path, relative_to: Path | None = None) -> Path | None:
    try:
        text = small_bytes(file).decode("utf-8", errors="replace").strip()
    except OSError:
        return None
    text = text.removeprefix("gitdir:").strip()
    return ((relative_to or file.parent) / text).resolve() if text else None


SMALL_CAP = 1 << 20
"""Bytes read of a git file (`.git`, `commondir`, config) a command could have planted."""


def small_bytes(path: Path) -> bytes:
    """At most SMALL_CAP bytes of a regular file: a command can plant a pipe (which would block) or a link to
    `/dev/zero` (which would never end) where git keeps a small file; OSError for anything else."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(errno.EINVAL, f"{path.name} is not a regular file")
        return f.read(SMALL_CAP)


def _inside(root: Path, path: Path) -> bool:
    return path == root or root in path.parents


def _freeze(root: Path, git_dir: Path) -> list[str]:
    if not os.path.lexists(git_dir / "hooks"):
        (git_dir / "hooks").mkdir()
    out = ["--bind", str(git_dir), str(git_dir)]
    for name in _FROZEN:
        target = _frozen_target(root, git_dir / name)
        if target is not None:
            out += ["--ro-bind", str(target), str(target)]
    for path in _included_configs(root, git_dir):
        out += ["--ro-bind", str(path), str(path)]
    return out


def _frozen_target(root: Path, path: Path) -> Path | None:
    """What to bind read-only for one frozen entry: the entry, or for a link the file or folder it names.

    A link (an extracted archive can carry `.git/config -> ../gitconfig` or a linked hooks
    folder) is what git follows, so its target inside the root is frozen; a dangling link
    into the root gets its target created first (an empty file, or a folder for hooks and
    the like), so a command cannot create it. Targets outside the root are read-only anyway.
    """
    if not path.is_symlink():
        return path if path.exists() else None
    target = path.resolve()
    if not _inside(root, target) or target == root:
        return None
    if not os.path.lexists(target):
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.name in ("config", "config.worktree", "commondir"):
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644))
            else:
                target.mkdir()
        except OSError:
            return None
    return target if target.exists() else None


def _included_configs(root: Path, git_dir: Path) -> list[Path]:
    """Files inside the root (outside .git) that .git/config includes: editing them edits the config."""
    try:
        text = small_bytes(git_dir / "config").decode("utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for match in re.finditer(r"^\s*path\s*=\s*(.+?)\s*$", text, re.IGNORECASE | re.MULTILINE):
        path = (git_dir / os.path.expanduser(match.group(1).strip('"'))).resolve()
        if root in path.parents and git_dir not in path.parents and path.is_file():
            out.append(path)
    return out


FOLLOWED = {
    "commondir": "it would point git at another config, attributes, objects and refs",
    "config.worktree": "it would give git a config of its own",
    "gitdir": "it would tie the repository to a working tree elsewhere",
    "objects/info/alternates": "it would make git borrow objects from another store",
    "objects/info/http-alternates": "it would make git borrow objects from another store",
    "info/grafts": "it would give commits other parents",
    "shallow": "it would cut the history git sees",
    "refs/replace": "it would make git read other objects in place of these",
    "worktrees": "it would make git follow other working trees' files",
    "modules": "it would hold other repositories",
    "branches": "it would name remotes",
    "remotes": "it would name remotes",
}
"""Files in a git directory that make git read something outside it, or read its own objects as others
(gitrepository-layout(5)); a git directory rhapsody keeps for itself holds none of them."""
CLAUDE_SETTINGS = (".claude/settings.json", ".claude/settings.local.json")
"""The project's Claude Code settings (config/claude.py reads them): hooks and allow rules once trusted."""
GUARDED = {".git/commondir": FOLLOWED["commondir"],
           ".git/config.worktree": FOLLOWED["config.worktree"],
           ".mcp.json": "it would make rhapsody start programs (MCP servers) in a trusted project",
           **{name: "its hooks run programs and its rules allow calls in a trusted project" for name in CLAUDE_SETTINGS}}
"""Files that must not appear during a command: created, they would run code later outside the sandbox."""


def store_refusal(git_dir: Path, own: dict[str, frozenset[str]]) -> str | None:
    """Why a git directory rhapsody keeps for itself must not be used (one line), None when it may: it is a
    link, holds a FOLLOWED file, or holds in a folder `own` lists (relative, '' the top) a link or an entry
    rhapsody never writes there (a later git may follow a file this list does not know)."""
    if os.path.islink(git_dir):
        return f"refusing {git_dir}: a symbolic link"
    for name, why in FOLLOWED.items():
        if os.path.lexists(git_dir / name):
            return f"refusing {git_dir}: it holds {name}, which rhapsody never writes ({why})"
    for folder, names in own.items():
        try:
            entries = sorted(os.scandir(git_dir / folder), key=lambda e: e.name)
        except OSError as exc:
            return f"refusing {git_dir}: cannot list {folder or 'it'}: {exc.strerror}"
        for entry in entries:
            shown = f"{folder}/{entry.name}" if folder else entry.name
            if entry.is_symlink():
                return f"refusing {git_dir}: its {shown} is a symbolic link"
            if entry.name not in names:
                return f"refusing {git_dir}: it holds {shown}, which rhapsody never writes there"
    return None


def git_redirects(root: Path) -> set[str]:
    """Which GUARDED files exist now (taken before a command runs)."""
    return {name for name in GUARDED if os.path.lexists(root / name)}


def undo_git_redirects(root: Path, before: set[str]) -> list[str]:
    """Remove GUARDED files a command created; returns a note for each."""
    notes = []
    for name in sorted(git_redirects(root) - before):
        path = root / name
        try:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError as exc:
            notes.append(f"[rhapsody could not remove {name} that the command created: {exc}]")
            continue
        notes.append(f"[rhapsody removed {name} that the command created: {GUARDED[name]}]")
    return notes


def hooks_path(root: Path, create: bool = False) -> Path | None:
    """The `core.hooksPath` folder inside the root (husky and friends), read from the git config; None when
    it does not exist, unless `create` (the sandbox creates it so that it can be frozen before a command
    could create it and fill it).

    When the folder sits in a dot-folder other than the root (husky's `.husky/_`, whose
    scripts run `.husky/<hook>`), the dot-folder is what is frozen: the hooks live there."""
    text = ""
    for git_dir in _dirs_of(root, root / ".git"):  # a `.git` file names the folder whose config counts
        for config in [git_dir / "config", *_included_configs(root, git_dir)]:
            try:
                text += small_bytes(config).decode("utf-8", errors="replace") + "\n"
            except OSError:
                pass
    found = re.findall(r"^\s*hookspath\s*=\s*(.+?)\s*$", text, re.IGNORECASE | re.MULTILINE)
    if not found:
        return None
    path = (root / os.path.expanduser(found[-1].strip('"'))).resolve()  # the last one wins, as in git
    if path == root or root not in path.parents:
        return None
    if create and not os.path.lexists(path):
        try:
            path.mkdir(parents=True)
        except OSError:
            return None
    if path.parent != root and path.parent.name.startswith("."):
        path = path.parent
    return path if path.exists() else None


_SAFE_KEY = re.compile(
    r"^(core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase|precomposeunicode|symlinks|autocrlf"
    r"|eol|safecrlf|quotepath)|user\.(name|email)|author\.(name|email)|committer\.(name|email)|init\.defaultbranch"
    r"|extensions\.objectformat|remote\.[^\n]+\.(url|pushurl|fetch|push|tagopt|prune)|branch\.[^\n]+\.(remote|merge)"
    r"|submodule\.[^\n]+\.(url|active))$", re.IGNORECASE)
"""Keys kept in a nested repository's config that a command wrote: none of them names a program."""


def nested_state(root: Path, nested: list[Path]) -> dict[Path, bytes | None]:
    """Each nested git directory's config as it is now (None when absent): taken before a command runs."""
    out: dict[Path, bytes | None] = {}
    for entry in nested:
        for git_dir in _dirs_of(root, entry):
            if git_dir == (root / ".git").resolve():
                continue
            for name in ("config", "config.worktree"):
                try:
                    out[git_dir / name] = small_bytes(git_dir / name)
                except OSError:
                    out[git_dir / name] = None
    return out


def defuse_nested(root: Path, before: dict[Path, bytes | None], nested: list[Path]) -> list[str]:
    """Strip every program-naming key from nested git configs a command created or changed, and drop
    the hooks of nested git directories it created: the user's own `git status` in the project
    recurses into a submodule with that submodule's config (core.fsmonitor, filters)."""
    notes = []
    for config, data in nested_state(root, nested).items():
        if data is None or before.get(config) == data:
            continue
        try:
            dropped = _keep_safe_keys(config)
        except OSError as exc:
            notes.append(f"[rhapsody could not clean {config.relative_to(root)} that the command wrote: {exc}]")
            continue
        if dropped:
            notes.append(f"[rhapsody removed {', '.join(dropped)} from {config.relative_to(root)} that the command "
                         "wrote: a nested repository's config must not name programs]")
        hooks = config.parent / "hooks"
        if config.parent / "config" not in before and hooks.is_dir() and not hooks.is_symlink():
            try:
                removed = [p.name for p in hooks.iterdir() if not p.name.endswith(".sample")]
            except OSError:
                removed = []
            for name in removed:
                _remove(hooks / name)
            if removed:
                notes.append(f"[rhapsody removed hooks {', '.join(sorted(removed))} of the new nested repository "
                             f"{config.parent.relative_to(root)}]")
    return notes


def _keep_safe_keys(config: Path) -> list[str]:
    """Rewrite `config` with only _SAFE_KEY entries (a link is replaced by a file); the keys dropped."""
    try:
        done = lifeline.run(["git", "config", "--file", str(config), "--no-includes", "--list", "-z"],
                            stdin=subprocess.DEVNULL, capture_output=True, timeout=30,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1",
                                 "HOME": "/nonexistent"})
        listed, readable = done.stdout, done.returncode == 0 and not config.is_symlink()
    except (OSError, subprocess.TimeoutExpired):
        listed, readable = b"", False
    pairs = [entry.partition("\n")[::2] for entry in listed.decode("utf-8", "replace").split("\0") if entry]
    kept = [(k, v) for k, v in pairs if _SAFE_KEY.match(k)]
    dropped = sorted({k for k, _ in pairs if not _SAFE_KEY.match(k)})
    if readable and not dropped:
        return []
    _remove(config)
    fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(_render_config(kept))
    return dropped or ["what could not be read"]


def _render_config(pairs: list[tuple[str, str]]) -> str:
    lines = []
    for key, value in pairs:
        section, _, rest = key.partition(".")
        sub, _, name = rest.rpartition(".")
        head = f'[{section} "{_quote(sub)}"]' if sub else f"[{section}]"
        lines.append(f'{head}\n\t{name} = "{_quote(value)}"\n')
    return "".join(lines)


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass
