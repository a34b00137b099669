"""Events the agent loop emits; every front end renders the same stream.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rhapsody.core.messages import Message, ToolUseBlock


@dataclass(frozen=True)
class TurnStarted:
    """A new request is about to go out."""

    user_text: str = ""


@dataclass(frozen=True)
class TextDelta:
    """A piece of visible text as it streams."""

    text: str


@dataclass(frozen=True)
class ThinkingDelta:
    """A piece of thinking as it streams (shown dim, collapsed)."""

    text: str


@dataclass(frozen=True)
class BlockStopped:
    """A streamed content block finished."""

    kind: str


@dataclass(frozen=True)
class Retrying:
    """The request failed and is retried; text streamed since the last request is void."""

    attempt: int
    reason: str
    delay: float


@dataclass(frozen=True)
class ModelResponse:
    """The complete assistant message of one request, with usage."""

    message: Message
    stop_reason: str | None
    usage: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RequestSent:
    """A request body went out; its compact size and estimated tokens."""

    request_bytes: int
    est_tokens: int
    messages: int


@dataclass(frozen=True)
class UsageReported:
    """Usage the API reported for the last request."""

    usage: dict[str, int]


@dataclass(frozen=True)
class ToolStarted:
    """A tool call is about to run."""

    call: ToolUseBlock


@dataclass(frozen=True)
class ToolFinished:
    """A tool call finished (or was refused)."""

    call: ToolUseBlock
    output: str
    is_error: bool
    duration_ms: int
    exit_code: int | None = None
    refused: str = ""
    """Why the call was not run (a permission refusal); empty when it ran."""


@dataclass(frozen=True)
class NarrationViolation:
    """A tool call came without narration and was not run."""

    call: ToolUseBlock
    words: int
    required: int
    total: int


@dataclass(frozen=True)
class HintDelivered:
    """Pending hints reached the model in a user message."""

    hint_ids: tuple[str, ...]
    where: str


@dataclass(frozen=True)
class HandoffAsked:
    """The harness asked the agent for a field note."""

    reminder: bool = False


@dataclass(frozen=True)
class SeamCommitted:
    """A micro-handoff seam was applied; the record holds its measurements."""

    record: dict[str, Any]


@dataclass(frozen=True)
class ContextPruned:
    """The rolling policy took tool traffic of old rounds out of the context."""

    record: dict[str, Any]


@dataclass(frozen=True)
class HandoffFailed:
    """The handoff did not happen; the context is unchanged."""

    reason: str


@dataclass(frozen=True)
class Interrupted:
    """The turn was interrupted; what streamed so far is kept."""

    partial_text: str


@dataclass(frozen=True)
class TurnEnded:
    """The agent ended its turn."""

    stop_reason: str | None


@dataclass(frozen=True)
class Failed:
    """The turn stopped on an error the loop cannot recover from."""

    message: str


Event = (
    TurnStarted
    | TextDelta
    | ThinkingDelta
    | BlockStopped
    | Retrying
    | ModelResponse
    | RequestSent
    | UsageReported
    | ToolStarted
    | ToolFinished
    | NarrationViolation
    | HintDelivered
    | HandoffAsked
    | SeamCommitted
    | ContextPruned
    | HandoffFailed
    | Interrupted
    | TurnEnded
    | Failed
)
