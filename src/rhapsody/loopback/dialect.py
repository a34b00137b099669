"""What a dialect (chat.py, bedrock.py) reaches of the loopback server: the fault and request records, and
the server and its request handler as protocols, so that the dialects need not import server.py, which
dispatches to them."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BufferedIOBase
from typing import Any, Protocol

Turn = dict[str, Any]


@dataclass
class Fault:
    """One injected failure; it consumes one request and leaves the script where it was."""

    kind: str  # status | sse_error | drop | truncate | slow | garbage | bad_shape | html
    status: int = 529
    retry_after: float | None = 0
    after_events: int = 3
    seconds: float = 0.0
    partial: dict[str, Any] | None = None
    """The turn streamed before the fault strikes (default: a short text that must be lost)."""
    payload: bytes | None = None
    """For `garbage`: the bytes sent where the next event was due (default: a torn JSON line)."""

    def headers(self) -> dict[str, str]:
        """The headers a `status` fault answers with: its retry-after, when it has one."""
        return {} if self.retry_after is None else {"retry-after": str(self.retry_after)}


@dataclass
class Recorded:
    """One request as the server received it."""

    body: Any
    status: int
    size: int
    path: str
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""
    """The body's bytes as they came."""


class Server(Protocol):
    """The server's state a dialect reads: the script, the faults, the ids and the prefix cache."""

    @property
    def window(self) -> int | None: ...
    @property
    def requests(self) -> list[Recorded]: ...
    @property
    def responder(self) -> Callable[[dict[str, Any]], Turn]: ...
    @property
    def _lock(self) -> threading.Lock: ...
    @property
    def _cache(self) -> set[str]: ...

    def next_id(self, prefix: str) -> str:
        """A fresh id for a message or a tool call."""
        ...

    def take_fault(self) -> Fault | None:
        """The next injected fault, if any."""
        ...


class Exchange(Protocol):
    """One request as a dialect answers it: the server's handler."""

    close_connection: bool
    wfile: BufferedIOBase

    @property
    def loopback(self) -> Server: ...

    def _record(self, status: int, raw: bytes, body: Any) -> None: ...

    def _json(self, status: int, payload: Any, raw: bytes, body: Any, headers: dict[str, str] | None = None) -> None: ...

    def _open_event_stream(self, fault: Fault | None) -> None: ...
