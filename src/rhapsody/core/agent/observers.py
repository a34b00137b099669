"""Observers: code that sees every event of the loop (memory logs, metrics) off the event loop.

The loop hands each event, with the session it belongs to, to `Observers.put`, which only
queues it; one worker thread calls every observer with every event, in order. Observers
read the session's fixed facts (root, id); they never change it. An observer may write files or run git without
stalling the front end. At the end of a turn the loop awaits `drain`, so the turn is over
only when its events have been observed; an observer's exception is returned by `drain`
(the loop records it) instead of ending the session.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rhapsody.core.events import Event

if TYPE_CHECKING:
    from rhapsody.core.session.session import Session

Observer = Callable[["Session", Event], None]


class Observers:
    """Delivers events to observers, in order, on one worker thread started on first use."""

    def __init__(self, observers: Sequence[Observer] = ()) -> None:
        self.observers = tuple(observers)
        self._queue: queue.Queue[tuple[Session, Event]] = queue.Queue()
        self._errors: list[str] = []
        self._thread: threading.Thread | None = None

    def put(self, session: Session, event: Event) -> None:
        """Queue one event for every observer; returns at once."""
        if not self.observers:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="rhapsody-observers", daemon=True)
            self._thread.start()
        self._queue.put((session, event))

    async def drain(self) -> list[str]:
        """Wait until every queued event was observed; the errors observers raised since the last drain."""
        if self._thread is not None:
            await asyncio.to_thread(self._queue.join)
        errors, self._errors = self._errors, []
        return errors

    def _work(self) -> None:
        while True:
            session, event = self._queue.get()
            try:
                for observer in self.observers:
                    self._call(observer, session, event)
            finally:
                self._queue.task_done()

    def _call(self, observer: Observer, session: Session, event: Event) -> None:
        try:
            observer(session, event)
        except Exception as exc:  # noqa: BLE001 - an observer's failure must not end the session
            self._errors.append(f"{type(observer).__name__} failed on {type(event).__name__}: {type(exc).__name__}: {exc}")
