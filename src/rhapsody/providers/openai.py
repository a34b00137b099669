"""The model provider for OpenAI-compatible chat-completions endpoints.

The only module that imports `openai`. It serves Ollama, vLLM, the llama.cpp server, LM
Studio, OpenRouter and OpenAI itself through the SDK's own variables (`OPENAI_BASE_URL`,
`OPENAI_API_KEY`). The loop keeps speaking the Messages API: each request body is turned
into chat messages here (tool results become `tool` messages, the hints and text that
follow them one user message after them, thinking is dropped), and the streamed content
and `tool_calls` deltas come back as rhapsody's events and one assistant message in
Messages API blocks, so narration, hints, history and seams work unchanged.

Retries are `core.agent.retry`'s, as for providers/anthropic.py: the SDK's are off, every retry is
announced as a `Retrying` event and counted down, and a partial answer is never returned.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import openai

from rhapsody.core.errors import ContextTooLong, ModelError
from rhapsody.core.events import BlockStopped, ModelResponse, TextDelta, ThinkingDelta
from rhapsody.core.session.messages import Message, nested_within
from rhapsody.core.model import ModelEvent
from rhapsody.core.agent.retry import (RETRY_STATUSES, RetryPolicy, Sleep, connection_failed, error_message,
                                 retry_after_seconds, retrying)
from rhapsody.core.json_types import JsonObject
from rhapsody.providers.plain_http import plain_http, untrusting

STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "function_call": "tool_use", "length": "max_tokens",
                "content_filter": "refusal"}
NO_KEY = "not-needed"  # local servers ignore the key, but the SDK wants one


class StreamCut(Exception):
    """The stream ended without a finish_reason."""


class OpenAIModel:
    """Streams requests to a chat-completions endpoint and retries what is meant to be retried."""

    def __init__(self, client: openai.AsyncOpenAI | None = None, *, retries: int = 4, base_delay: float = 0.5,
                 timeout: float = 600.0, sleep: Sleep = asyncio.sleep) -> None:
        local = plain_http(os.environ.get("OPENAI_BASE_URL"))  # no CA bundle for it (providers/plain_http.py)
        self.client = client or openai.AsyncOpenAI(
            api_key=os.environ.get("OPENAI_API_KEY") or NO_KEY, max_retries=0, timeout=timeout,
            http_client=openai.DefaultAsyncHttpxClient(verify=untrusting()) if local else None)
        self.retries = retries
        self.base_delay = base_delay
        self.sleep = sleep
        """How the wait before a retry passes (a test drives it by hand)."""

    async def stream(self, body: JsonObject) -> AsyncIterator[ModelEvent]:
        """Stream one request, retrying transient failures; ends with a ModelResponse."""
        policy = RetryPolicy(self.retries, self.base_delay, who="the server", sleep=self.sleep)
        async for event in retrying(self._once, body, _classify, policy):
            yield event

    async def count_tokens(self, body: JsonObject) -> int:
        """Chat-completions servers have no token-count endpoint; --exact-tokens records this and goes on."""
        raise ModelError("count_tokens is not available on the openai provider")

    async def _once(self, body: JsonObject) -> AsyncIterator[ModelEvent]:
        turn = _Turn()
        stream = await self.client.chat.completions.create(**chat_request(body))
        async with stream:
            async for chunk in stream:
                for event in turn.feed(chunk):
                    yield event
        for event in turn.close():
            yield event
        if turn.finish is None:
            raise StreamCut("the stream ended without a finish_reason")
        yield turn.response()


def chat_request(body: JsonObject) -> dict[str, Any]:  # the SDK picks its streaming overload from this
    """A Messages API request body as chat-completions parameters (streaming, usage included)."""
    messages: list[JsonObject] = []
    system = _text_of(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for message in body["messages"]:
        messages += chat_messages(message)
    params: JsonObject = {"model": body["model"], "messages": messages, "stream": True,
                              "stream_options": {"include_usage": True}}
    if body.get("tools"):
        params["tools"] = [{"type": "function", "function": {
            "name": t["name"], "description": t.get("description", ""), "parameters": t["input_schema"]}}
            for t in body["tools"]]
        choice = body.get("tool_choice") or {}
        params["parallel_tool_calls"] = not choice.get("disable_parallel_tool_use", False)
    return params


def chat_messages(message: JsonObject) -> list[JsonObject]:
    """One Messages API message as chat messages: tool results first, as `tool` messages."""
    content = message["content"]
    if isinstance(content, str):
        return [{"role": message["role"], "content": content}]
    if message["role"] == "assistant":
        return _assistant(content)
    out: list[JsonObject] = [
        {"role": "tool", "tool_call_id": b["tool_use_id"], "content": _result_text(b)}
        for b in content if b.get("type") == "tool_result"
    ]
    texts = [b["text"] for b in content if b.get("type") == "text"]
    images = [_image_part(b) for b in content if b.get("type") == "image" and b.get("source", {}).get("type") == "base64"]
    if images:
        out.append({"role": "user", "content": [{"type": "text", "text": t} for t in texts] + images})
    elif texts:
        out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _image_part(block: JsonObject) -> JsonObject:
    """An image block as a chat content part: a data URL."""
    source = block["source"]
    return {"type": "image_url", "image_url": {"url": f"data:{source['media_type']};base64,{source['data']}"}}


def _assistant(blocks: list[JsonObject]) -> list[JsonObject]:
    texts = [b["text"] for b in blocks if b.get("type") == "text"]
    calls = [{"id": b["id"], "type": "function",
              "function": {"name": b["name"], "arguments": json.dumps(b.get("input", {}), ensure_ascii=False)}}
             for b in blocks if b.get("type") == "tool_use"]
    if not texts and not calls:
        return []  # only thinking, which chat endpoints do not take back
    message: JsonObject = {"role": "assistant", "content": "\n\n".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    return [message]


def _result_text(block: JsonObject) -> str:
    content = block.get("content")
    if isinstance(content, str):
        text = content
    else:
        parts = []
        for item in content or []:
            if item.get("type") == "text":
                parts.append(item["text"])
            elif item.get("type") == "image":
                parts.append(f"[{item.get('source', {}).get('media_type', 'image')} image: not sent to this provider]")
        text = "\n".join(parts)
    return f"Error: {text}" if block.get("is_error") and not text.startswith("Error") else text or "(no output)"


def _text_of(system: Any) -> str:
    if isinstance(system, str):
        return system
    return "\n\n".join(b.get("text", "") for b in system or [] if b.get("type") == "text")


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Turn:
    """Accumulates one streamed answer."""

    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    in_text: bool = False

    def feed(self, chunk: Any) -> list[ModelEvent]:
        """Events for one chunk."""
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        events: list[ModelEvent] = []
        for choice in chunk.choices[:1]:
            delta = choice.delta
            thought = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
            if isinstance(thought, str) and thought:
                self.reasoning.append(thought)
            if delta.content:
                events += self._thought_done()
                self.in_text = True
                self.text.append(delta.content)
                events.append(TextDelta(delta.content))
            for call in delta.tool_calls or []:
                events += self._text_done()
                self._add_call(call)
            if choice.finish_reason:
                self.finish = choice.finish_reason
        return events

    def close(self) -> list[ModelEvent]:
        """Events that end the blocks still open."""
        events = self._thought_done() + self._text_done()
        return events + [BlockStopped("tool_use") for _ in self.calls]

    def response(self) -> ModelResponse:
        """The complete assistant message in Messages API blocks."""
        content: list[JsonObject] = []
        text = "".join(self.text)
        if text.strip():
            content.append({"type": "text", "text": text})
        for index in sorted(self.calls):
            call = self.calls[index]
            content.append({"type": "tool_use", "id": call.id or f"call_{uuid.uuid4().hex[:24]}", "name": call.name,
                            "input": _arguments("".join(call.arguments))})
        stop = STOP_REASONS.get(self.finish or "", self.finish)
        if self.calls:
            stop = "tool_use"
        return ModelResponse(Message.from_api({"role": "assistant", "content": content}), stop, self.usage)

    def _add_call(self, delta: Any) -> None:
        index = getattr(delta, "index", None)
        if not isinstance(index, int):  # servers that omit the index: a new id starts a new call
            last = max(self.calls, default=-1)
            index = last if last >= 0 and (not delta.id or self.calls[last].id == delta.id) else last + 1
        call = self.calls.setdefault(index, _Call())
        call.id = call.id or (delta.id or "")
        if delta.function is not None:
            if delta.function.name and not call.name:  # some servers repeat the name in every delta
                call.name = delta.function.name
            call.arguments.append(delta.function.arguments or "")

    def _text_done(self) -> list[ModelEvent]:
        if not self.in_text:
            return []
        self.in_text = False
        return [BlockStopped("text")]

    def _thought_done(self) -> list[ModelEvent]:
        if not self.reasoning:
            return []
        thought, self.reasoning = "".join(self.reasoning), []
        return [ThinkingDelta(thought), BlockStopped("thinking")]


def _arguments(raw: str) -> Any:
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {"_unparsed": raw}
    return value if isinstance(value, dict) and nested_within(value) else {"_unparsed": raw}


def _usage(usage: Any) -> dict[str, int]:
    """Chat usage in the Messages API's keys: cached prompt tokens are cache reads."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0)
    prompt = int(usage.prompt_tokens or 0)
    return {"input_tokens": max(0, prompt - cached), "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": cached, "output_tokens": int(usage.completion_tokens or 0)}


