"""History records as types: one pydantic model per kind, one union discriminated on `kind`.

A history file is input like any other: it may have been edited by hand, by another tool
or by an attacker. `parse(record)` turns one decoded JSON line into its model, or raises
InvalidRecord naming the first field of the wrong type (or a message the Messages API
would refuse to carry) in one line, so the reader can refuse the file naming the line
instead of failing somewhere deep in a fold. The writer parses every record before it
writes it, so a record no reader would accept is a bug that never reaches the disk.

Every record carries the envelope `v`, `seq`, `ts`, `kind` (`ts` and `seq` may be absent in
hand-written fixtures). Fields are strict: `"2"` is not a number, `true` is not a count.
A closed kind refuses fields it does not know; an open one (`_Open`) keeps them: kinds
that carry facts of their own (`tool_run`, `notice`, `permission`), and kinds whose fields
are still moving. A kind this version does not know reads as `Other` and is folded by
nobody. The folds `match` on these types and end in `assert_never`, so a kind that a fold
does not handle is a type error. docs/history-format.md documents every kind and field
(tests/core/session/test_record_types.py holds the two together).

Imports: stdlib, pydantic and rhapsody.core.session.messages only.
"""

from __future__ import annotations

import re

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeVar, Union, get_args, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from rhapsody.core.session.messages import Block, ToolResultBlock, ToolUseBlock
from rhapsody.core.access.permissions import Confinement, DecidedBy, Mode, Verdict


class InvalidRecord(ValueError):
    """A record that does not have its kind's shape; str() says why in one line."""


class _Record(BaseModel):
    """The envelope every record carries."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", defer_build=True)

    v: int = 1
    seq: int = -1
    ts: float = 0.0

    absent_when_none: ClassVar[frozenset[str]] = frozenset()
    """Fields a writer leaves out of the line when they are None (an optional fact not there), where the
    others are written as set, null included."""


class _Open(_Record):
    """A kind that keeps fields it does not declare (see the module docstring)."""

    model_config = ConfigDict(extra="allow")


class Shape(BaseModel):
    """What a view holds and measures, on either side of a seam or a rolling cut."""

    model_config = ConfigDict(strict=True, frozen=True, extra="allow", defer_build=True)

    messages: int = 0
    text_blocks: int = 0
    tool_use: int = 0
    tool_result: int = 0
    thinking: int = 0
    request_bytes: int = 0
    est_tokens: int = 0


# -- the session and its conversation --------------------------------------------------


SESSION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
"""What a session record's `session` may be (the names of rhapsody's own files are made from it)."""


class ParentLink(BaseModel):
    """A sub-agent's session names the session and the call that started it (core/agent/subagent.py)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", defer_build=True)

    session: str
    tool_use_id: str
    subagent: str


class SessionStarted(_Open):
    """Always first: what every request of the session is built from."""

    kind: Literal["session"] = "session"
    session: str = ""
    cwd: str = ""
    branch: str = ""
    version: str = ""
    model: str = ""
    system: str = ""
    tools: list[dict[str, Any]] = Field(default_factory=list)
    max_tokens: int = 16000
    parallel_tools: bool = False
    thinking: dict[str, Any] | None = None
    parent: ParentLink | None = None
    """Set in a sub-agent's session: the session and the `delegate` call that started it."""
    absent_when_none: ClassVar[frozenset[str]] = frozenset({"parent"})

    @field_validator("session")
    @classmethod
    def _a_session_id(cls, value: str) -> str:
        """rhapsody names files after it (`notes/ID-seamN.md`, `exports/ID.html`): a history from a cloned
        repository or a download could otherwise name `../../x` and have rhapsody write outside the project."""
        if not SESSION_NAME.fullmatch(value):
            raise ValueError(f"'session' {value[:40]!r} is not a session id")
        return value


class MessageAdded(_Open):
    """One conversation message, in the Messages API's block shapes (imports add flags: open)."""

    kind: Literal["message"] = "message"
    role: Literal["user", "assistant"]
    content: list[Block]

    @model_validator(mode="after")
    def _api_shapes(self) -> MessageAdded:
        for i, block in enumerate(self.content):
            if isinstance(block, ToolUseBlock) and not isinstance(block.input, dict):
                raise ValueError(f"content block {i} (tool_use) 'input' is {_name(block.input)}, expected dict")
            if (isinstance(block, ToolResultBlock) and "content" in block.model_fields_set
                    and not isinstance(block.content, (str, list))):
                raise ValueError(f"content block {i} (tool_result) 'content' is {_name(block.content)}, "
                                 "expected str or list")
        return self


