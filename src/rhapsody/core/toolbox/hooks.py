"""Hooks: programs the user's settings run at fixed points of a turn (Claude Code's model).

The core says *when* a hook fires and what its verdict does; running the programs is an
adapter's job (rhapsody.hook_runner, wired in rhapsody.wiring), so the core starts no process.

    PreToolUse        before a tool call is permitted: deny (the model sees the reason) or ask
    PostToolUse       after a call ran: a reason or context is added to the result the model sees
    UserPromptSubmit  before the human's text is sent: block it, or add context after it
    Stop              when the agent ends its turn: block to make it go on, with the reason as the next message
    Notification      when rhapsody asks the human a permission question (does not wait for the hook)
    PreHandoff        when the field note is asked for: context is added to the request
    PostHandoff       once the field note is saved: gets its path and text (to file it elsewhere)

A hook's `allow` never widens what rhapsody's own rules decide: a call that would be asked
about is still asked about (docs/security.md). Deny beats ask beats allow across hooks.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rhapsody.core.access.permissions import Mode, Verdict
from rhapsody.core.json_types import JsonObject

if TYPE_CHECKING:
    from rhapsody.core.session.session import Session

EVENTS = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "Notification", "PreHandoff", "PostHandoff")
CLAUDE_NAMES = {"bash": "Bash", "edit_file": "Edit", "write_file": "Write", "read_file": "Read",
                "search_text": "Grep", "find_files": "Glob", "web_fetch": "WebFetch"}
"""The Claude Code tool a rhapsody tool stands for: hooks see that name, and matchers may use either."""
STOP_CONTINUES = 3
"""Times a Stop hook may send the agent back to work in one turn (its scripts rely on stop_hook_active)."""


@dataclass(frozen=True)
class HookVerdict:
    """What the hooks of one event decided, combined."""

    blocked: bool = False
    """Exit status 2, or a JSON `decision` of block/deny: the event's action does not happen."""
    decision: Verdict | None = None
    """PreToolUse's permission answer: allow, deny, ask, or None for none."""
    reason: str = ""
    """Why, for the model (stderr of exit 2, or the JSON reason)."""
    context: str = ""
    """additionalContext (or a UserPromptSubmit hook's plain output), for the model."""

    @property
    def denies(self) -> bool:
        """Whether a PreToolUse verdict refuses the call."""
        return self.blocked or self.decision == "deny"


NOTHING = HookVerdict()


class Hooks(Protocol):
    """Runs the configured hooks of an event; every run is a `hook` history record."""

    def wants(self, event: str, subject: str = "") -> bool:
        """Whether any hook of `event` takes `subject` (a tool name): its payload is built only then."""
        ...

    async def fire(self, session: Session, event: str, payload: JsonObject, subject: str = "") -> HookVerdict:
        """Run the hooks of `event` whose matcher takes `subject` (a tool name); their combined verdict."""
        ...

    def notices(self) -> list[str]:
        """One line per hook that failed or timed out since the last call (taken, not peeked)."""
        ...


class NoHooks:
    """No hooks configured: nothing runs."""

    def wants(self, event: str, subject: str = "") -> bool:
        """Never."""
        return False

    async def fire(self, session: Session, event: str, payload: JsonObject, subject: str = "") -> HookVerdict:
        """Always nothing."""
        return NOTHING

    def notices(self) -> list[str]:
        """Never any."""
        return []


def combine(verdicts: list[HookVerdict]) -> HookVerdict:
    """Several hooks' verdicts as one: any block blocks, deny beats ask beats allow, texts joined."""
    rank: dict[Verdict | None, int] = {None: 0, "allow": 1, "ask": 2, "deny": 3}
    decision = max((v.decision for v in verdicts), key=rank.__getitem__, default=None)
    return HookVerdict(
        blocked=any(v.blocked for v in verdicts),
        decision=decision,
        reason="\n".join(v.reason for v in verdicts if v.reason),
        context="\n".join(v.context for v in verdicts if v.context),
    )


def payload(session: Session, event: str, mode: Mode, **fields: Any) -> JsonObject:
    """The JSON a hook reads on standard input: Claude Code's common fields, then the event's own."""
    return {"session_id": session.id, "transcript_path": str(session.path), "cwd": str(session.root),
            "hook_event_name": event, "permission_mode": mode, **fields}


def tool_fields(name: str, arguments: JsonObject, root: Path) -> JsonObject:
    """tool_name and tool_input as Claude Code's hooks know them (Bash, Edit, file_path...), and rhapsody's name."""
    given = dict(arguments)
    if isinstance(given.get("path"), str):
        given.setdefault("file_path", str((root / given["path"]).resolve()))
    if name == "edit_file":
        given.setdefault("old_string", given.get("old", ""))
        given.setdefault("new_string", given.get("new", ""))
    return {"tool_name": CLAUDE_NAMES.get(name, name), "tool_input": given, "rhapsody_tool": name}
