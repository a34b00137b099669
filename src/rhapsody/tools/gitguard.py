"""What keeps git's own programs out of reach of a sandboxed command (see tools/sandbox.py).

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

import os
import re
import shutil
from pathlib import Path

_FROZEN = ("config", "config.worktree", "hooks", "info", "modules", "worktrees", "commondir")


def binds(root: Path, nested: list[Path]) -> list[str]:
    """bwrap arguments protecting every git directory of `root` (after the root's own bind)."""
    out: list[str] = []
    for entry in [root / ".git", *nested]:
        if entry.is_symlink() or entry.is_file():
            out += ["--ro-bind", str(entry), str(entry)]  # the pointer itself (a link is bound as what it names)
        for git_dir in _dirs_of(root, entry):
            out += _freeze(root, git_dir)
    hooks = hooks_path(root)
    if hooks is not None:
        out += ["--ro-bind", str(hooks), str(hooks)]
    mcp = root / ".mcp.json"
    if mcp.is_file() and not mcp.is_symlink():
        out += ["--ro-bind", str(mcp), str(mcp)]
    return out


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
        text = file.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    text = text.removeprefix("gitdir:").strip()
    return ((relative_to or file.parent) / text).resolve() if text else None


def _inside(root: Path, path: Path) -> bool:
    return path == root or root in path.parents


def _freeze(root: Path, git_dir: Path) -> list[str]:
    if not (git_dir / "hooks").exists():
        (git_dir / "hooks").mkdir(exist_ok=True)
    out = ["--bind", str(git_dir), str(git_dir)]
    for name in _FROZEN:
        path = git_dir / name
        if path.exists() and not path.is_symlink():
            out += ["--ro-bind", str(path), str(path)]
    for path in _included_configs(root, git_dir):
        out += ["--ro-bind", str(path), str(path)]
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


GUARDED = {".git/commondir": "it would point git at another config",
           ".git/config.worktree": "it would give git a config of its own",
           ".mcp.json": "it would make rhapsody start programs (MCP servers) in a trusted project"}
"""Files that must not appear during a command: created, they would run code later outside the sandbox."""


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


