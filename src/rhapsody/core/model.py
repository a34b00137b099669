"""The model protocol the loop consumes.

A model streams one request: it yields `TextDelta`, `ThinkingDelta`, `BlockStopped` and
`Retrying` (then `RetryCountdown` ticks while it waits) events as they happen, and a `ModelResponse` last. Retrying after a partial
stream is the model's business; the loop only sees complete responses.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from rhapsody.core.events import BlockStopped, ModelResponse, RetryCountdown, Retrying, TextDelta, ThinkingDelta

ModelEvent = TextDelta | ThinkingDelta | BlockStopped | Retrying | RetryCountdown | ModelResponse


class Model(Protocol):
    """Something that answers Messages API request bodies."""

    def stream(self, body: dict[str, Any]) -> AsyncIterator[ModelEvent]:
        """Stream the answer to one request; the final event is a ModelResponse."""
        ...

    async def count_tokens(self, body: dict[str, Any]) -> int:
        """Exact input tokens of a request body; raises ModelError when it cannot say."""
        ...
