"""`!command`: a shell command the human runs from the prompt, in the same sandbox as the agent's bash.

It runs as the bash tool would run it in this permission mode (bubblewrap at the level the mode
allows), without a permission question: the human typed it. Its output, with secrets masked as
in any tool output, is queued as the human's own message, so the agent reads it with the next
message (or at the end of the turn running now), and a resume keeps it like any hint.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import dataclasses

from rhapsody.core.events import ShellRan
from rhapsody.core.secrets import mask
from rhapsody.core.toolbox.protocol import EXIT_TRAILER, ToolContext
from rhapsody.core.toolbox.orchestrator import Toolbox
from rhapsody.core.session.session import Session



async def run_human_command(session: Session, toolbox: Toolbox, ctx: ToolContext, command: str) -> ShellRan:
    """Run the human's command in the bash tool's sandbox and queue its output as their own words."""
    bash = toolbox.tools["bash"]
    confined = dataclasses.replace(ctx, confinement=bash.confinement(toolbox.permission_mode))
    outcome = await bash.run(bash.Input.model_validate({"command": command}), confined)
    output = EXIT_TRAILER.sub("", mask(outcome.content, toolbox.secrets))  # the words say the exit code
    words = f"I ran `{command}` myself" + (f" (exit {outcome.exit_code})" if outcome.exit_code is not None else "")
    hint = session.hint(f"{words}:\n```\n{output.rstrip()}\n```", mode="queue")
    return ShellRan(command, outcome.exit_code, output, hint.id)
