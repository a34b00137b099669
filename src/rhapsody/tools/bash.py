"""The bash tool: a command in the project root, in its own process group, with a timeout.

The process group is killed whole on timeout or when the turn is interrupted, so a
command's children never outlive it. Output is capped keeping head and tail.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import ClassVar

from pydantic import BaseModel, Field

from rhapsody.core.tools import ToolContext, ToolOutcome
from rhapsody.prompts import load
from rhapsody.tools.paths import cap_text


class BashInput(BaseModel):
    command: str = Field(description="The bash command line to run in the project root.")
    timeout: float | None = Field(None, gt=0, le=3600, description="Seconds before the command is killed.")


class Bash:
    """Run a shell command."""

    name: ClassVar[str] = "bash"
    description: ClassVar[str] = load("tools/bash")
    Input: ClassVar[type[BaseModel]] = BashInput
    writes: ClassVar[bool] = True
    reads_files: ClassVar[bool] = False

    async def run(self, args: BashInput, ctx: ToolContext) -> ToolOutcome:
        timeout = args.timeout or ctx.bash_timeout
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", args.command,
            cwd=ctx.root,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
            env=scrubbed_env(),
        )
        timed_out = False
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout)
        except TimeoutError:
            timed_out = True
            _kill_group(proc.pid)
            out, _ = await proc.communicate()
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            raise
        text = cap_text(out.decode("utf-8", errors="replace"), ctx.output_cap)
        code = proc.returncode
        facts = {"command": args.command}
        if timed_out:
            return ToolOutcome(f"{text}\n[killed after {timeout:g} s timeout]", is_error=True, exit_code=code, facts=facts)
        return ToolOutcome(f"{text}\n[exit code {code}]", is_error=code != 0, exit_code=code, facts=facts)


SCRUBBED = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
            "AWS_BEARER_TOKEN_BEDROCK")


def scrubbed_env() -> dict[str, str]:
    """The environment for commands, without the credentials rhapsody itself uses."""
    return {k: v for k, v in os.environ.items() if k not in SCRUBBED}


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
