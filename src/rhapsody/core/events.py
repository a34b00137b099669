"""Events the agent loop emits; every front end renders the same stream.

This stream is the one channel from the loop to the front ends: what the app, plain mode and
headless show live (the text, each tool call and its facts, every word the harness itself sent
the model, seams, hints delivered) arrives as an event. A front end reads the history's records
only to rebuild a transcript (on resume, after a rewind or a seam) and for the full view of an
old result, never to find what just happened (tests/frontends/test_front_end_channel.py holds them to it).

Every event names itself in public: `json_name` is its `event` field in the headless JSON lines and
the Python API's `as_json` (core/event_json.py), fixed here so that renaming a class never changes
the output (tests/core/test_event_names.py pins every name; docs/python-api.md lists them).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from rhapsody.core.session import records as rec
from rhapsody.core.session.messages import Message, ToolUseBlock


@dataclass(frozen=True)
class TurnStarted:
    """A turn began: the human's text (empty for a turn the harness started) is in the context.

    Emitted once per turn, before its first request; `RequestSent` marks each request.
    """

    json_name: ClassVar[str] = "turn_started"
    user_text: str = ""


@dataclass(frozen=True)
class TextDelta:
    """A piece of visible text as it streams."""

    json_name: ClassVar[str] = "text_delta"
    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    """A piece of thinking as it streams (shown dim, collapsed)."""

    json_name: ClassVar[str] = "thinking_delta"
    text: str


@dataclass(frozen=True)
class BlockStopped:
    """A streamed content block finished."""

    json_name: ClassVar[str] = "block_stopped"
    kind: str


@dataclass(frozen=True)
class Retrying:
    """The request failed and is retried; text streamed since the last request is void."""

    json_name: ClassVar[str] = "retrying"
    attempt: int
    reason: str
    delay: float
    asked: float | None = None
    """The wait the server asked for (retry-after), when it asked; `delay` is it, capped."""


@dataclass(frozen=True)
class RetryCountdown:
    """A tick while waiting to retry: whole seconds left, so front ends can count down."""

    json_name: ClassVar[str] = "retry_countdown"
    attempt: int
    remaining: float


@dataclass(frozen=True)
class ModelResponse:
    """The complete assistant message of one request, with usage."""

    json_name: ClassVar[str] = "model_response"
    message: Message
    stop_reason: str | None
    usage: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestSent:
    """A request body went out; its compact size and estimated tokens."""

    json_name: ClassVar[str] = "request_sent"
    request_bytes: int
    est_tokens: int
    messages: int


@dataclass(frozen=True)
class UsageReported:
    """Usage the API reported for the last request."""

    json_name: ClassVar[str] = "usage_reported"
    usage: dict[str, int]


@dataclass(frozen=True)
class ToolStarted:
    """A tool call is about to run."""

    json_name: ClassVar[str] = "tool_started"
    call: ToolUseBlock


@dataclass(frozen=True)
class ToolFinished:
    """A tool call finished (or was refused)."""

    json_name: ClassVar[str] = "tool_finished"
    call: ToolUseBlock
    output: str
    is_error: bool
    duration_ms: int
    exit_code: int | None = None
    refused: str = ""
    """Why the call was not run (a permission refusal); empty when it ran."""
    diff: str = ""
    """The diff a write or edit applied (its `tool_run` record's `diff`)."""
    proposed: str = ""
    """The diff a refused write or edit proposed (its record's `proposed_diff`)."""


@dataclass(frozen=True)
class NarrationViolation:
    """A tool call came without narration and was not run."""

    json_name: ClassVar[str] = "narration_violation"
    call: ToolUseBlock
    words: int
    required: int
    total: int


@dataclass(frozen=True)
class HintDelivered:
    """Pending hints reached the model in a user message."""

    json_name: ClassVar[str] = "hint_delivered"
    hint_ids: tuple[str, ...]
    where: str


@dataclass(frozen=True)
class HarnessSaid:
    """The harness itself told the model `text` (a handoff request, a reminder, the word to go on after a seam).

    `seq` is the history record of the user message that carried it: a front end that rebuilt its
    transcript from the history up to that record or later shows it already.
    """

    json_name: ClassVar[str] = "harness_said"
    text: str
    seq: int


@dataclass(frozen=True)
class DenialDelivered:
    """The human denied a call with a reason (or approved a plan); their words reached the model verbatim.

    `text` is exactly what the model got as the human's message: front ends show it as the human's words.
    """

    json_name: ClassVar[str] = "denial_delivered"
    call: ToolUseBlock
    text: str


@dataclass(frozen=True)
class MemoryReminded:
    """At the end of a task that used tools, the harness asked the agent to update project memory."""

    json_name: ClassVar[str] = "memory_reminded"

@dataclass(frozen=True)
class HandoffAsked:
    """The harness asked the agent for a field note."""

    json_name: ClassVar[str] = "handoff_asked"
    reminder: bool = False


@dataclass(frozen=True)
class SeamCommitted:
    """A micro-handoff seam was applied; the record holds its measurements (`shelved`: the second window's
    `shelve` record, when the oldest seams' words left the context with it)."""

    json_name: ClassVar[str] = "seam_committed"
    record: rec.Seam
    shelved: rec.Shelve | None = None


@dataclass(frozen=True)
class ContextPruned:
    """The rolling policy took tool traffic of old rounds out of the context."""

    json_name: ClassVar[str] = "context_pruned"
    record: rec.Prune


@dataclass(frozen=True)
class HandoffFailed:
    """The handoff did not happen; the context is unchanged."""

    json_name: ClassVar[str] = "handoff_failed"
    reason: str


@dataclass(frozen=True)
class Interrupted:
    """The turn was cancelled (Esc, Ctrl+C); what streamed so far is kept.

    `during` is "stream" (the answer was streaming) or "tools" (calls were running);
    `open_calls` are the tool calls answered with an "interrupted" error result.
    The loop emits it as the last event of the turn, then lets the cancellation go on.
    """

    json_name: ClassVar[str] = "interrupted"
    partial_text: str
    during: str = "stream"
    open_calls: tuple[str, ...] = ()


@dataclass(frozen=True)
class LimitsExceeded:
    """A limit ended the turn before its next request (like mini-swe-agent's LimitsExceeded).

    `limit` is the setting's name (`max_steps_per_turn` or `max_cost_usd`), `value` what was
    reached, `maximum` the setting.
    """

    json_name: ClassVar[str] = "limits_exceeded"
    limit: str
    value: float
    maximum: float


@dataclass(frozen=True)
class Notice:
    """A status line from outside the conversation (an MCP server failed, died or waits for trust)."""

    json_name: ClassVar[str] = "notice"
    text: str


@dataclass(frozen=True)
class ImagesAttached:
    """Images the human's prompt named went with it, each as `[image NAME WxH]`."""

    json_name: ClassVar[str] = "images_attached"
    labels: tuple[str, ...]


@dataclass(frozen=True)
class FilesAttached:
    """Files and folders the human's `@` words named went with the prompt, each as its block's text
    (core/attachments.py reads one back)."""

    json_name: ClassVar[str] = "files_attached"
    texts: tuple[str, ...]


@dataclass(frozen=True)
class TurnEnded:
    """The agent ended its turn."""

    json_name: ClassVar[str] = "turn_ended"
    stop_reason: str | None


@dataclass(frozen=True)
class TodoUpdated:
    """The agent wrote its todo list (whole): each item's text and state (pending, in_progress, done)."""

    json_name: ClassVar[str] = "todo_list"
    items: tuple[dict[str, str], ...] = ()


@dataclass(frozen=True)
class SubagentStarted:
    """The agent handed a task to a sub-agent (core/agent/subagent.py): its own session, model and permission mode."""

    json_name: ClassVar[str] = "subagent_started"
    id: str
    call_id: str
    task: str
    model: str
    mode: str
    session: str


@dataclass(frozen=True)
class SubagentStep:
    """One event of a running sub-agent, as its own loop emitted it: front ends show it folded under the call."""

    json_name: ClassVar[str] = "subagent_step"
    id: str
    step: Event


@dataclass(frozen=True)
class SubagentEnded:
    """A sub-agent stopped: `status` done, limit (its budget), failed or interrupted; `summary` what went back."""

    json_name: ClassVar[str] = "subagent_ended"
    id: str
    status: str
    summary: str


@dataclass(frozen=True)
class Failed:
    """The turn stopped on an error the loop cannot recover from."""

    json_name: ClassVar[str] = "failed"
    message: str


@dataclass(frozen=True)
class ApprovalAsked:
    """A permission question for the human; an `ApprovalAnswer` op with the same id answers it. A question
    whose turn is interrupted is dropped (the `Interrupted` that follows says so)."""

    json_name: ClassVar[str] = "approval_asked"
    id: str
    tool: str
    argument: str
    why: str
    args: dict[str, Any] = field(default_factory=dict)
    """The call's arguments, so the question can show the diff or the exact command."""
    rules: tuple[str, ...] = ()
    """The session rules an "allow always" would add; empty when no rule can allow the call."""


@dataclass(frozen=True)
class PlanReviewAsked:
    """A plan `exit_plan` proposes, for the human to approve (as edited, then a mode) or reject with their words;
    a `PlanAnswer` op with the same id answers it. Dropped with its turn, as a permission question is."""

    json_name: ClassVar[str] = "plan_review_asked"
    id: str
    plan: str


@dataclass(frozen=True)
class ShellRan:
    """The human's own `!command` ran in the agent's sandbox; its output is queued as their words."""

    json_name: ClassVar[str] = "shell_ran"
    command: str
    exit_code: int | None
    output: str
    hint_id: str
    in_turn: bool = False
    """It finished while a turn ran: that turn reads it before it ends. Otherwise the next message carries it."""

    @property
    def read_when(self) -> str:
        """When the agent reads the output, in the words the front ends show."""
        return "the agent reads it before this turn ends" if self.in_turn else "the agent reads it with your next message"


@dataclass(frozen=True)
class Idle:
    """The agent's work on the last operation is over (a turn, a shell command): it waits for the next."""

    json_name: ClassVar[str] = "idle"

Event = (
    TurnStarted
    | TextDelta
    | ThinkingDelta
    | BlockStopped
    | Retrying
    | RetryCountdown
    | ModelResponse
    | RequestSent
    | UsageReported
    | ToolStarted
    | ToolFinished
    | NarrationViolation
    | HintDelivered
    | HarnessSaid
    | DenialDelivered
    | MemoryReminded
    | HandoffAsked
    | SeamCommitted
    | ContextPruned
    | HandoffFailed
    | Interrupted
    | Notice
    | ImagesAttached
    | TodoUpdated
    | FilesAttached
    | LimitsExceeded
    | TurnEnded
    | SubagentStarted
    | SubagentStep
    | SubagentEnded
    | Failed
    | ApprovalAsked
    | PlanReviewAsked
    | ShellRan
    | Idle
)


STREAMING = (TextDelta, ThinkingDelta, BlockStopped, UsageReported, ModelResponse, RequestSent, Retrying, RetryCountdown)
"""Events of a reply still streaming: the reply is recorded only after them."""
