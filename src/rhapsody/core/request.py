"""One request of a round: sized, checked against the context window, recorded, then streamed.

A request the window cannot hold is not sent: `ContextTooLong` goes to the loop, which strips
first (core/safety_net.py). While the answer streams, its text gathers in the round, so a
cancellation keeps what streamed (core/round.py).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from rhapsody.core.errors import ContextTooLong
from rhapsody.core.events import Event, ModelResponse, RequestSent, Retrying, TextDelta, UsageReported
from rhapsody.core.model import Model
from rhapsody.core.round import Round
from rhapsody.core.session import Session
from rhapsody.core.window import context_window, expected_tokens, too_long


async def stream_request(session: Session, model: Model, window_setting: int | None,
                         current: Round) -> AsyncGenerator[Event, None]:
    """Send the active context and yield the answer's events; every request, retry and usage is recorded."""
    body, size, est = session.request_and_size()
    window = context_window(session.spec.model, window_setting)
    expected = expected_tokens(session.records, est)
    if expected > window:
        raise ContextTooLong(too_long(expected, window))
    session.record("request", bytes=size, est_tokens=est, messages=len(body["messages"]),
                   model=str(body.get("model", "")))
    yield RequestSent(size, est, len(body["messages"]))
    async for event in model.stream(body):
        if isinstance(event, TextDelta):
            current.partial.append(event.text)
        elif isinstance(event, Retrying):
            current.partial = []
            session.record("retry", attempt=event.attempt, reason=event.reason, delay=event.delay)
        elif isinstance(event, ModelResponse):
            session.record("usage", stop_reason=event.stop_reason, **event.usage)
            yield UsageReported(event.usage)
        yield event
