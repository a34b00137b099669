"""The shapes of other agents' session records, checked at the boundary before a parser walks them.

A parser reads fields as it needs them (claude_code.py, codex.py); each record is first validated
here against the types those fields must have, so a field of the wrong type (a list where an id
goes, a usage count that is text or negative) is one InputError naming the file, the line and the
field, never an error deep in the walk. Unknown fields are allowed (the formats grow), and so are
records of types no parser reads; a field a parser only tolerates (a timestamp it falls back from)
stays untyped.

Imports: stdlib, pydantic, rhapsody.core.errors only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from rhapsody.core.errors import InputError
from rhapsody.core.json_types import JsonObject

Count = Annotated[int, Field(ge=0)]
Lines = list[tuple[int, JsonObject]]


class _ForeignRecord(BaseModel):
    """Typed where rhapsody reads a field; anything else passes (strict: no text read as a number)."""

    model_config = ConfigDict(extra="allow", strict=True)


class Usage(_ForeignRecord):
    """A Messages API usage block (Claude Code's `message.usage`)."""

    input_tokens: Count | None = None
    cache_creation_input_tokens: Count | None = None
    cache_read_input_tokens: Count | None = None
    output_tokens: Count | None = None


class ClaudeBlock(_ForeignRecord):
    """One content block, typed where the conversation's shape is read before the parser's strict reading
    (a call's id and the call a result answers are compared and hashed)."""

    type: str | None = None
    id: str | None = None
    tool_use_id: str | None = None


class ClaudeMessage(_ForeignRecord):
    """The API message of a `user` or `assistant` record (each block is checked as a ClaudeBlock, then by the parser)."""

    id: str | None = None
    model: str | None = None
    role: str | None = None
    stop_reason: str | None = None
    usage: Usage | None = None


class ClaudeRecord(_ForeignRecord):
    """One line of a Claude Code transcript."""

    type: str | None = None
    uuid: str | None = None
    parentUuid: str | None = None
    logicalParentUuid: str | None = None
    sessionId: str | None = None
    agentId: str | None = None
    leafUuid: str | None = None
    isSidechain: bool | None = None
    isMeta: bool | None = None
    isCompactSummary: bool | None = None
    subtype: str | None = None
    operation: str | None = None
    cwd: str | None = None
    gitBranch: str | None = None
    version: str | None = None
    compactMetadata: JsonObject | None = None


class ClaudeTurn(ClaudeRecord):
    """A `user` or `assistant` line: it must carry its API message."""

    message: ClaudeMessage


class CodexUsage(_ForeignRecord):
    """`info.last_token_usage` of a Codex `token_count` event."""

    input_tokens: Count | None = None
    cached_input_tokens: Count | None = None
    output_tokens: Count | None = None
    reasoning_output_tokens: Count | None = None


class CodexTokens(_ForeignRecord):
    """The `info` of a `token_count` event."""

    model_context_window: Count | None = None
    last_token_usage: CodexUsage | None = None


class CodexEvent(_ForeignRecord):
    """An `event_msg` payload (only a `token_count` event's `info` is read)."""

    type: str | None = None


class CodexTokenCount(CodexEvent):
    """A `token_count` event: the usage of the request just answered."""

    info: CodexTokens | None = None


class CodexItem(_ForeignRecord):
    """A `response_item` payload: a message, reasoning, a call or its output."""

    type: str | None = None
    role: str | None = None
    content: list[Any] | None = None
    summary: list[Any] | None = None
    encrypted_content: str | None = None
    call_id: str | None = None
    id: str | None = None
    name: str | None = None
    action: JsonObject | None = None


class CodexMeta(_ForeignRecord):
    """The `session_meta` payload."""

    id: str | None = None
    cwd: str | None = None
    cli_version: str | None = None
    git: JsonObject | None = None


class CodexContext(_ForeignRecord):
    """A `turn_context` payload."""

    model: str | None = None


CODEX_PAYLOADS: dict[str, type[_ForeignRecord]] = {"session_meta": CodexMeta, "response_item": CodexItem,
                                            "event_msg": CodexEvent, "turn_context": CodexContext}


class CodexLine(_ForeignRecord):
    """One line of a Codex rollout (the payload is checked by its type)."""

    type: str | None = None


def check_claude(path: Path, records: Lines) -> Lines:
    """`records` (from read_lines) when each has the types its fields must have, else InputError."""
    for line, record in records:
        _check(path, line, record, ClaudeTurn if record.get("type") in ("user", "assistant") else ClaudeRecord)
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for n, block in enumerate(content if isinstance(content, list) else []):
            if isinstance(block, dict):
                _check(path, line, block, ClaudeBlock, f"message.content.{n}.")
    return records


def check_codex(path: Path, records: Lines) -> Lines:
    """`records` (from read_lines) when each line and its payload have their types, else InputError."""
    for line, record in records:
        _check(path, line, record, CodexLine)
        schema = CODEX_PAYLOADS.get(str(record.get("type")))
        payload = record.get("payload")
        if schema is CodexEvent and isinstance(payload, dict) and payload.get("type") == "token_count":
            schema = CodexTokenCount
        if schema is not None and isinstance(payload, dict):
            _check(path, line, payload, schema, "payload.")
    return records


def _check(path: Path, line: int, record: JsonObject, schema: type[_ForeignRecord], prefix: str = "") -> None:
    try:
        schema.model_validate(record)
    except ValidationError as exc:
        raise InputError(f"{path} line {line}: {problem(exc, prefix)}") from None


EXPECTED = {"string_type": "a string", "dict_type": "a dict", "model_type": "a dict", "model_attributes_type": "a dict",
            "list_type": "a list", "bool_type": "true or false", "int_type": "a whole number"}


def problem(exc: ValidationError, prefix: str = "") -> str:
    """The first error of a validation as words: the field, what it should be and what it holds."""
    error = exc.errors(include_url=False)[0]
    field = prefix + ".".join(str(part) for part in error["loc"])
    if error["type"] == "missing":
        return f"'{field}' is missing"
    if error["type"] == "greater_than_equal":
        return f"'{field}' is {kind(error['input'])}: a count is never negative"
    expected = EXPECTED.get(error["type"])
    if expected is None:
        return f"'{field}' is {kind(error['input'])}: {error['msg'][0].lower()}{error['msg'][1:]}"
    return f"'{field}' is not {expected} ({kind(error['input'])})"


def kind(value: Any) -> str:
    """What a JSON value is, in words ("a list", "the text '12'")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    return "a list" if isinstance(value, list) else "an object"
