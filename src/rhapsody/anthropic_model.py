"""The model provider on `anthropic.AsyncAnthropic`: streaming, retries, usage.

The only module that imports `anthropic`. The SDK's own retries are off (max_retries=0)
because it cannot retry a stream once the 200 has arrived: an `error` event mid-stream,
a torn connection and a stream that ends before `message_stop` all surface only here.
Every retry is done in one place, announced as a `Retrying` event (the front end drops
the partial text), and the partial message is never returned, so no tool runs twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2

from rhapsody.core.errors import ModelError
from rhapsody.core.events import BlockStopped, ModelResponse, Retrying, TextDelta, ThinkingDelta
from rhapsody.core.messages import Message
from rhapsody.core.model import ModelEvent

RETRY_STATUSES = {408, 409, 429}
MAX_DELAY = 8.0


class StreamCut(Exception):
    """The stream ended before `message_stop` without an error."""


def default_model() -> str:
    """The newest Sonnet id the installed SDK lists (the SDK lists newest first)."""
    from typing import get_args

    from anthropic.types.model_param import ModelParam

    literal = get_args(ModelParam)[0]
    return str(next(m for m in get_args(literal) if "sonnet" in m))


AnyClient = anthropic.AsyncAnthropic | anthropic.AsyncAnthropicBedrock | anthropic.AsyncAnthropicVertex


def bedrock_client(region: str, timeout: float, **extra: Any) -> anthropic.AsyncAnthropicBedrock:
    """A client for Claude on Amazon Bedrock; credentials come from the AWS chain (or AWS_BEARER_TOKEN_BEDROCK)."""
    return anthropic.AsyncAnthropicBedrock(aws_region=region, max_retries=0, timeout=timeout, **extra)


def vertex_client(project: str, region: str, timeout: float, **extra: Any) -> anthropic.AsyncAnthropicVertex:
    """A client for Claude on Vertex AI; credentials come from Google's application default credentials."""
    return anthropic.AsyncAnthropicVertex(project_id=project, region=region, max_retries=0, timeout=timeout, **extra)


def loopback_model(base_url: str, *, retries: int, base_delay: float) -> AnthropicModel:
    """A model that talks to rhapsody's loopback server at `base_url` (the demo; needs no key)."""
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="demo-needs-no-key", max_retries=0)
    return AnthropicModel(client, retries=retries, base_delay=base_delay)


def known_models() -> tuple[str, ...]:
    """Every model id the installed SDK lists."""
    from typing import get_args

    from anthropic.types.model_param import ModelParam

    return tuple(get_args(get_args(ModelParam)[0]))


class AnthropicModel:
    """Streams requests through the real SDK and retries what the API means to be retried."""

    def __init__(
        self,
        client: AnyClient | None = None,
        *,
        retries: int = 4,
        base_delay: float = 0.5,
        timeout: float = 600.0,
    ) -> None:
        self.client = client or anthropic.AsyncAnthropic(max_retries=0, timeout=timeout)
        self.retries = retries
        self.base_delay = base_delay

    async def stream(self, body: dict[str, Any]) -> AsyncIterator[ModelEvent]:
        """Stream one request, retrying transient failures; ends with a ModelResponse."""
        attempt = 0
        while True:
            try:
                async for event in self._once(body):
                    yield event
                return
            except Exception as exc:  # noqa: BLE001 - classified below, re-raised if unknown
                reason, retry_after = _classify(exc)
                attempt += 1
                if attempt > self.retries:
                    raise ModelError(f"the API failed {attempt} time{'s' if attempt > 1 else ''}; last error: {reason}") from None
                delay = retry_after if retry_after is not None else min(self.base_delay * 2 ** (attempt - 1), MAX_DELAY)
                yield Retrying(attempt, reason, delay)
                await asyncio.sleep(delay)

    async def count_tokens(self, body: dict[str, Any]) -> int:
        """Exact input tokens of a request body from the count_tokens endpoint."""
        params = {k: body[k] for k in ("model", "system", "tools", "messages", "thinking", "tool_choice") if k in body}
        try:
            result = await self.client.messages.count_tokens(**params)
        except Exception as exc:  # noqa: BLE001 - any failure is reported, never fatal
            raise ModelError(f"{type(exc).__name__}: {exc}") from None
        return int(result.input_tokens)

    async def _once(self, body: dict[str, Any]) -> AsyncIterator[ModelEvent]:
        async with self.client.messages.stream(**body) as stream:
            async for event in stream:
                if event.type == "text":
                    yield TextDelta(event.text)
                elif event.type == "thinking":
                    yield ThinkingDelta(event.thinking)
                elif event.type == "content_block_stop":
                    yield BlockStopped(event.content_block.type)
            final = await stream.get_final_message()
        if final.stop_reason is None:
            raise StreamCut("the stream ended before message_stop")
        content = [_block(b) for b in final.content]
        usage = {
            "input_tokens": final.usage.input_tokens,
            "cache_creation_input_tokens": final.usage.cache_creation_input_tokens or 0,
            "cache_read_input_tokens": final.usage.cache_read_input_tokens or 0,
            "output_tokens": final.usage.output_tokens,
        }
        yield ModelResponse(Message.model_validate({"role": "assistant", "content": content}), final.stop_reason, usage)


def _block(block: Any) -> dict[str, Any]:
    data: dict[str, Any] = block.model_dump(mode="json", exclude_none=True)
    if data.get("type") == "tool_use" and not isinstance(data.get("input"), dict):
        data["input"] = {"_unparsed": str(data.get("input"))}
    return data


def _classify(exc: Exception) -> tuple[str, float | None]:
    """(reason, retry-after seconds) for a retryable failure; raises ModelError otherwise."""
    if isinstance(exc, StreamCut):
        return str(exc), None
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        kind = getattr(exc, "type", None) or ""
        if status == 200 or status in RETRY_STATUSES or status >= 500:
            return f"{status} {kind or 'error'} {_api_message(exc)}".strip(), _retry_after(exc)
        raise ModelError(_fatal_message(status, exc)) from None
    if isinstance(exc, (anthropic.APIConnectionError, httpx2.TransportError, httpx2.StreamError)):
        return f"connection failed: {type(exc).__name__}: {exc}", None
    if type(exc).__module__.startswith(("google.auth", "botocore")):  # Vertex or Bedrock credentials
        raise ModelError(f"cloud credentials failed: {type(exc).__name__}: {exc}") from None
    raise exc


def _api_message(exc: anthropic.APIStatusError) -> str:
    body = exc.body if isinstance(exc.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else body
    return str(error.get("message", "")) if isinstance(error, dict) else ""


def _fatal_message(status: int, exc: anthropic.APIStatusError) -> str:
    detail = _api_message(exc)
    if status == 401:
        return "the API rejected the key (401): check ANTHROPIC_API_KEY"
    if status == 403:
        return f"the API refused access (403): {detail}"
    if status == 404 and detail.startswith("model"):
        return f"unknown model ({detail}); pick one with --model"
    return f"the API rejected the request ({status}): {detail}"


def _retry_after(exc: anthropic.APIStatusError) -> float | None:
    try:
        value = exc.response.headers.get("retry-after")
        return max(0.0, float(value)) if value is not None else None
    except (ValueError, AttributeError):
        return None

