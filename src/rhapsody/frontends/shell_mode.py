"""`!command`: a shell command the human runs from the prompt, in the same sandbox as the agent's bash.

It runs as the bash tool would run it in this permission mode (bubblewrap at the level the mode
allows), without a permission question: the human typed it. Its output, with secrets masked as
in any tool output, is queued as the human's own message, so the agent reads it with the next
message (or at the end of the turn running now), and a resume keeps it like any hint.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rhapsody.core.agent.loop import Agent


@dataclasses.dataclass(frozen=True)
class HumanRun:
    """What a `!command` did: its exit code (None: it failed to run), output and the message queued."""

    command: str
    exit_code: int | None
    output: str
    hint_id: str


def shell_command(text: str) -> str | None:
    """The command of a `!command` line, or None for any other line."""
    return text[1:].strip() or None if text.startswith("!") else None


async def run_human_command(agent: Agent, command: str) -> HumanRun:
    """Run the human's command in the bash tool's sandbox and queue its output as their own words."""
    from rhapsody.core.secrets import mask
    from rhapsody.view.peek import EXIT_TRAILER

    bash = agent.toolbox.tools["bash"]
    ctx = dataclasses.replace(agent.ctx, confinement=bash.confinement(agent.toolbox.permission_mode))
    outcome = await bash.run(bash.Input.model_validate({"command": command}), ctx)
    output = EXIT_TRAILER.sub("", mask(outcome.content, agent.toolbox.secrets))  # the words say the exit code
    words = f"I ran `{command}` myself" + (f" (exit {outcome.exit_code})" if outcome.exit_code is not None else "")
    hint = agent.session.hint(f"{words}:\n```\n{output.rstrip()}\n```", mode="queue")
    return HumanRun(command, outcome.exit_code, output, hint.id)
