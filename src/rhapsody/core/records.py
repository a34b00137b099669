"""The shape every known history record must have before anything folds it.

A history file is input like any other: it may have been edited by hand, by another tool
or by an attacker. `problem(record)` names the first field of the wrong type (or a message
the Messages API would refuse to carry) in one line, so the reader can refuse the file
naming the line instead of failing somewhere deep in a fold with a traceback. Kinds this
version does not know are left alone: they are folded by nobody.

Imports: stdlib only.
"""

from __future__ import annotations

import re
from typing import Any

_INT = (int,)
_STR = (str,)
_LIST = (list,)
_DICT = (dict,)
_NUMBER = (int, float)

COMMON: dict[str, tuple[type, ...]] = {"v": _INT, "seq": _INT, "ts": _NUMBER, "kind": _STR}
"""Fields every record carries (`ts` may be absent in hand-written fixtures)."""

FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "session": {"session": _STR, "model": _STR, "tools": _LIST},
    "message": {"role": _STR, "content": (list, str)},
    "hint": {"id": _STR, "text": _STR, "mode": _STR},
    "hint_delivered": {"ids": _LIST, "message_seq": _INT},
    "tool_run": {"tool_use_id": _STR, "name": _STR},
    "request": {"bytes": _INT, "est_tokens": _INT, "model": _STR},
    "usage": {"input_tokens": _INT, "cache_creation_input_tokens": _INT, "cache_read_input_tokens": _INT,
              "output_tokens": _INT},
    "model": {"model": _STR},
    "seam": {"seam": _INT, "boundary": _INT, "before": _DICT, "after": _DICT, "asked_est_tokens": _INT},
    "unseam": {"seam": _INT, "boundary": _INT},
    "prune": {"ids": _LIST},
    "thinking_cut": {"boundary": _INT},
    "compaction": {"boundary": _INT},
    "import": {"source": _STR, "format": _STR, "sha256": _STR},
    "aside": {"what": _STR},
}
"""Per kind, the fields rhapsody reads and the types they must have when present."""

REQUIRED: dict[str, tuple[str, ...]] = {
    "message": ("role", "content"), "hint": ("id", "text"), "hint_delivered": ("ids",), "model": ("model",),
    "seam": ("boundary",), "unseam": ("boundary",), "prune": ("ids",), "thinking_cut": ("boundary",),
    "compaction": ("boundary",), "import": ("source", "format", "sha256"), "aside": ("what",),
}
"""Fields a fold indexes directly, so they must be present."""

ROLES = ("user", "assistant")
SESSION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
"""What a session record's `session` may be: rhapsody names files after it (`notes/ID-seamN.md`,
`exports/ID.html`), so a history from a cloned repository or a download could otherwise name
`../../x` and have rhapsody write outside the project."""


def problem(record: dict[str, Any]) -> str | None:
    """What is wrong with a record's types, in a few words, or None when it can be folded."""
    kind = record.get("kind")
    for key in REQUIRED.get(str(kind), ()):
        if key not in record:
            return f"{kind} record without {key!r}"
    for key, types in {**COMMON, **FIELDS.get(str(kind), {})}.items():
        if key in record and not _is(record[key], types):
            return f"{kind} record: {key!r} is {_name(record[key])}, expected {' or '.join(t.__name__ for t in types)}"
    if kind == "message":
        return _message_problem(record)
    if kind == "session" and "session" in record and not SESSION_NAME.fullmatch(record["session"]):
        return f"session record: 'session' {record['session'][:40]!r} is not a session id"
    if kind in ("prune", "hint_delivered") and not all(isinstance(i, str) for i in record["ids"]):
        return f"{kind} record: 'ids' must be a list of strings"
    return None


def _message_problem(record: dict[str, Any]) -> str | None:
    if record["role"] not in ROLES:
        return f"message record: role {str(record['role'])[:20]!r} is not user or assistant"
    content = record["content"]
    if isinstance(content, str):
        return None
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return f"message record: content block {i} has no 'type'"
        wrong = _block_problem(block)
        if wrong:
            return f"message record: content block {i} ({block['type'][:20]}) {wrong}"
    return None


BLOCK_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "text": {"text": _STR},
    "thinking": {"thinking": _STR, "signature": _STR},
    "redacted_thinking": {"data": _STR},
    "tool_use": {"id": _STR, "name": _STR, "input": _DICT},
    "tool_result": {"tool_use_id": _STR, "content": (str, list)},
}


def _block_problem(block: dict[str, Any]) -> str | None:
    for key, types in BLOCK_FIELDS.get(block["type"], {}).items():
        if key not in block and key not in ("signature", "content", "input"):
            return f"lacks {key!r}"
        if key in block and not _is(block[key], types):
            return f"{key!r} is {_name(block[key])}"
    return None


def _is(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):  # bool is an int to Python, never to a history record
        return bool in types
    return isinstance(value, types)


def _name(value: Any) -> str:
    return "null" if value is None else type(value).__name__
