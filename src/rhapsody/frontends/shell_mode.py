"""`!command`: a line starting with `!` is a shell command the human runs from the prompt.

It runs as a `ShellCommand` operation (core/agent/shell.py runs it in the bash tool's sandbox and queues
its output as the human's own words); this module only tells such a line apart.
"""

from __future__ import annotations


def shell_command(text: str) -> str | None:
    """The command of a `!command` line, or None for any other line."""
    return text[1:].strip() or None if text.startswith("!") else None
