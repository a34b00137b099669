"""The Messages API's request rules, as the loopback server enforces them.

A request that breaks a rule gets the 400 the API would give, so a bug in the strip or
the loop fails loudly in tests. Thinking signatures are HMACs over everything before the
block (system, tools, earlier messages, earlier blocks), with cache_control ignored, so
editing anything before a replayed thinking block is caught as the newest models catch it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import Any
from rhapsody.core.json_types import JsonObject

SECRET = b"rhapsody-loopback"
SAMPLING = ("temperature", "top_p", "top_k")


class InvalidRequest(Exception):
    """A request the API would answer with 400 invalid_request_error."""


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _blocks(content: Any) -> list[JsonObject]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def signature(body: JsonObject, messages: list[Any], blocks_before: list[Any], thinking: str) -> str:
    """The signature the server gives a thinking block generated after this prefix."""
    prefix = {
        "system": _plain(body.get("system")),
        "tools": _plain(body.get("tools", [])),
        "messages": _plain([{"role": m["role"], "content": _blocks(m["content"])} for m in messages]),
        "before": _plain(blocks_before),
        "thinking": thinking,
    }
    data = json.dumps(prefix, sort_keys=True, ensure_ascii=False).encode()
    return hmac.new(SECRET, data, hashlib.sha256).hexdigest()


def validate(body: Any) -> None:
    """Raise InvalidRequest with the API's kind of message when `body` would be rejected."""
    if not isinstance(body, dict):
        raise InvalidRequest("request body must be a JSON object")
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            raise InvalidRequest(f"{key}: Field required")
    for key in SAMPLING:
        if key in body:
            raise InvalidRequest(f"{key}: sampling parameters are not supported for this model")
    choice = body.get("tool_choice") or {}
    if choice.get("type") in ("any", "tool"):
        raise InvalidRequest("tool_choice: forced tool use is not supported for this model")
    names = [t.get("name") for t in body.get("tools", [])]
    if len(set(names)) != len(names):
        raise InvalidRequest("tools: tool names must be unique")
    _check_messages(body)


def _check_messages(body: JsonObject) -> None:
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("messages: at least one message is required")
    if messages[0].get("role") != "user":
        raise InvalidRequest("messages: first message must use the \"user\" role")
    if messages[-1].get("role") != "user":
        raise InvalidRequest("This model does not support assistant message prefill. The conversation must end with a user message.")
    for i, message in enumerate(messages):
        if message.get("role") not in ("user", "assistant"):
            raise InvalidRequest(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        if i and message["role"] == messages[i - 1]["role"]:
            raise InvalidRequest(f"messages.{i}: roles must alternate between \"user\" and \"assistant\"")
        blocks = _blocks(message.get("content"))
        if not blocks:
            raise InvalidRequest(f"messages.{i}: all messages must have non-empty content")
        for j, block in enumerate(blocks):
            if block.get("type") == "text" and not block.get("text"):
                raise InvalidRequest(f"messages.{i}.content.{j}: text content blocks must be non-empty")
            if block.get("type") == "image":
                check_image(block, f"messages.{i}.content.{j}")
        _check_pairing(messages, i, blocks)
        if message["role"] == "assistant":
            _check_thinking(body, messages, i, blocks)


IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAGIC = {"image/png": (b"\x89PNG",), "image/jpeg": (b"\xff\xd8\xff",), "image/gif": (b"GIF87a", b"GIF89a"),
         "image/webp": (b"RIFF",)}


def check_image(block: JsonObject, where: str) -> None:
    """An image block as the API takes it: a base64 source of a supported type whose bytes are that type."""
    source = block.get("source")
    if set(block) - {"type", "source", "cache_control"} or not isinstance(source, dict):
        raise InvalidRequest(f"{where}: an image block has exactly 'type' and 'source'")
    if source.get("type") != "base64" or set(source) != {"type", "media_type", "data"}:
        raise InvalidRequest(f"{where}.source: Input tag {source.get('type')!r} found using 'type' does not match any of the "
                      "expected tags: 'base64', 'url', 'file'")
    kind = source.get("media_type")
    if kind not in IMAGE_TYPES:
        raise InvalidRequest(f"{where}.source.media_type: Input should be {', '.join(IMAGE_TYPES)}")
    try:
        data = base64.b64decode(str(source.get("data")), validate=True)
    except ValueError:
        raise InvalidRequest(f"{where}.source.data: not valid base64") from None
    if not data.startswith(MAGIC[kind]):
        raise InvalidRequest(f"{where}: Image does not match the provided media type {kind}")


def _check_pairing(messages: list[Any], i: int, blocks: list[Any]) -> None:
    if messages[i]["role"] == "assistant":
        ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
        if not ids:
            return
        after = _blocks(messages[i + 1]["content"]) if i + 1 < len(messages) else []
        leading = []
        for block in after:
            if block.get("type") != "tool_result":
                break
            leading.append(block.get("tool_use_id"))
        missing = [x for x in ids if x not in leading]
        if missing:
            raise InvalidRequest(
                f"messages.{i + 1}.content.0: tool_use ids were found without tool_result blocks immediately after: {missing[0]}. "
                "Each tool_use block must have a corresponding tool_result block in the next message."
            )
        return
    previous = _blocks(messages[i - 1]["content"]) if i else []
    called = {b.get("id") for b in previous if b.get("type") == "tool_use"}
    for j, block in enumerate(blocks):
        if block.get("type") == "tool_result" and block.get("tool_use_id") not in called:
            raise InvalidRequest(
                f"messages.{i}.content.{j}: unexpected tool_use_id found in tool_result blocks: {block.get('tool_use_id')}. "
                "Each tool_result block must have a corresponding tool_use block in the previous message."
            )


def _check_thinking(body: JsonObject, messages: list[Any], i: int, blocks: list[Any]) -> None:
    for j, block in enumerate(blocks):
        if block.get("type") != "thinking":
            continue
        expected = signature(body, messages[:i], blocks[:j], block.get("thinking", ""))
        if not hmac.compare_digest(expected, str(block.get("signature", ""))):
            raise InvalidRequest(
                f"messages.{i}.content.{j}: Invalid 'signature' in 'thinking' block. "
                "The block is bound to a different conversation: something before it changed."
            )