def _classify(exc: Exception) -> tuple[str, float | None]:
    """(reason, retry-after seconds) for a retryable failure; raises ModelError otherwise."""
    if isinstance(exc, StreamCut):
        return str(exc), None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status in RETRY_STATUSES or status >= 500:
            return f"{status} {_detail(exc)}".strip(), _retry_after(exc)
        if status == 400 and (exc.code == "context_length_exceeded" or "maximum context length" in _detail(exc)):
            # OpenAI's code; vLLM-style servers say it only in words
            raise ContextTooLong(f"the server refused the request for length (400): {_detail(exc)}") from None
        raise ModelError(_fatal_message(status, exc)) from None
    if isinstance(exc, openai.APIConnectionError):
        return connection_failed(exc), None
    if isinstance(exc, openai.APIError):  # an error event in the middle of the stream
        return f"stream error: {exc.message}", None
    # Anything else is an answer this adapter cannot read (a server that ignored stream=True,
    # a malformed chunk): one line for the human, not a traceback, and no retry.
    raise ModelError(f"unreadable answer from the server: {type(exc).__name__}: {exc}") from None


def _detail(exc: openai.APIStatusError) -> str:
    return error_message(exc.body)


def _fatal_message(status: int, exc: openai.APIStatusError) -> str:
    detail = _detail(exc)
    if status == 401:
        return "the server rejected the key (401): check OPENAI_API_KEY"
    if status == 404:
        return f"the server has no such model or endpoint (404): {detail}; check --model and OPENAI_BASE_URL"
    return f"the server rejected the request ({status}): {detail}"


def _retry_after(exc: openai.APIStatusError) -> float | None:
    return retry_after_seconds(exc.response)
