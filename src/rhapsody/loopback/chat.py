"""The loopback server's OpenAI chat-completions endpoint: `POST /v1/chat/completions`.

It plays the same scripted turns as the Messages API endpoint (text, thinking as
`reasoning_content`, tool_use as `tool_calls`) as OpenAI's streamed chunks, records every
request body, injects the same faults, and enforces the rules an OpenAI-compatible server
does: roles in order, every `tool_call_id` answered by a `tool` message right after the
assistant message that made the call, no sampling parameters (rhapsody never sends them).
With the server's `window` set, a longer prompt gets OpenAI's 400 `context_length_exceeded`.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from typing import Any

from rhapsody.loopback.dialect import Exchange, Fault, Server
from rhapsody.loopback.validate import IMAGE_TYPES, check_image
from rhapsody.loopback.validate import InvalidRequest as ApiInvalid
from rhapsody.core.json_types import JsonObject

PATH = "/chat/completions"
SAMPLING = ("temperature", "top_p", "top_k", "presence_penalty", "frequency_penalty")
ROLES = ("system", "developer", "user", "assistant", "tool")
STATUS_TYPES = {429: "rate_limit_exceeded", 500: "server_error", 529: "server_error"}


class InvalidChat(Exception):
    """A request an OpenAI-compatible server answers with 400."""


def chat_bodies(server: Server) -> list[dict[str, Any]]:
    """The chat-completions request bodies that were answered 200."""
    return [r.body for r in server.requests if r.status == 200 and r.path.endswith(PATH)]


def serve(handler: Exchange, raw: bytes, body: Any) -> None:
    """Answer one chat-completions request: validate, inject a fault or stream the next turn."""
    lb = handler.loopback
    try:
        validate(body)
    except InvalidChat as exc:
        return _error(handler, 400, "invalid_request_error", str(exc), raw, body)
    if lb.window is not None:
        tokens = prompt_tokens(body)
        if tokens > lb.window:  # OpenAI's words and code for it
            return _error(handler, 400, "invalid_request_error", f"This model's maximum context length is {lb.window} "
                          f"tokens. However, your messages resulted in {tokens} tokens.", raw, body,
                          code="context_length_exceeded")
    fault = lb.take_fault()
    if fault and fault.kind == "status":
        return _error(handler, fault.status, STATUS_TYPES.get(fault.status, "server_error"), "injected fault",
                      raw, body, fault.headers())
    if fault and fault.kind == "slow":
        time.sleep(fault.seconds)
    turn = lb.responder(body) if not fault or fault.kind == "slow" else _lost_turn()
    handler._record(200, raw, body)
    try:
        _stream(handler, body, turn, fault if fault and fault.kind != "slow" else None)
    except (BrokenPipeError, ConnectionResetError):
        handler.close_connection = True


def validate(body: Any) -> None:
    """Raise InvalidChat when an OpenAI-compatible server would reject `body`."""
    if not isinstance(body, dict):
        raise InvalidChat("request body must be a JSON object")
    for key in ("model", "messages"):
        if key not in body:
            raise InvalidChat(f"'{key}' is a required property")
    for key in SAMPLING:
        if key in body:
            raise InvalidChat(f"{key}: rhapsody never sends sampling parameters")
    names = [t.get("function", {}).get("name") for t in body.get("tools", [])]
    if len(set(names)) != len(names):
        raise InvalidChat("tools: function names must be unique")
    _check_messages(body["messages"])


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise InvalidChat("messages: at least one message is required")
    open_calls: list[str] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            raise InvalidChat(f"messages[{i}].role: must be one of {', '.join(ROLES)}")
        if role in ("system", "developer") and i:
            raise InvalidChat(f"messages[{i}]: a system message must come first")
        if role == "tool":
            _check_tool(message, i, open_calls)
            continue
        if open_calls:
            raise InvalidChat(f"messages[{i}]: an assistant message with 'tool_calls' must be followed by tool messages "
                          f"responding to each 'tool_call_id'. Missing: {open_calls[0]}")
        _check_content(message, i)
        if role == "assistant":
            open_calls = [c["id"] for c in message.get("tool_calls") or []]
    if open_calls:
        raise InvalidChat(f"messages: tool_call_id {open_calls[0]} has no tool message")
    if messages[-1]["role"] not in ("user", "tool"):
        raise InvalidChat("messages: the last message must be a user or tool message")


def _check_tool(message: JsonObject, i: int, open_calls: list[str]) -> None:
    call_id = message.get("tool_call_id")
    if call_id not in open_calls:
        raise InvalidChat(f"messages[{i}]: 'tool' message with tool_call_id {call_id} does not answer a tool call "
                      "of the assistant message before it")
    open_calls.remove(call_id)
    if not isinstance(message.get("content"), str):
        raise InvalidChat(f"messages[{i}].content: a tool message's content must be a string")


def _check_content(message: JsonObject, i: int) -> None:
    content = message.get("content")
    if message["role"] == "assistant" and content is None and message.get("tool_calls"):
        return
    if message["role"] == "user" and isinstance(content, list) and content:
        for j, part in enumerate(content):
            _check_part(part, f"messages[{i}].content[{j}]")
        return
    if not isinstance(content, str) or not content:
        raise InvalidChat(f"messages[{i}].content: must be a non-empty string")


def _check_part(part: Any, where: str) -> None:
    """A user content part: text, or an image as a data URL of a supported type whose bytes are that type."""
    if not isinstance(part, dict) or part.get("type") not in ("text", "image_url"):
        raise InvalidChat(f"{where}: a content part is text or image_url")
    if part["type"] == "text":
        if not isinstance(part.get("text"), str) or not part["text"]:
            raise InvalidChat(f"{where}.text: must be a non-empty string")
        return
    url = str((part.get("image_url") or {}).get("url", ""))
    head, _, data = url.partition(";base64,")
    kind = head.removeprefix("data:")
    if not head.startswith("data:") or kind not in IMAGE_TYPES:
        raise InvalidChat(f"{where}.image_url.url: expected a data URL of {', '.join(IMAGE_TYPES)}")
    try:
        check_image({"type": "image", "source": {"type": "base64", "media_type": kind, "data": data}}, where)
    except ApiInvalid as exc:
        raise InvalidChat(str(exc)) from None


def _error(handler: Exchange, status: int, kind: str, message: str, raw: bytes, body: Any,
           headers: dict[str, str] | None = None, code: str | None = None) -> None:
    handler._json(status, {"error": {"message": message, "type": kind, "code": code}}, raw, body, headers)


def prompt_tokens(body: JsonObject) -> int:
    """The request's prompt tokens as the usage figures count them."""
    return sum(_tokens(json.dumps(part, sort_keys=True)) for part in [body.get("tools", []), *body["messages"]])


