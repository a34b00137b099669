"""A real parent for tests/sandbox/test_no_orphans.py: starts one kind of child through rhapsody's own code
(`python -m tests.orphan_parent KIND ROOT`), then blocks until the test kills it with SIGKILL."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from rhapsody.core.session.context import RequestSpec
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.protocol import ToolContext
from rhapsody.config.hooks import HookCommand, HookMatcher
from rhapsody.hook_runner import HookRunner
from rhapsody.tools import default_toolbox
from rhapsody.tools.git import run_git

SLEEPER = "python3 -c 'import time; time.sleep(300)'"
"""A long-running command whose command line can carry the test's marker."""
MOVED = f"setsid -f {SLEEPER}"
"""The same, in a new session: out of the process group the command was started in."""
QUIET = "</dev/null >/dev/null 2>&1"
"""Holding none of the command's pipes, so the call ends when the command does."""


async def tool(root: Path, name: str, args: dict[str, object], sandbox: str) -> None:
    ctx = ToolContext(root, Session.start(root, RequestSpec(model="m", system="s", tools=[])), 300, 20000)
    await default_toolbox("yolo", sandbox=sandbox).run(name, args, ctx)


async def hook(root: Path, command: str) -> None:
    session = Session.start(root, RequestSpec(model="m", system="s", tools=[]))
    runner = HookRunner({"Stop": [HookMatcher(hooks=[HookCommand(command=command, timeout=300)])]}, root)
    await runner.fire(session, "Stop", {})


def main(kind: str, root: Path) -> None:
    bash = f"{SLEEPER} {root} & {SLEEPER} {root}"  # one in the background, one in the foreground
    if kind == "git":
        run_git(root, "status")
    elif kind in ("search", "ripgrep"):
        asyncio.run(tool(root, "search_text", {"pattern": "(a+)+$"}, "off"))
    elif kind == "bash-off":
        asyncio.run(tool(root, "bash", {"command": bash}, "off"))
    elif kind == "bash-sandboxed":
        asyncio.run(tool(root, "bash", {"command": bash}, "workspace-write"))
    elif kind == "bash-off-moved":  # one moved out of the group into a session of its own, one in front
        asyncio.run(tool(root, "bash", {"command": f"{MOVED} {root} {QUIET}; {SLEEPER} {root}"}, "off"))
    elif kind == "hook":
        asyncio.run(hook(root, f"exec {SLEEPER} {root}"))
    elif kind == "hook-background":  # one in the background, one moved out of the group, one in front
        asyncio.run(hook(root, f"{SLEEPER} {root} {QUIET} & {MOVED} {root} {QUIET}; {SLEEPER} {root}"))
    else:
        raise SystemExit(f"unknown kind {kind}")


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
