"""The operations a front end may submit to the agent: the one typed way in.

Events (core/events.py) go out of the agent; operations come in, each through `Agent.submit(op)`
and nothing else: no front end writes a record, sets a toolbox field or reads the checkpoint store
itself. Each operation is a frozen pydantic model tagged by `kind`, so an editor protocol or a
script can send one as JSON (`parse({"kind": "hint", "text": "…"})`) and the agent's `match` over
`Op` ends in `assert_never`: an operation the agent does not handle is a type error.

`submit` acts at once and returns a `Receipt` (what to tell the human now); what takes time (a
turn, a shell command) runs as the agent's own task, and all it says arrives on the agent's one
event queue (`Agent.events`), questions for the human included (`ApprovalAsked`, `PlanReviewAsked`),
answered by an `ApprovalAnswer` or a `PlanAnswer` carrying the question's id.

Imports: stdlib, pydantic and rhapsody.core only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from rhapsody.core.access.permissions import Mode
from rhapsody.core.session import records as rec


class _Op(BaseModel):
    """What every operation is: immutable, strict, no field it does not know."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, defer_build=True)


class UserTurn(_Op):
    """A new turn on the human's message; refused while a turn runs (a hint is the way in then)."""

    kind: Literal["user_turn"] = "user_turn"
    text: str = ""
    """The message (a custom command's prompt holds more than was typed); empty: only what is pending
    (hints, a micro-handoff that is wanted)."""
    typed: str | None = None
    """What the human typed when `text` holds more: only these words attach images and files."""
    shell: bool = False
    """A custom command's prompt: its `` !`command` ``s run first (core/agent/prompt_shell.py)."""


class AddHint(_Op):
    """A hint typed while the agent works: `steer` reaches it at the next tool boundary, `queue` at the end
    of the turn; on disk before `submit` returns, so a resume keeps it."""

    kind: Literal["hint"] = "hint"
    text: str
    mode: Literal["steer", "queue"] = "steer"


class QueueMessage(_Op):
    """The human's message for when the agent is free: a new turn now when idle, queued for the end of the
    turn while one runs (a custom command's prompt sent while the agent works)."""

    kind: Literal["queue_message"] = "queue_message"
    text: str
    typed: str | None = None


class Interrupt(_Op):
    """Stop the running turn as Esc does: what streamed is kept, open calls are answered "interrupted",
    a handoff request ends, an open question is dropped."""

    kind: Literal["interrupt"] = "interrupt"


Decision = Literal["once", "always", "deny"]
"""An approval's answer: allow this call once, allow it and the offered session rules, deny."""


class ApprovalAnswer(_Op):
    """The human's answer to the question `ApprovalAsked(id=…)` put; `reason` goes with a denial to the
    agent as the human's own words, verbatim."""

    kind: Literal["approval_answer"] = "approval_answer"
    id: str
    decision: Decision
    reason: str = ""


class PlanAnswer(_Op):
    """The human's answer to the plan `PlanReviewAsked(id=…)` put: approved (as `plan`, edited or empty for as
    proposed, then the work goes on in `mode`) or rejected, `feedback` reaching the agent as their own words."""

    kind: Literal["plan_answer"] = "plan_answer"
    id: str
    decision: Literal["approve", "reject"]
    plan: str = ""
    mode: Mode = "auto-edit"
    feedback: str = ""


class SetMode(_Op):
    """Switch the permission mode, on record so a resume keeps it."""

    kind: Literal["set_mode"] = "set_mode"
    mode: Mode


class RequestHandoff(_Op):
    """Ask for the micro-handoff: at the next tool boundary, or as a turn of its own when idle (`/handoff`,
    ctrl+o)."""

    kind: Literal["request_handoff"] = "request_handoff"


class UndoHandoff(_Op):
    """Put the last seam's stripped blocks back (`/unhandoff`); only between turns."""

    kind: Literal["undo_handoff"] = "undo_handoff"


RewindWhat = Literal["files", "conversation", "both"]
"""What a rewind restores."""


class Rewind(_Op):
    """Go back to before message `point` (numbered from 1 as `/rewind` lists them): the files, the
    conversation or both. Files changed outside rhapsody since then are not overwritten unless `force`: the
    receipt refuses and names them (`Receipt.outside`), and the front end asks and submits again. Only
    between turns."""

    kind: Literal["rewind"] = "rewind"
    point: int
    what: RewindWhat = "both"
    force: bool = False


class ShellCommand(_Op):
    """The human's own `!command`, run in the agent's sandbox; its output is queued as their words."""

    kind: Literal["shell"] = "shell"
    command: str


class AddNotice(_Op):
    """A line the front end showed the human, kept in the history so a resume shows it again (a command
    typed, its answer)."""

    kind: Literal["notice"] = "notice"
    text: str
    error: bool = False
    command: bool = False
    """The line is a slash command the human typed."""


Op = Annotated[
    Union[UserTurn, AddHint, QueueMessage, Interrupt, ApprovalAnswer, PlanAnswer, SetMode, RequestHandoff,
          UndoHandoff, Rewind, ShellCommand, AddNotice],
    Field(discriminator="kind"),
]
"""Every operation, discriminated on `kind`."""

_OPS: TypeAdapter[Op] = TypeAdapter(Op, config=ConfigDict(defer_build=True))


def parse(data: dict[str, Any]) -> Op:
    """One operation from decoded JSON (an editor protocol, a script); raises pydantic's ValidationError."""
    return _OPS.validate_python(data, strict=False)


@dataclass(frozen=True)
class Receipt:
    """What `submit` did at once: whether it was taken, a line for the human (empty: nothing to say), and
    the id of what it made (a hint's `h3`); `refill`: text for the prompt (a rewound message)."""

    ok: bool = True
    text: str = ""
    started: bool = False
    """Work began (a turn, a shell command): what it says comes on `Agent.events`, ending with `Idle`."""
    id: str = ""
    refill: str = ""
    reload: bool = False
    """The history changed under the front end (a seam undone, a rewind): rebuild the transcript."""
    record: rec.Record | None = None
    """The record the operation wrote that the front end shows (the `unseam` of an undone handoff)."""
    outside: tuple[str, ...] = ()
    """A rewind refused: files changed outside rhapsody it would overwrite (`Rewind(force=True)` does)."""
