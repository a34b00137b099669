"""Start fast: the model adapter is built on first use, and its SDK imported in the background.

Importing the `anthropic` SDK takes seconds on a slow machine; the app paints first and
calls `warm()` in a thread, so the SDK is ready by the first request. The SDK's model list
is read from its source text, which needs no import.
"""

from __future__ import annotations

import importlib.util
import re
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from rhapsody.core.model import ModelEvent
from rhapsody.core.json_types import JsonObject

_MODEL_PARAM = re.compile(r'"(claude-[a-z0-9.-]+)"')


class LazyModel:
    """A `Model` whose real adapter is made by `factory` when first needed (or warmed early)."""

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory
        self._model: Any = None
        self._lock = threading.Lock()

    def warm(self) -> None:
        """Build the adapter now (imports the SDK); safe to call from a thread."""
        with self._lock:
            if self._model is None:
                self._model = self.factory()

    @property
    def model(self) -> Any:
        """The real adapter."""
        self.warm()
        return self._model

    async def stream(self, body: JsonObject) -> AsyncIterator[ModelEvent]:
        """Stream one request through the real adapter."""
        async for event in self.model.stream(body):
            yield event

    async def count_tokens(self, body: JsonObject) -> int:
        """Exact input tokens, through the real adapter."""
        return int(await self.model.count_tokens(body))


def sdk_models() -> tuple[str, ...]:
    """The model ids the installed SDK lists, newest first, read without importing it."""
    spec = importlib.util.find_spec("anthropic")
    if spec is None or not spec.submodule_search_locations:
        return ()
    source = Path(next(iter(spec.submodule_search_locations))) / "types" / "model_param.py"
    try:
        text = source.read_text(encoding="utf-8")
    except OSError:
        return ()
    return tuple(dict.fromkeys(_MODEL_PARAM.findall(text)))


def default_model() -> str:
    """The newest Sonnet id the installed SDK lists."""
    return next((m for m in sdk_models() if "sonnet" in m), "claude-sonnet-4-5")
