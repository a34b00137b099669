"""Retrying a model request: the loop, the backoff, the countdown and the one-line reason.

Owns what every provider adapter does the same way around its SDK: a failed attempt is
classified by the adapter (a reason and the server's retry-after, or a `ModelError`),
announced as a `Retrying` event, waited out with `RetryCountdown` ticks, and tried again
until the retries run out. Whatever ends the request reaches the caller as one
`ModelError` line, never a traceback. Imports only the stdlib and rhapsody.core; it knows
no SDK.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from rhapsody.core.errors import ModelError
from rhapsody.core.events import RetryCountdown, Retrying
from rhapsody.core.model import ModelEvent

RETRY_STATUSES = {408, 409, 429}
"""HTTP statuses below 500 that mean "try again"."""
MAX_DELAY = 8.0
MAX_RETRY_AFTER = 60.0
"""The longest wait rhapsody accepts from a server's retry-after before retrying."""

Attempt = Callable[[dict[str, Any]], AsyncIterator[ModelEvent]]
Classify = Callable[[Exception], tuple[str, float | None]]
Sleep = Callable[[float], Awaitable[object]]
"""Waits a number of seconds (asyncio.sleep; a test passes one it drives by hand)."""


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a failed request."""

    retries: int = 4
    base_delay: float = 0.5
    max_retry_after: float = MAX_RETRY_AFTER
    who: str = "the API"
    """How the failure message names the other side ("the API failed 3 times")."""
    sleep: Sleep = asyncio.sleep
    """How the wait before a retry passes."""


async def retrying(once: Attempt, body: dict[str, Any], classify: Classify,
                   policy: RetryPolicy) -> AsyncIterator[ModelEvent]:
    """Stream `once(body)`, retrying what `classify` returns a reason for; a partial answer is void."""
    attempt = 0
    while True:
        try:
            async for event in once(body):
                yield event
            return
        except UnicodeEncodeError:
            # A lone surrogate (typed, read from a file, or from argv's surrogateescape)
            # cannot be sent as UTF-8; the history keeps it, the request gets U+FFFD.
            cleaned = valid_body(body)
            if cleaned == body:
                raise ModelError("the request cannot be encoded as UTF-8") from None
            body = cleaned
            continue
        except Exception as exc:  # noqa: BLE001 - classified: a retry or one ModelError line
            reason, retry_after = _classified(classify, exc)
            attempt += 1
            if attempt > policy.retries:
                times = f"{attempt} time{'s' if attempt > 1 else ''}"
                raise ModelError(f"{policy.who} failed {times}; last error: {reason}") from None
            delay = retry_delay(retry_after, attempt, policy.base_delay, policy.max_retry_after)
            yield Retrying(attempt, reason, delay, retry_after)
            async for tick in countdown(attempt, delay, policy.sleep):
                yield tick


def _classified(classify: Classify, exc: Exception) -> tuple[str, float | None]:
    """`classify(exc)` with its reason and any ModelError it raises made one line."""
    try:
        reason, retry_after = classify(exc)
    except ModelError as error:
        raise type(error)(one_line(str(error))) from None  # its kind stays: the loop handles ContextTooLong
    except Exception as error:  # noqa: BLE001 - a classifier bug must not become a traceback either
        raise ModelError(f"unexpected {type(exc).__name__}: {one_line(str(exc))} ({type(error).__name__})") from None
    return one_line(reason), retry_after


def retry_delay(retry_after: float | None, attempt: int, base_delay: float, cap: float = MAX_RETRY_AFTER) -> float:
    """Seconds to wait before retry `attempt`: the server's retry-after capped, else backoff."""
    if retry_after is not None:
        return min(retry_after, cap)
    return min(base_delay * 2.0 ** (attempt - 1), MAX_DELAY)


async def countdown(attempt: int, delay: float, sleep: Sleep = asyncio.sleep) -> AsyncIterator[RetryCountdown]:
    """Wait `delay` seconds with `sleep`, announcing the whole seconds left at each second."""
    remaining = delay
    while remaining > 0:
        step = remaining - math.floor(remaining - 1e-9) if remaining > 1 else remaining
        yield RetryCountdown(attempt, round(remaining, 1))
        await sleep(step)
        remaining = round(remaining - step, 6)


def retry_after_seconds(response: Any) -> float | None:
    """The `retry-after` header of an HTTP response, in seconds, when it is a number."""
    try:
        value = response.headers.get("retry-after")
        return max(0.0, float(value)) if value is not None else None
    except (ValueError, AttributeError):
        return None


def connection_failed(exc: Exception) -> str:
    """"connection to HOST:PORT failed: …" for a failed connection, naming where it tried (never the
    URL's path, query or credentials), so a wrong base URL shows in the retry lines and the error."""
    where = endpoint(exc)
    return f"connection{f' to {where}' if where else ''} failed: {type(exc).__name__}: {exc}"


def endpoint(exc: Exception) -> str:
    """HOST:PORT of the request an SDK or transport error carries (its `request.url`), or ""."""
    try:
        url = exc.request.url  # type: ignore[attr-defined]
        host, port, scheme = str(url.host), url.port, str(url.scheme)
    except (AttributeError, RuntimeError):  # no request, or a transport error whose request was never set
        return ""
    port = port or {"https": 443, "http": 80}.get(scheme)
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port else host


def error_message(body: object) -> str:
    """The `message` of an API error body (`{"error": {"message": ...}}` or a flat one)."""
    body = body if isinstance(body, dict) else {}
    error = body.get("error", body)
    return str(error.get("message", "")) if isinstance(error, dict) else str(error or "")


def one_line(text: str, limit: int = 300) -> str:
    """`text` with its whitespace runs (newlines included) made single spaces, cut at `limit`."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def valid_body(value: Any) -> Any:
    """A copy of a request body with every lone surrogate in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_text(k): valid_body(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_body(v) for v in value]
    return value


def valid_text(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (ASCII and valid text unchanged)."""
    if text.isascii() or encodable(text):
        return text
    return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)


def encodable(text: str) -> bool:
    """Whether `text` encodes as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
