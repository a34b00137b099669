"""The bash tool: a command in the project root, inside the OS sandbox, bounded in time and output.

The command runs in bubblewrap (`sandbox/bwrap.py`) at the level the toolbox chose for
this call; it leaves the sandbox only when the model asked (`sandbox: false` with a
justification) and the human or a user rule allowed it, or when the sandbox is off or
unavailable (then every run asks, see core/access/permissions.py). Output is read as a stream
into a bounded buffer (`sandbox/procs.py`); the process group dies at the end.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field, model_validator

from rhapsody.core.access.permissions import SANDBOXED, Confinement, Mode, SandboxSetting
from rhapsody.core.toolbox.protocol import Escape, Tool, ToolContext, ToolOutcome, exit_trailer
from rhapsody.prompts import load
from rhapsody.sandbox import gitguard, procs, bwrap as sandbox
from rhapsody.tools.git import gitlinks
from rhapsody.sandbox.bwrap import scrubbed_env
from rhapsody.sandbox.tree_index import TreeIndex
from rhapsody.core.session import records as rec


class BashInput(BaseModel):
    command: str = Field(description="The bash command line to run in the project root.")
    timeout: float | None = Field(None, gt=0, le=3600, description="Seconds before the command is killed.")
    sandbox: bool = Field(True, description="Leave true. false asks the human to run this command outside the "
                                            "sandbox (network, files outside the project); give a justification.")
    justification: str | None = Field(None, description="Required with sandbox: false: why the sandbox cannot do.")

    @model_validator(mode="after")
    def _justified(self) -> BashInput:
        if not self.sandbox and not (self.justification or "").strip():
            raise ValueError("sandbox: false needs a justification saying why the command cannot run in the sandbox")
        return self


class Bash(Tool):
    """Run a shell command."""

    name: ClassVar[str] = "bash"
    description: ClassVar[str] = load("tools/bash")
    Input: ClassVar[type[BaseModel]] = BashInput
    writes: ClassVar[bool] = True
    reads_files: ClassVar[bool] = False

    def __init__(self, setting: SandboxSetting = "workspace-write", network: bool = False, index: TreeIndex | None = None) -> None:
        self.setting = setting
        self.network = network
        self.index = index or sandbox.INDEX

    def argument_of(self, args: BashInput) -> str:
        """The command line: rules match each of its simple commands."""
        return args.command

    def confinement(self, permission_mode: Mode) -> Confinement:
        """Where a command would run in this mode: a sandbox level, 'off' or 'unavailable'."""
        level = sandbox.effective_level(self.setting, permission_mode)
        if level == "off":
            return "off"
        if not sandbox.bwrap_path():
            return "unavailable"
        return "read-only" if level == "read-only" else "workspace-write"

    def escape(self, args: BashInput) -> Escape:
        """`sandbox: false` asks to run outside the sandbox, with the model's justification."""
        return Escape(not args.sandbox, args.justification or "")

    async def run(self, args: BashInput, ctx: ToolContext) -> ToolOutcome:
        timeout = min(args.timeout or ctx.bash_timeout, ctx.bash_timeout)  # the user's cap; the model may only lower it
        argv: list[str] = ["bash", "-c", args.command]
        fds: tuple[int, ...] = ()
        root = ctx.root.resolve()
        nested = None
        if ctx.confinement in SANDBOXED:
            walk = self.index.walk(root)  # one walk: the sandbox's secret masks and the nested-repository guard
            argv, fds = sandbox.wrap(argv, ctx.root, ctx.confinement, self.network, ctx.protected, walk)
            nested = gitguard.nested_state(root, _nested(root, walk.nested))
        before = sandbox.git_redirects(ctx.root)
        # outside the sandbox, under the supervisor: what the command starts dies with it, and with rhapsody
        done = await procs.run(argv, str(ctx.root), scrubbed_env(), timeout, ctx.output_cap, fds,
                               supervised=ctx.confinement not in SANDBOXED)
        undone = sandbox.undo_git_redirects(ctx.root, before)
        if nested is not None:  # the index lists again only the folders the command changed
            undone += gitguard.defuse_nested(root, nested, _nested(root, self.index.walk(root).nested))
        notes = "".join(f"\n{note}" for note in undone)
        where = f"sandbox {ctx.confinement}" if ctx.confinement in SANDBOXED else "no sandbox"
        facts = rec.ShellFacts(command=args.command, confinement=where)
        if done.timed_out:
            return ToolOutcome(f"{done.output}{notes}\n[killed after {timeout:g} s timeout]", is_error=True,
                               exit_code=done.exit_code, facts=facts)
        code = done.exit_code
        return ToolOutcome(f"{done.output}{notes}{exit_trailer(code)}", is_error=code != 0, exit_code=code, facts=facts)


def _nested(root: Path, found: list[Path]) -> list[Path]:
    """Nested repositories: found by the sandbox's walk, and every submodule git's index records."""
    return [*found, *(p for p in (root / link / ".git" for link in gitlinks(root)) if p not in found)]
