"""One request of a round: sized, checked against the context window, recorded, then streamed.

A request the window cannot hold is not sent. While the answer streams, its text gathers in
the round, so a cancellation keeps what streamed (core/agent/round.py); then the round holds the
whole answer, or why the request failed: refused for length (`ContextTooLong`, which the loop
answers by stripping first, core/agent/safety_net.py) or by the model (`ModelError`).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from rhapsody.core.errors import ContextTooLong, ModelError
from rhapsody.core.events import Event, ModelResponse, RequestSent, Retrying, TextDelta, UsageReported
from rhapsody.core.model import Model
from rhapsody.core.agent.round import Round
from rhapsody.core.session.session import Session
from rhapsody.core.window import expected_tokens, session_window, too_long
from rhapsody.core.session import records as rec


async def stream_request(session: Session, model: Model, window_setting: int | None,
                         current: Round, ttl: str = "5m") -> AsyncGenerator[Event, None]:
    """Send the active context (its cache entries of lifetime `ttl`) and yield the answer's events; every
    request, retry and usage is recorded, and the answer (or why the request failed) is kept in the round."""
    try:
        body, size, est = session.request_and_size(ttl)
        window = session_window(session.spec.model, session.figures.evidence, window_setting).tokens
        expected = expected_tokens(session.records, est)
        if expected > window:
            raise ContextTooLong(too_long(expected, window))
        session.append(rec.RequestMade(bytes=size, est_tokens=est, messages=len(body["messages"]),
                       model=str(body.get("model", "")), cache_ttl="1h" if ttl == "1h" else None))
        yield RequestSent(size, est, len(body["messages"]))
        async for event in model.stream(body):
            if isinstance(event, TextDelta):
                current.partial.append(event.text)
            elif isinstance(event, Retrying):
                current.partial = []
                session.append(rec.Retry(attempt=event.attempt, reason=event.reason, delay=event.delay))
            elif isinstance(event, ModelResponse):
                current.response = event
                session.append(rec.UsageRecorded.model_validate({"stop_reason": event.stop_reason, **event.usage}))
                yield UsageReported(event.usage)
            yield event
    except (ContextTooLong, ModelError) as exc:
        current.failure = exc
    current.streaming = False
