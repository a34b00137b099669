"""Assemble a streamed Messages API answer into one assistant message, in linear time.

The SDK's own `MessageStream` appends every delta to an attribute of a pydantic model
(`content.text += delta`, a copy of the whole text per delta) and re-parses the whole
tool-argument JSON after every `input_json_delta`; both make a large reply cost time
quadratic in its size. Here every block keeps a list of pieces joined once at the end,
and tool arguments are parsed once, at `content_block_stop`.

It also decides what a hostile or broken server can do to a reply: an event of the wrong
shape raises `MalformedStream` (retried like a torn connection), tool arguments that are
not a JSON object, or hold a lone surrogate, become `{"_unparsed": raw, "_invalid": why}`
(the toolbox answers them with an error result, and the raw text stays on record), and
lone surrogates in text are replaced by U+FFFD so no writer or request body chokes on them.

Events are read by attribute (duck-typed), so this module does not import the SDK.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from rhapsody.core.pricing import WRITE_1H_KEY
from rhapsody.core.session.session_figures import USAGE_KEYS
from rhapsody.core.events import BlockStopped, TextDelta, ThinkingDelta
from rhapsody.core.session.messages import INVALID_KEY, MAX_NESTING, UNPARSED_KEY, Message, nested_within
from rhapsody.core.agent.retry import encodable, valid_text
from rhapsody.core.json_types import JsonObject

PIECE_KEYS = {"text_delta": ("text", "text"), "thinking_delta": ("thinking", "thinking"),
              "input_json_delta": ("partial_json", "input")}


class MalformedStream(Exception):
    """The server sent something that is not a well-formed Messages API stream."""


@dataclass
class _Part:
    block: JsonObject
    pieces: list[str] = field(default_factory=list)


@dataclass
class Assembly:
    """One assistant message under construction from raw stream events."""

    parts: dict[int, _Part] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    stop_reason: str | None = None
    started: bool = False
    stopped: bool = False

    def feed(self, event: Any) -> TextDelta | ThinkingDelta | BlockStopped | None:
        """Take one raw event; returns the event front ends see for it, if any."""
        kind = getattr(event, "type", None)
        try:
            return self._feed(kind, event)
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise MalformedStream(f"malformed {kind!s:.40} event: {type(exc).__name__}: {exc}"[:300]) from None

    def _feed(self, kind: Any, event: Any) -> TextDelta | ThinkingDelta | BlockStopped | None:
        if kind == "message_start":
            self.started = True
            self._usage(event.message.usage)
        elif not self.started:
            raise MalformedStream(f"the stream sent {kind!s:.40} before message_start")
        elif kind == "content_block_start":
            self.parts[int(event.index)] = _Part(_dump(event.content_block))
        elif kind == "content_block_delta":
            return self._delta(self.parts[int(event.index)], event.delta)
        elif kind == "content_block_stop":
            return BlockStopped(str(self._finish(self.parts[int(event.index)]).get("type")))
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason
            self._usage(event.usage)
        elif kind == "message_stop":
            self.stopped = True
        return None

    def _delta(self, part: _Part, delta: Any) -> TextDelta | ThinkingDelta | None:
        kind = delta.type
        if kind == "signature_delta":
            part.block["signature"] = str(delta.signature)
            return None
        if kind not in PIECE_KEYS:
            return None  # citations and newer delta kinds: nothing to assemble
        piece = getattr(delta, PIECE_KEYS[kind][0])
        if not isinstance(piece, str):
            raise TypeError(f"{kind} carries {type(piece).__name__}, not text")
        if kind != "input_json_delta":
            piece = valid_text(piece)  # arguments are checked whole, once, in tool_input
        part.pieces.append(piece)
        if kind == "text_delta":
            return TextDelta(piece)
        return ThinkingDelta(piece) if kind == "thinking_delta" else None

    def _finish(self, part: _Part) -> JsonObject:
        block = part.block
        kind = block.get("type")
        if kind in ("text", "thinking"):
            block[kind] = block.get(kind, "") + "".join(part.pieces)
        elif kind == "tool_use":
            block["input"] = tool_input("".join(part.pieces), block.get("input"))
        part.pieces = []
        return block

    def _usage(self, usage: Any) -> None:
        for key in USAGE_KEYS:
            value = getattr(usage, key, None)
            if value is not None:
                self.usage[key] = int(value)
        hour = getattr(getattr(usage, "cache_creation", None), "ephemeral_1h_input_tokens", None)
        if isinstance(hour, int) and hour > 0:  # 1-hour writes bill at 2x, not 1.25x
            self.usage[WRITE_1H_KEY] = hour

    def message(self) -> Message:
        """The assembled message; raises MalformedStream when the stream was incomplete."""
        if not self.started:
            raise MalformedStream("the stream ended before message_start")
        if not self.stopped or self.stop_reason is None:
            raise MalformedStream("the stream ended before message_stop")
        content = [self._finish(p) if p.pieces else p.block for _, p in sorted(self.parts.items())]
        try:
            return Message.model_validate({"role": "assistant", "content": content})
        except ValueError as exc:
            raise MalformedStream(f"the streamed message is malformed: {str(exc).splitlines()[0]}") from None


def _dump(block: Any) -> JsonObject:
    data = block.model_dump(mode="json", exclude_none=True) if hasattr(block, "model_dump") else dict(block)
    if not isinstance(data.get("type"), str):
        raise TypeError("content block without a type")
    return {k: valid_text(v) if isinstance(v, str) else v for k, v in data.items()}


def tool_input(raw: str, opening: Any) -> JsonObject:
    """Tool arguments from their streamed JSON text; invalid ones keep the raw text and the reason."""
    if not raw.strip():
        return opening if isinstance(opening, dict) else {}
    kept = raw if encodable(raw) else raw.encode("utf-8", "backslashreplace").decode("utf-8")
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return {UNPARSED_KEY: kept, INVALID_KEY: f"not valid JSON ({exc})"}
    except RecursionError:  # deeper than the parser goes: deeper than any tool takes
        return {UNPARSED_KEY: kept, INVALID_KEY: f"nested deeper than {MAX_NESTING} levels"}
    if not nested_within(value):
        return {UNPARSED_KEY: kept, INVALID_KEY: f"nested deeper than {MAX_NESTING} levels"}
    if not isinstance(value, dict):
        return {UNPARSED_KEY: kept, INVALID_KEY: f"a JSON {type(value).__name__}, not an object"}
    if not encodable(json.dumps(value, ensure_ascii=False)):
        return {UNPARSED_KEY: kept, INVALID_KEY: "a string holds a lone surrogate (U+D800-U+DFFF), not valid Unicode"}
    return value