class RequestMade(_Record):
    """A request went out: its compact size and estimated tokens."""

    kind: Literal["request"] = "request"
    bytes: int = 0
    est_tokens: int = 0
    messages: int = 0
    model: str = ""
    cache_ttl: Literal["5m", "1h"] | None = None
    absent_when_none: ClassVar[frozenset[str]] = frozenset({"cache_ttl"})
    """The lifetime of the request's cache entries when it was not the default 5 minutes (core/accounting/cache_ttl.py)."""


Count = Annotated[int, Field(ge=0)]
"""A token count: a whole number, never negative (a negative one would turn every ratio over it)."""


class UsageRecorded(_Record):
    """What the API reported for a request, and why it stopped."""

    kind: Literal["usage"] = "usage"
    stop_reason: str | None = None
    input_tokens: Count = 0
    cache_creation_input_tokens: Count = 0
    cache_read_input_tokens: Count = 0
    output_tokens: Count = 0
    cache_creation_1h_input_tokens: Count = 0
    """The part of the cache writes made with the 1-hour TTL (billed 2x base, the rest 1.25x)."""


class Retry(_Record):
    """A request failed and is retried."""

    kind: Literal["retry"] = "retry"
    attempt: int = 0
    reason: str = ""
    delay: float = 0.0


class _Facts(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", defer_build=True)


class FileFacts(_Facts):
    """What `read_file`, `write_file` and `edit_file` did: the path as shown, and the diff a write made."""

    path: str
    op: Literal["read", "write"]
    blob: str | None = None
    """`read`: the git blob hash of what was read (a later write compares against it)."""
    diff: str | None = None


class ShellFacts(_Facts):
    """What `bash` ran, and where (`sandbox workspace-write`, `no sandbox`)."""

    command: str
    confinement: str


class WebFacts(_Facts):
    """What `web_fetch` fetched: the URL, its status and type, or the redirect it refused to follow."""

    url: str
    status: int | None = None
    content_type: str | None = None
    chars: int | None = None
    redirect: str | None = None


class PlanFacts(_Facts):
    """What became of a plan the agent proposed (`approved`, `rejected`, `unanswered`)."""

    plan: str
    plan_verdict: Literal["approved", "rejected", "unanswered"]
    plan_edited: bool | None = None


class TodoFacts(_Facts):
    """A `todo_write` call that completed an item."""

    todo_completed: bool


class ProposalFacts(_Facts):
    """The diff a write or edit the human denied would have made."""

    proposed_diff: str


class DelegateFacts(_Facts):
    """A `delegate` call's sub-agent: its id, how it ended, its session and the files it changed."""

    subagent: str
    subagent_status: str
    subagent_session: str
    subagent_changed: list[str] = Field(default_factory=list)


ToolFacts = Union[FileFacts, ShellFacts, WebFacts, PlanFacts, TodoFacts, ProposalFacts, DelegateFacts]
"""Each tool's facts: written into its `tool_run` record, flat, beside the run's own fields."""


class ToolRun(_Open):
    """A tool call ran (or was refused), with its tool's facts (`ToolFacts`, flat: `path`, `command`, `diff`…)."""

    kind: Literal["tool_run"] = "tool_run"
    tool_use_id: str
    name: str
    is_error: bool = False
    exit_code: int | None = None
    duration_ms: int = 0
    refused: str | None = None
    absent_when_none: ClassVar[frozenset[str]] = frozenset({"refused"})
    path: str | None = None
    op: str | None = None
    blob: str | None = None
    diff: str | None = None
    command: str | None = None
    confinement: str | None = None
    url: str | None = None
    status: int | None = None
    content_type: str | None = None
    chars: int | None = None
    redirect: str | None = None
    plan: str | None = None
    plan_verdict: str | None = None
    plan_edited: bool | None = None
    todo_completed: bool | None = None
    proposed_diff: str | None = None
    subagent: str | None = None
    subagent_status: str | None = None
    subagent_session: str | None = None
    subagent_changed: list[str] | None = None


class Violation(_Record):
    """A call came without enough narration and was not run."""

    kind: Literal["violation"] = "violation"
    tool_use_id: str = ""
    name: str = ""
    words: int = 0
    required: int = 0


class Hint(_Record):
    """The human typed while the agent worked."""

    kind: Literal["hint"] = "hint"
    id: str
    text: str
    mode: str = "steer"


class HintsDelivered(_Record):
    """Hints reached the model in message record `message_seq`."""

    kind: Literal["hint_delivered"] = "hint_delivered"
    ids: list[str]
    message_seq: int | None = None
    where: str = ""


class Permission(_Open):
    """A permission decision (other deciders add fields: open)."""

    kind: Literal["permission"] = "permission"
    tool: str = ""
    argument: str = ""
    decision: Verdict
    by: DecidedBy
    reason: str = ""
    confinement: Confinement | None = None
    absent_when_none: ClassVar[frozenset[str]] = frozenset({"confinement"})


class PermissionMode(_Record):
    """`/permissions MODE` changed the permission mode."""

    kind: Literal["permission_mode"] = "permission_mode"
    mode: Mode


class Denial(_Record):
    """The human typed a reason with a denial."""

    kind: Literal["denial"] = "denial"
    tool_use_id: str = ""
    name: str = ""
    text: str = ""
    message_seq: int | None = None


class TodoItem(BaseModel):
    """One item of the agent's todo list."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", defer_build=True)

    content: str = Field(min_length=1)
    status: Literal["pending", "in_progress", "done"]


class Todo(_Record):
    """The agent's todo list, whole, as a `todo_write` call (or an imported list call) left it."""

    kind: Literal["todo"] = "todo"
    items: list[TodoItem]
    at: int = 0
    """How many messages the conversation held when it was written: a rewind to before them takes it back."""
    tool_use_id: str = ""


SubagentState = Literal["started", "done", "limit", "failed", "interrupted"]
"""Where a sub-agent stands: started, then how it ended."""


class Subagent(_Record):
    """A sub-agent the session started (core/agent/subagent.py): `started`, then how it ended, with its figures."""

    kind: Literal["subagent"] = "subagent"
    id: str
    session: str
    tool_use_id: str = ""
    state: SubagentState
    model: str = ""
    mode: Mode | None = None
    """The permission mode it ran in (None: an imported one, whose source does not say)."""
    task: str = ""
    tool_calls: int = 0
    requests: int = 0
    usage: dict[str, int] = Field(default_factory=dict)
    cost_usd: float = 0.0
    priced: bool = True
    kept_out_tokens: int = 0
    """Estimated tokens of its tool calls and results: what they would have added to this session's context."""

    @field_validator("session")
    @classmethod
    def _a_session_id(cls, value: str) -> str:
        """Its history file is named after it: no path may hide in it."""
        if not SESSION_NAME.fullmatch(value):
            raise ValueError(f"'session' {value[:40]!r} is not a session id")
        return value


class MemoryReminder(_Record):
    """The harness sent its one project-memory reminder."""

    kind: Literal["memory_reminder"] = "memory_reminder"


# -- the micro-handoff, seams and cuts ---------------------------------------------------


class Handoff(_Open):
    """The micro-handoff moved to `state` (its fields are still moving: open)."""

    kind: Literal["handoff"] = "handoff"
    state: str
    interrupted_work: bool | None = None
    note_path: str | None = None
    seam: int | None = None
    after_strip: int | None = None
    note_bytes: int | None = None
    est_tokens: int | None = None
    at: str | None = None
    """`wanted` by the automatic seam: the boundary it judged, with `saves` and `costs` (core/accounting/seam_cost.py)."""
    saves: int | None = None
    costs: int | None = None
    absent_when_none: ClassVar[frozenset[str]] = frozenset({"after_strip", "est_tokens", "at", "saves", "costs"})


class LegacyHandoffAsked(_Record):
    """Written before the `handoff` record existed; read as `asked`."""

    kind: Literal["handoff_asked"] = "handoff_asked"
    interrupted_work: bool = False


class Seam(_Open):
    """A strip was committed, with its audit hashes and measurements (a seam at the window adds `window`: open)."""

    kind: Literal["seam"] = "seam"
    seam: int = 0
    boundary: int
    note_path: str = ""
    authored_sha256: str = ""
    stripped_sha256: str | None = None
    stripped_calls: int | None = None
    before: Shape
    after: Shape
    reported_input_before: int | None = None
    asked_est_tokens: int | None = None
    window: dict[str, Any] | None = None
    absent_when_none: ClassVar[frozenset[str]] = frozenset({"window", "asked_est_tokens"})


class Prune(_Record):
    """The rolling context policy took these calls out of the view."""

    kind: Literal["prune"] = "prune"
    ids: list[str]
    reason: str = ""
    stripped_sha256: str | None = None
    stripped_calls: int | None = None
    before: Shape
    after: Shape


class Shelve(_Record):
    """The second window: the words of the oldest seams left the view; messages before `boundary` keep
    only their field notes (the `micro_handoff` pairs), those before `notes_boundary` not even those,
    after `text`, the notice the model reads."""

    kind: Literal["shelve"] = "shelve"
    boundary: int
    seams: int
    text: str
    messages: int = 0
    notes_boundary: int = 0
    notes_seams: int = 0
    before_tokens: int = 0
    after_tokens: int = 0


class SeamTokens(_Record):
    """count_tokens figures for both sides of a seam."""

    kind: Literal["seam_tokens"] = "seam_tokens"
    seam: int = 0
    before: int = 0
    after: int = 0


class SeamFailed(_Record):
    """The audit failed; nothing was stripped."""

    kind: Literal["seam_failed"] = "seam_failed"
    reason: str = ""


class HandoffAbandoned(_Record):
    """The handoff ended without a note; nothing was stripped."""

    kind: Literal["handoff_failed"] = "handoff_failed"
    reason: str = ""


class Unseam(_Record):
    """`/unhandoff` undid seam `seam`."""

    kind: Literal["unseam"] = "unseam"
    seam: int = 0
    boundary: int
    returned_sha256: str | None = None
    returned_calls: int | None = None
    verified: bool | None = None


class ThinkingCut(_Record):
    """Thinking blocks before `boundary` leave the view."""

    kind: Literal["thinking_cut"] = "thinking_cut"
    boundary: int
    reason: str = ""


class SeamNote(_Open):
    """The note asked for after a seam at the window was written (fields still moving: open)."""

    kind: Literal["seam_note"] = "seam_note"
    seam: int = 0
    note_path: str = ""


# -- the session's course -----------------------------------------------------------------


class ModelSwitched(_Record):
    """The model was switched."""

    kind: Literal["model"] = "model"
    model: str


class Tools(_Record):
    """The tool definitions changed."""

    kind: Literal["tools"] = "tools"
    tools: list[dict[str, Any]]


class NoticeShown(_Open):
    """A status line shown to the human (front ends add fields of their own: open)."""

    kind: Literal["notice"] = "notice"
    text: str = ""
    shown: str | None = None
    error: bool | None = None
    command: bool | None = None
    absent_when_none: ClassVar[frozenset[str]] = frozenset({"error", "command"})


class TurnInterrupted(_Record):
    """Esc stopped a turn."""

    kind: Literal["interrupted"] = "interrupted"
    partial_text: str = ""
    during: str = ""
    open: list[str] = Field(default_factory=list)


class Limit(_Record):
    """A limit ended the turn before its next request."""

    kind: Literal["limit"] = "limit"
    limit: str = ""
    value: float = 0.0
    maximum: float = 0.0


class Error(_Record):
    """The turn stopped on an error, or an observer failed."""

    kind: Literal["error"] = "error"
    message: str = ""


class Resumed(_Record):
    """The session was reopened."""

    kind: Literal["resumed"] = "resumed"
    skipped_lines: int = 0
    torn_tail: bool = False


class Hook(_Open):
    """A hook program ran (fields still moving: open)."""

    kind: Literal["hook"] = "hook"
    event: str = ""
    outcome: str = ""
    command: str = ""
    exit_code: int | None = None
    duration_ms: int = 0
    reason: str | None = None
    absent_when_none: ClassVar[frozenset[str]] = frozenset({"reason"})


class Checkpoint(_Open):
    """The working tree was recorded in the shadow repository (fields still moving: open)."""

    kind: Literal["checkpoint"] = "checkpoint"
    at: str = ""
    commit: str = ""
    ms: int = 0
    left_out: list[list[Any]] = Field(default_factory=list)
    message: int | None = None
    """The index of the message the checkpoint precedes."""
    tool_use_id: str | None = None
    name: str | None = None


class CheckpointFailed(_Open):
    """A checkpoint could not be taken (fields still moving: open)."""

    kind: Literal["checkpoint_failed"] = "checkpoint_failed"
    at: str = ""
    reason: str = ""
    message: int | None = None
    tool_use_id: str | None = None
    name: str | None = None


class ConversationRewind(_Open):
    """The conversation went back to before message `to` (fields still moving: open)."""

    kind: Literal["rewind"] = "rewind"
    to: int
    checkpoint_seq: int | None = None
    text: str = ""
    est_tokens: int | None = None
    """The estimated request the rewound context makes (written since the figures follow a rewind)."""


class Restore(_Open):
    """Files went back to a checkpoint (fields still moving: open)."""

    kind: Literal["restore"] = "restore"
    state: str = ""
    target: str = ""
    before: str | None = None
    """`started`: the commit the files were at."""
    changed: int | None = None
    """`done`: how many paths changed."""


class Import(_Open):
    """Where an imported history came from (fields still moving: open)."""

    kind: Literal["import"] = "import"
    source: str
    format: str
    sha256: str


class KeptAside(_Open):
    """An imported source record kept outside the model's context (fields vary with `what`: open)."""

    kind: Literal["aside"] = "aside"
    what: str


class Compaction(_Open):
    """An imported source compacted its context here (fields still moving: open)."""

    kind: Literal["compaction"] = "compaction"
    boundary: int


class Other(_Open):
    """A kind this version does not know: kept, folded by nobody."""

    kind: str


Known = Annotated[
    Union[
        SessionStarted, MessageAdded, RequestMade, UsageRecorded, Retry, ToolRun, Violation, Hint, HintsDelivered, Permission,
        PermissionMode, Denial, Todo, Subagent, MemoryReminder, Handoff, LegacyHandoffAsked, Seam, Prune, Shelve, SeamTokens,
        SeamFailed,
        HandoffAbandoned, Unseam, ThinkingCut, SeamNote, ModelSwitched, Tools, NoticeShown, TurnInterrupted, Limit, Error, Resumed,
        Hook, Checkpoint, CheckpointFailed, ConversationRewind, Restore, Import, KeptAside, Compaction,
    ],
    Field(discriminator="kind"),
]
"""Every kind this version knows, discriminated on `kind`."""

Record = Union[Known, Other]
"""A history record of any kind."""

MODELS: dict[str, type[_Record]] = {
    get_args(model.model_fields["kind"].annotation)[0]: model for model in get_args(get_args(Known)[0])
}
"""Each known kind's model, by kind."""

_KNOWN: TypeAdapter[Known] = TypeAdapter(Known, config=ConfigDict(defer_build=True))


R = TypeVar("R", bound=BaseModel)
R2 = TypeVar("R2", bound=BaseModel)
R3 = TypeVar("R3", bound=BaseModel)

ENVELOPE = ("v", "seq", "ts", "kind")


@overload
def of(records: Iterable[BaseModel], kind: type[R], /) -> Iterator[R]: ...
@overload
def of(records: Iterable[BaseModel], kind: type[R], kind2: type[R2], /) -> Iterator[R | R2]: ...
@overload
def of(records: Iterable[BaseModel], kind: type[R], kind2: type[R2], kind3: type[R3], /) -> Iterator[R | R2 | R3]: ...
def of(records: Iterable[BaseModel], *kinds: type[BaseModel]) -> Iterator[BaseModel]:
    """The records of the given kinds (`of(session.records, rec.Seam)`), in order: the one way to pick records
    by kind, instead of comparing `kind` strings."""
    return (record for record in records if isinstance(record, kinds))


@overload
def last(records: Sequence[BaseModel], kind: type[R], /) -> R | None: ...
@overload
def last(records: Sequence[BaseModel], kind: type[R], kind2: type[R2], /) -> R | R2 | None: ...
@overload
def last(records: Sequence[BaseModel], kind: type[R], kind2: type[R2], kind3: type[R3], /) -> R | R2 | R3 | None: ...
def last(records: Sequence[BaseModel], *kinds: type[BaseModel]) -> BaseModel | None:
    """The newest record of the given kinds, or None (searched from the end)."""
    return next((record for record in reversed(records) if isinstance(record, kinds)), None)


@overload
def first(records: Iterable[BaseModel], kind: type[R], /) -> R | None: ...
@overload
def first(records: Iterable[BaseModel], kind: type[R], kind2: type[R2], /) -> R | R2 | None: ...
@overload
def first(records: Iterable[BaseModel], kind: type[R], kind2: type[R2], kind3: type[R3], /) -> R | R2 | R3 | None: ...
def first(records: Iterable[BaseModel], *kinds: type[BaseModel]) -> BaseModel | None:
    """The oldest record of the given kinds, or None."""
    return next((record for record in records if isinstance(record, kinds)), None)


def extra(record: BaseModel, name: str, default: Any = None) -> Any:
    """A field an open kind keeps without declaring it (a tool's own fact, a front end's flag)."""
    return (record.model_extra or {}).get(name, default)


def stamped(record: R, v: int, seq: int, ts: float) -> R:
    """The record with its envelope set (the writer numbers and dates it)."""
    return record.model_copy(update={"v": v, "seq": seq, "ts": ts})


def dump(record: BaseModel) -> dict[str, Any]:
    """The record as its JSON line holds it: the envelope and kind first, then only the fields that were set,
    less those of `absent_when_none` left None (a message's blocks as the Messages API expects them)."""
    head = {name: getattr(record, name) for name in ENVELOPE}
    body = record.model_dump(mode="json", exclude_unset=True, exclude=set(ENVELOPE))
    omitted: frozenset[str] = getattr(record, "absent_when_none", frozenset())
    for name in [n for n, value in body.items() if value is None and n in omitted]:
        del body[name]
    if isinstance(record, MessageAdded):
        body["content"] = [block.dump() for block in record.content]
    return {**head, **body}


def dumped(records: Iterable[BaseModel]) -> list[dict[str, Any]]:
    """The records as the history file holds them (`dump` of each): for output that is JSON anyway."""
    return [dump(record) for record in records]


def parsed(records: Iterable[dict[str, Any]]) -> list[Record]:
    """Decoded JSON records as their types (`parse` of each; InvalidRecord at the first of the wrong shape)."""
    return [parse(record) for record in records]


def parse(record: dict[str, Any]) -> Record:
    """The typed record; InvalidRecord (one line) when a field has the wrong type or is missing."""
    kind = record.get("kind")
    try:
        if kind in MODELS:
            return _KNOWN.validate_python(record)
        return Other.model_validate(record)
    except ValidationError as exc:
        raise InvalidRecord(_describe(str(kind), exc.errors()[0])) from None


_EXPECTED = {"int_type": "int", "float_type": "float", "string_type": "str", "bool_type": "bool",
             "list_type": "list", "dict_type": "dict", "model_type": "an object", "model_attributes_type": "an object",
             "greater_than_equal": "a count of 0 or more"}


def _describe(kind: str, error: Mapping[str, Any]) -> str:
    """One line for pydantic's first error, in the record's own terms."""
    loc = list(error["loc"])
    if loc and loc[0] == kind:
        loc = loc[1:]  # the union's tag
    if error["type"] == "value_error":
        return f"{kind} record: {error['msg'].removeprefix('Value error, ')}"
    if len(loc) >= 2 and loc[0] == "content" and isinstance(loc[1], int):
        return f"{kind} record: {_block(loc, error)}"
    return f"{kind} record{_field(loc, error)}"


def _field(loc: list[int | str], error: Mapping[str, Any]) -> str:
    where = repr(".".join(str(p) for p in loc if isinstance(p, str)))
    items = "".join(f" item {p}" for p in loc if isinstance(p, int))
    if error["type"] == "missing":
        return f" without {where}{items}"
    if error["type"] == "extra_forbidden":
        return f": unknown field {where}"
    if error["type"] == "literal_error":
        expected = str(error.get("ctx", {}).get("expected", "")).replace("'", "")
        return f": {where.strip(chr(39))} {str(error['input'])[:20]!r} is not {expected}"
    return f": {where}{items} is {_name(error['input'])}, expected {_EXPECTED.get(error['type'], error['msg'])}"


def _block(loc: list[int | str], error: Mapping[str, Any]) -> str:
    """A content block's error: `loc` is content, index, the block union's tag, then the field."""
    index, tag, rest = loc[1], loc[2] if len(loc) > 2 else "", [p for p in loc[3:] if isinstance(p, str)]
    prefix = f"content block {index}" + (f" ({tag})" if tag not in ("", "other") else "")
    if not rest:
        return f"{prefix} is {_name(error['input'])}, expected an object"
    if error["type"] == "missing":
        return f"{prefix} has no {rest[0]!r}"
    return f"{prefix} {'.'.join(rest)!r} is {_name(error['input'])}"


def _name(value: Any) -> str:
    return "null" if value is None else type(value).__name__
