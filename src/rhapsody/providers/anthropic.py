"""The model provider on `anthropic.AsyncAnthropic`: streaming, retries, usage.

The only module that imports `anthropic`. The SDK's own retries are off (max_retries=0)
because it cannot retry a stream once the 200 has arrived: an `error` event mid-stream,
a torn connection and a stream that ends before `message_stop` all surface only here.
Every retry is done in one place (`core.agent.retry`), announced as a `Retrying` event (the front end drops
the partial text), and the partial message is never returned, so no tool runs twice.
A server's `retry-after` is obeyed up to MAX_RETRY_AFTER seconds, counted down by
`RetryCountdown` events. The raw event stream is assembled by `stream_assembly` (linear
time; the SDK's `MessageStream` is quadratic in the reply's size). Whatever the server or
the SDK raises ends as a retry or as one `ModelError` line, never a traceback.

To the Anthropic API itself the body goes as the bytes `prepared` built, each unchanged
message serialised once, through the client's own `post` with the same path, stream class
and error mapping as `messages.create`: the SDK then has no parameters to deep-copy. Bedrock
and Vertex rewrite the body's fields into their own paths, so they are given the parameters.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
from anthropic.types import Message as ApiMessage, RawMessageStreamEvent

from rhapsody.core.errors import ContextTooLong, ModelError
from rhapsody.core.events import ModelResponse
from rhapsody.core.pricing import WRITE_1H_KEY
from rhapsody.core.session.session_figures import USAGE_KEYS
from rhapsody.core.model import ModelEvent
from rhapsody.core.agent.retry import (
    MAX_RETRY_AFTER,
    RETRY_STATUSES,
    RetryPolicy,
    Sleep,
    connection_failed,
    error_message,
    one_line,
    retry_after_seconds,
    retrying,
)
from rhapsody.providers.plain_http import plain_http, untrusting
from rhapsody.providers.prepared import PreparedBodies
from rhapsody.providers.stream_assembly import Assembly, MalformedStream
from rhapsody.core.json_types import JsonObject

_NOT_BODY = frozenset({"self", "user_profile_id", "workspace_id", "extra_headers", "extra_query", "extra_body", "timeout"})
"""Parameters of `messages.create` that are not fields of the body it sends (headers, options)."""


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
    client = anthropic.AsyncAnthropic(base_url=base_url, api_key="demo-needs-no-key", max_retries=0,
                                      **_transport(base_url))
    return AnthropicModel(client, retries=retries, base_delay=base_delay)


def _transport(base_url: str | None) -> dict[str, Any]:
    """The client's own HTTP client for a plain-HTTP endpoint (providers/plain_http.py); none otherwise, so the
    SDK makes its default."""
    if not plain_http(base_url):
        return {}
    return {"http_client": anthropic.DefaultAsyncHttpxClient(verify=untrusting())}


class AnthropicModel:
    """Streams requests through the real SDK and retries what the API means to be retried."""

    def __init__(
        self,
        client: AnyClient | None = None,
        *,
        retries: int = 4,
        base_delay: float = 0.5,
        timeout: float = 600.0,
        max_retry_after: float = MAX_RETRY_AFTER,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.client = client or anthropic.AsyncAnthropic(max_retries=0, timeout=timeout,
                                                         **_transport(os.environ.get("ANTHROPIC_BASE_URL")))
        self.retries = retries
        self.base_delay = base_delay
        self.max_retry_after = max_retry_after
        self.sleep = sleep
        """How the wait before a retry passes (a test drives it by hand)."""
        self.prepared = PreparedBodies(_body_fields())
        """The request bodies as bytes, each message serialised once (the Anthropic API's client only)."""

    async def stream(self, body: JsonObject) -> AsyncIterator[ModelEvent]:
        """Stream one request, retrying transient failures; ends with a ModelResponse."""
        policy = RetryPolicy(self.retries, self.base_delay, self.max_retry_after, "the API", self.sleep)
        async for event in retrying(self._once, body, _classify, policy):
            yield event

    async def count_tokens(self, body: JsonObject) -> int:
        """Exact input tokens of a request body from the count_tokens endpoint."""
        params = {k: body[k] for k in ("model", "system", "tools", "messages", "thinking", "tool_choice") if k in body}
        try:
            result = await self.client.messages.count_tokens(**params)
        except Exception as exc:  # noqa: BLE001 - any failure is reported, never fatal
            raise ModelError(f"{type(exc).__name__}: {one_line(str(exc))}") from None
        return int(result.input_tokens)

    async def _once(self, body: JsonObject) -> AsyncIterator[ModelEvent]:
        assembly = Assembly()
        stream = await self._open(body)
        async with stream:
            _require_event_stream(stream.response)
            async for event in stream:
                shown = assembly.feed(event)
                if shown is not None:
                    yield shown
        message = assembly.message()
        usage = {key: assembly.usage.get(key, 0) for key in USAGE_KEYS}
        if assembly.usage.get(WRITE_1H_KEY):
            usage[WRITE_1H_KEY] = assembly.usage[WRITE_1H_KEY]
        yield ModelResponse(message, assembly.stop_reason, usage)

    async def _open(self, body: JsonObject) -> anthropic.AsyncStream[RawMessageStreamEvent]:
        """The event stream of one request: prepared bytes where the body goes as it is, else the parameters."""
        client = self.client
        content = self.prepared.encode({**body, "stream": True}) if isinstance(client, anthropic.AsyncAnthropic) else None
        if content is None:
            stream: anthropic.AsyncStream[RawMessageStreamEvent] = await client.messages.create(**body, stream=True)
            return stream
        return await client.post("/v1/messages", cast_to=ApiMessage, content=content, stream=True,
                                 stream_cls=anthropic.AsyncStream[RawMessageStreamEvent])


def _body_fields() -> tuple[str, ...]:
    """The fields of the body `messages.create` sends, in its order (the order of its parameters)."""
    from anthropic.resources.messages import AsyncMessages

    return tuple(name for name in inspect.signature(AsyncMessages.create).parameters if name not in _NOT_BODY)


def _require_event_stream(response: httpx2.Response) -> None:
    kind = response.headers.get("content-type", "")
    if "event-stream" not in kind and "eventstream" not in kind:  # SSE, or Bedrock's AWS event stream
        raise MalformedStream(f"the server answered {response.status_code} with {kind or 'no content-type'}, "
                              "not an event stream")


def _classify(exc: Exception) -> tuple[str, float | None]:
    """(reason, retry-after seconds) for a retryable failure; raises ModelError otherwise."""
    if type(exc).__module__.startswith(("google.auth", "botocore")):  # Vertex or Bedrock credentials
        raise ModelError(f"cloud credentials failed: {type(exc).__name__}: {exc}") from None
    if isinstance(exc, MalformedStream):
        return str(exc), None
    if isinstance(exc, ValueError):  # the SDK's json.loads of an SSE data line
        return f"the server sent malformed data: {_one_line(exc)}", None
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        kind = getattr(exc, "type", None) or ""
        if status == 200 or status in RETRY_STATUSES or status >= 500:
            return f"{status} {kind or 'error'} {_api_message(exc)}".strip(), _retry_after(exc)
        if status == 400 and _api_message(exc).startswith("prompt is too long"):  # the API's words for it
            raise ContextTooLong(f"the API refused the request for length (400): {_api_message(exc)}") from None
        raise ModelError(_fatal_message(status, exc)) from None
    if isinstance(exc, (anthropic.APIConnectionError, httpx2.TransportError, httpx2.StreamError)):
        return connection_failed(exc), None
    if isinstance(exc, anthropic.AnthropicError):
        raise ModelError(f"the API client failed: {type(exc).__name__}: {_one_line(exc)}") from None
    raise ModelError(f"unexpected {type(exc).__name__} while streaming: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    return one_line(str(exc))


def _api_message(exc: anthropic.APIStatusError) -> str:
    return error_message(exc.body)


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
    return retry_after_seconds(exc.response)
