"""Git through gitpython: the tool the agent uses and the facts the harness measures.

The only module that imports `git`.
"""

from __future__ import annotations

import asyncio
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
    return repo.git.log(f"-{args.limit}", "--oneline", "--decorate", "--", *paths)


def git_facts(root: Path) -> dict[str, Any]:
    """Git root, branch, HEAD and dirty files, measured by the harness."""
    repo = _repo(root)
    if repo is None:
        return {"git_root": None}
    branch = "(detached)" if repo.head.is_detached else repo.active_branch.name
    head = repo.head.commit.hexsha[:12] if repo.head.is_valid() else "(no commits)"
    dirty = repo.git.status("--porcelain").splitlines()
    return {"git_root": repo.working_tree_dir, "branch": branch, "head": head, "dirty": dirty}
