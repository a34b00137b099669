"""Git through gitpython: the tool the agent uses and the facts the harness measures.

The only module that imports `git`.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from rhapsody.core.tools import ToolContext, ToolFailure, ToolOutcome
from rhapsody.prompts import load
from rhapsody.tools.paths import cap_text


class GitInput(BaseModel):
    action: Literal["status", "diff", "log"] = Field(description="status, diff (working tree vs HEAD) or log.")
    path: str | None = Field(None, description="Limit diff or log to this path.")
    limit: int = Field(20, ge=1, le=500, description="Commits shown by log.")


class Git:
    """Read the repository's status, diff and log."""

    name: ClassVar[str] = "git"
    description: ClassVar[str] = load("tools/git")
    Input: ClassVar[type[BaseModel]] = GitInput
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = False

    async def run(self, args: GitInput, ctx: ToolContext) -> ToolOutcome:
        text = await asyncio.to_thread(_git, ctx.root, args)
        return ToolOutcome(cap_text(text, ctx.output_cap))


def _repo(root: Path) -> Any:
    import git

    try:
        return git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None


def _git(root: Path, args: GitInput) -> str:
    repo = _repo(root)
    if repo is None:
        raise ToolFailure(f"{root} is not inside a git repository")
    paths = [args.path] if args.path else []
    if args.action == "status":
        return repo.git.status("--short", "--branch") or "(clean)"
    if args.action == "diff":
        diff = repo.git.diff("HEAD", "--", *paths) if repo.head.is_valid() else repo.git.diff("--", *paths)
        return diff or "(no changes)"
    if not repo.head.is_valid():
        return "(no commits yet)"
    return str(repo.git.log(f"-{args.limit}", "--oneline", "--decorate", "--", *paths))


def git_facts(root: Path) -> dict[str, Any]:
    """Git root, branch, HEAD and dirty files, measured by the harness."""
    repo = _repo(root)
    if repo is None:
        return {"git_root": None}
    branch = "(detached)" if repo.head.is_detached else repo.active_branch.name
    head = repo.head.commit.hexsha[:12] if repo.head.is_valid() else "(no commits)"
    dirty = repo.git.status("--porcelain").splitlines()
    return {"git_root": repo.working_tree_dir, "branch": branch, "head": head, "dirty": dirty}


def git_blob(data: bytes) -> str:
    """The git blob id of `data` (what `git hash-object` prints), computed without git."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def commit_paths(root: Path, path: Path, message: str) -> str | None:
    """Commit changes under `path` alone; returns the commit id, None when nothing changed or no repository."""
    repo = _repo(root)
    if repo is None:
        return None
    repo.git.add("--all", "--", str(path))
    if not repo.git.diff("--cached", "--name-only", "--", str(path)):
        return None
    repo.git.commit("-m", message, "--", str(path))
    return str(repo.head.commit.hexsha)


def last_commit_time(root: Path, file: Path) -> float | None:
    """When `file` was last committed to (Unix time); None when never, or outside a repository."""
    repo = _repo(root)
    if repo is None:
        return None
    stamp = repo.git.log("-1", "--format=%ct", "--", str(file))
    return float(stamp) if stamp.strip() else None


def path_sizes(root: Path, path: str, limit: int) -> list[tuple[int, str, int, int]]:
    """(commit time, short id, files, bytes) of `path` at each of its last `limit` commits, oldest first."""
    import git

    try:
        repo = git.Repo(root, search_parent_directories=True)
        commits = list(repo.iter_commits(paths=path, max_count=limit))
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError, git.GitCommandError):
        return []
    out = []
    for commit in reversed(commits):
        try:
            tree: Any = commit.tree / path
        except KeyError:
            continue
        blobs = [b for b in tree.traverse() if b.type == "blob"]
        out.append((int(commit.committed_date), commit.hexsha[:10], len(blobs), sum(b.size for b in blobs)))
    return out


def init_repository(root: Path, files: list[str], message: str, user: tuple[str, str]) -> None:
    """Make `root` a git repository whose first commit, by `user` (name, email), holds `files`."""
    import git

    repo = git.Repo.init(root)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", user[0])
        cw.set_value("user", "email", user[1])
    repo.index.add(files)
    repo.index.commit(message)
