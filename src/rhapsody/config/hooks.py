"""The hooks of the settings (`[[hooks.EVENT]]`): which programs run on which events.

Only their shape lives here, so that reading the settings loads no more than pydantic;
`rhapsody.hook_runner` runs them.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from rhapsody.core.toolbox.hooks import CLAUDE_NAMES


class HookCommand(BaseModel):
    """One hook program (`{type = "command", command = "...", timeout = 60}`)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["command"] = "command"
    """Only shell commands (Claude Code's `command` type)."""
    command: str
    """Run with `bash -c` in the project root; the event's JSON arrives on standard input."""
    timeout: float = Field(60.0, gt=0)
    """Seconds before the hook's process group is killed (the turn goes on)."""


class HookMatcher(BaseModel):
    """Hooks for the tools a matcher names (`[[hooks.PreToolUse]]`)."""

    model_config = ConfigDict(extra="forbid")

    matcher: str = ""
    """A regular expression over the tool's name, rhapsody's or Claude Code's (`Bash|Edit`); '' or '*' is every tool."""
    hooks: list[HookCommand] = Field(default_factory=list)
    """The programs to run."""

    @field_validator("matcher")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            if value != "*":
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    def takes(self, subject: str) -> bool:
        """Whether this matcher applies to tool `subject` (events without a tool always match)."""
        if self.matcher in ("", "*") or not subject:
            return True
        names = (subject, CLAUDE_NAMES.get(subject, subject))
        return any(re.fullmatch(self.matcher, n) for n in names)


HookEvent = Literal["PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "Notification", "PreHandoff", "PostHandoff"]
HookSettings = dict[HookEvent, list[HookMatcher]]