def _lost_turn() -> JsonObject:
    return {"content": [{"type": "text", "text": "This partial answer is lost to an injected fault and must not be kept."}]}


def _stream(handler: Exchange, body: dict[str, Any], turn: dict[str, Any], fault: Fault | None) -> None:
    chunks = list(_chunks(handler.loopback, body, turn))
    handler._open_event_stream(fault)
    for n, chunk in enumerate([*chunks, None]):
        if fault and n == fault.after_events:
            if fault.kind == "sse_error":
                _send(handler, {"error": {"message": "Overloaded", "type": "server_error", "code": None}})
            handler.wfile.flush()
            handler.close_connection = True
            return
        handler.wfile.write(b"data: [DONE]\n\n" if chunk is None else f"data: {json.dumps(chunk)}\n\n".encode())
        handler.wfile.flush()
        if turn.get("delay"):
            time.sleep(turn["delay"])


def _send(handler: Exchange, data: dict[str, Any]) -> None:
    handler.wfile.write(f"data: {json.dumps(data)}\n\n".encode())


def _chunks(lb: Server, body: dict[str, Any], turn: dict[str, Any]) -> Any:
    """The chunks of one streamed answer: role, content, tool calls, finish, then usage."""
    cid, model = lb.next_id("chatcmpl"), body["model"]

    def chunk(delta: JsonObject, finish: str | None = None) -> JsonObject:
        return {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    calls = 0
    for block in turn.get("content", []):
        if block["type"] == "thinking":
            yield chunk({"reasoning_content": block["thinking"]})
        elif block["type"] == "text":
            for start in range(0, len(block["text"]), 40):
                yield chunk({"content": block["text"][start:start + 40]})
        elif block["type"] == "tool_use":
            yield from _call_chunks(chunk, calls, block, lb.next_id("call"))
            calls += 1
    yield chunk({}, turn.get("finish_reason") or ("tool_calls" if calls else "stop"))
    if (body.get("stream_options") or {}).get("include_usage"):
        yield {**chunk({}), "choices": [], "usage": _usage(lb, body, turn)}


def _call_chunks(chunk: Any, index: int, block: JsonObject, call_id: str) -> Any:
    raw = block.get("raw_input")
    payload = raw if raw is not None else json.dumps(block.get("input", {}))
    opening = {"index": index, "id": block.get("id", call_id), "type": "function",
               "function": {"name": block["name"], "arguments": ""}}
    yield chunk({"tool_calls": [opening]})
    for cut in range(0, len(payload), 50):
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": payload[cut:cut + 50]}}]})


def _usage(lb: Server, body: dict[str, Any], turn: dict[str, Any]) -> dict[str, Any]:
    """Token figures with automatic prefix caching, as OpenAI-style servers report it."""
    prompt, cached, running = 0, 0, "chat"
    for part in [body.get("tools", []), *body["messages"]]:
        text = json.dumps(part, sort_keys=True)
        running = hashlib.sha256((running + text).encode()).hexdigest()
        prompt += _tokens(text)
        with lb._lock:
            if running in lb._cache:
                cached = prompt
            lb._cache.add(running)
    completion = _tokens(json.dumps(turn.get("content", [])))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))
