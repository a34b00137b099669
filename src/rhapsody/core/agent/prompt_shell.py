"""`` !`command` `` in a custom command's prompt: run through the bash tool's usual path, output put in its place.

As in Claude Code, each `` !`...` `` of a prompt file is run before the prompt is sent and replaced by
what it printed. It goes through the toolbox like the model's own bash call (rules, mode, the
question in `ask`, hooks, the sandbox); one refused stops the command: nothing is sent and the
human reads one line saying which.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from typing import Protocol

from rhapsody.core.events import Event, Notice
from rhapsody.core.toolbox.orchestrator import Toolbox
from rhapsody.core.toolbox.protocol import EXIT_TRAILER, ToolContext


class TurnRunner(Protocol):
    """What the expansion needs of core/agent/loop.py's `Agent` (named here so the modules form no circle)."""

    toolbox: Toolbox
    ctx: ToolContext

    def run(self, text: str | None = None, typed: str | None = None) -> AsyncGenerator[Event, None]:
        """One turn on `text`."""
        ...

MARK = re.compile(r"!`([^`\n]+)`")
"""`` !`command` ``: one line between backticks, right after `!`."""


async def expanded_turn(agent: TurnRunner, text: str, typed: str | None) -> AsyncGenerator[Event, None]:
    """The turn on `text` with every `` !`command` `` replaced by its output; a Notice instead when one is refused."""
    parts: list[str] = []
    last = 0
    for match in MARK.finditer(text):
        outcome, _ = await agent.toolbox.run("bash", {"command": match.group(1)}, agent.ctx)
        if outcome.is_error and outcome.exit_code is None:  # refused (denied, or not run at all): not expanded
            yield Notice(f"custom command not sent: !`{match.group(1)}` was refused ({outcome.content.splitlines()[0]})")
            return
        parts += [text[last:match.start()], EXIT_TRAILER.sub("", outcome.content).rstrip("\n")]
        last = match.end()
    async for event in agent.run("".join([*parts, text[last:]]), typed):
        yield event
