"""Which repository git may use for a project: its own, whose every part lies inside it.

A repository that arrives with the project (an archive, a clone) can point git elsewhere:
`core.worktree` at the home folder, a `.git` file whose `gitdir:` names another project,
a `commondir`, `objects/info/alternates` or an included config file outside. git would
then show another project's committed content, or files outside the root. `refusal` says,
in one line, why a repository is refused; every git call rhapsody makes asks it first.

The repository's area is the folder holding the `.git` entry that git finds from the root
(the root itself, or a folder above it when the project is part of a larger repository):
the git directory, the common directory, alternates, config files and the working tree
must all lie inside it. One exception is checked, not assumed: a worktree made by
`git worktree add`, whose git directory is `<common>/worktrees/<name>` with a `gitdir`
file pointing back at this `.git` (a folder outside the project cannot be made to point
back by the project's own files); its common directory then belongs to the area too.

Stdlib only; the git calls themselves are the caller's (`tools/git.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from rhapsody.tools.gitguard import SMALL_CAP, small_bytes

Git = Callable[..., str]
"""Runs one git command in the root and returns its stdout ('' when it failed)."""
SCOPES = ("local", "worktree")
"""Config scopes that come with the repository (global and system ones are the user's)."""


def refusal(root: Path, git: Git) -> str | None:
    """Why git must not be used for `root` (one line), or None when the repository is its own or there is none."""
    root = root.resolve()
    found = git("rev-parse", "--path-format=absolute", "--show-toplevel", "--absolute-git-dir", "--git-common-dir")
    if len(found.splitlines()) != 3:
        if git("rev-parse", "--git-dir").strip():  # a repository without a working tree: `git log` still reads it
            return f"refused: git finds a repository for {root} but no working tree (core.bare or core.worktree)"
        return None  # not a repository: git calls fail on their own
    top, git_dir, common = (Path(p).resolve() for p in found.splitlines())
    anchor = _anchor(root)
    if anchor is None:
        return f"refused: git finds the repository {git_dir} without a .git entry in or above {root}"
    area = [anchor, *_linked_common(anchor, git_dir, common)]
    for what, path in (("working tree", top), ("git directory", git_dir), ("common directory", common)):
        if not _within(path, area):
            return f"refused: the repository's {what} {path} lies outside {anchor}"
    if top != anchor:
        return f"refused: the repository's working tree is {top}, not {anchor} (core.worktree)"
    return _alternates(common, area) or _configs(root, git, area)


def _anchor(root: Path) -> Path | None:
    """The nearest folder at or above `root` with a `.git` entry (where git's discovery stops)."""
    for folder in (root, *root.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return None


def _linked_common(anchor: Path, git_dir: Path, common: Path) -> list[Path]:
    """[common] when `git_dir` is a worktree of `common` that points back at `anchor/.git`, else []."""
    if git_dir.parent != common / "worktrees":
        return []
    try:
        back = small_bytes(git_dir / "gitdir").decode("utf-8", errors="replace").strip()
    except OSError:
        return []
    return [common] if back and (git_dir / back).resolve() == (anchor / ".git").resolve() else []


def _within(path: Path, area: list[Path]) -> bool:
    return any(path == a or a in path.parents for a in area)


def _alternates(common: Path, area: list[Path]) -> str | None:
    """Object stores the repository borrows from (`objects/info/alternates`, followed recursively by git)."""
    pending, seen = [common / "objects"], set()
    while pending:
        objects = pending.pop()
        if objects in seen:
            continue
        seen.add(objects)
        try:
            text = small_bytes(objects / "info" / "alternates").decode("utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines()[:SMALL_CAP]:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            store = (objects / line.strip('"')).resolve()
            if not _within(store, area):
                return f"refused: the repository borrows objects from {store} (objects/info/alternates), outside {area[0]}"
            pending.append(store)
    return None


def _configs(root: Path, git: Git, area: list[Path]) -> str | None:
    """Config files of the repository's own scopes (with every include git follows) lie inside the area.
    (git names a config found from the working directory relatively: `file:.git/config`.)"""
    listed = git("config", "--list", "--show-origin", "--show-scope", "-z")
    fields = listed.split("\0")
    for scope, origin in zip(fields[0::3], fields[1::3]):
        if scope not in SCOPES or not origin.startswith("file:"):
            continue
        path = (root / origin[5:]).resolve()
        if not _within(path, area):
            return f"refused: the repository's config includes {path}, outside {area[0]}"
    return None
