"""What a parser reads out of another agent's session file, before it becomes rhapsody records.

A parser turns one source file into a `Source`: the main conversation as `ImportedTurn`s in order
(content already in the Messages API's block shapes), with `Aside`s (what the source kept
outside its model's context), `Compacted` marks and `Queued` human messages between them.
`read_lines` gives each parser the same strict reading: a line that is not a JSON object is
an InputError naming the file and the line, because a half-read transcript imported as if
whole would resume a conversation that never happened.

Imports: stdlib and rhapsody.core.errors only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rhapsody.core.errors import InputError
from rhapsody.core.session.messages import MAX_NESTING, nested_within
from rhapsody.core.json_types import JsonObject

LINE_NESTING = 2 * MAX_NESTING
"""How deep one transcript line may nest: a tool call's arguments may nest MAX_NESTING deep, below the record's own levels."""


@dataclass
class ImportedTurn:
    """One message of the main conversation, and the request that produced it (assistant)."""

    role: str
    content: list[JsonObject]
    ts: float
    usages: list[JsonObject] = field(default_factory=list)
    """One per API request whose answer is in this message: the source's usage, `model`,
    `stop_reason` and `ts` (several when merged messages came from several requests)."""
    flags: JsonObject = field(default_factory=dict)
    """Source marks kept on the message record (`compact_summary`, `meta`, `source_id`)."""
    line: int = 0
    """The source line it starts on, for errors."""


@dataclass
class Aside:
    """A source record kept in the history but outside the model's context (`what` says which)."""

    what: str
    ts: float
    data: JsonObject


@dataclass
class Compacted:
    """The source compacted its context here: what came before left the model's view."""

    ts: float
    data: JsonObject


@dataclass
class Queued:
    """A message the human queued while the agent worked (delivered where its text next appears)."""

    ts: float
    text: str


Item = ImportedTurn | Aside | Compacted | Queued


@dataclass
class Source:
    """One source session, read whole."""

    format: str
    path: Path
    session_id: str
    sha256: str
    lines: int
    items: list[Item]
    cwd: str = ""
    model: str = ""
    context_window: int | None = None
    extra: JsonObject = field(default_factory=dict)
    """Provenance worth keeping (git branch, source version, subagent files)."""


def read_lines(path: Path, data: bytes) -> Iterator[tuple[int, JsonObject]]:
    """(line number from 1, object) for every non-blank line; InputError for any other line."""
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except RecursionError:  # nested deeper than the parser goes: the line, not an internal error
            raise InputError(f"{path} line {number}: nested too deeply to read") from None
        except (ValueError, UnicodeDecodeError):
            torn = " (a partial last line: is the session still being written?)" if number == len(lines) else ""
            raise InputError(f"{path} line {number}: not a JSON object{torn}") from None
        if not isinstance(value, dict):
            raise InputError(f"{path} line {number}: not a JSON object")
        if not nested_within(value, LINE_NESTING):  # every later reader and writer would walk it, and fail
            raise InputError(f"{path} line {number}: nested deeper than {LINE_NESTING} levels")
        yield number, value


def digest(data: bytes) -> str:
    """The content hash that identifies a source file across imports."""
    return hashlib.sha256(data).hexdigest()


def timestamp(value: Any, fallback: float) -> float:
    """Unix seconds of an ISO 8601 stamp (`2025-10-29T00:59:38.317Z`); `fallback` when absent or unreadable."""
    if not isinstance(value, str):
        return fallback
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return fallback


def text_block(text: str) -> list[JsonObject]:
    """A text block, or nothing for text the API would refuse (empty or only whitespace)."""
    return [{"type": "text", "text": text}] if text.strip() else []


def expect(path: Path, line: int, value: Any, kind: type, what: str) -> Any:
    """`value` when it has the type, else InputError naming the file, the line and the field."""
    if not isinstance(value, kind):
        raise InputError(f"{path} line {line}: {what} is not a {'string' if kind is str else kind.__name__}")
    return value


def as_dict(value: Any) -> JsonObject:
    """`value` when it is an object, else an empty one (for optional metadata)."""
    return value if isinstance(value, dict) else {}
