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


LINGER = 1.0
"""Seconds the worker thread waits for the next event before it ends (the next event starts another)."""


class Observers:
    """Delivers events to observers, in order, on one worker thread while events come.

    The thread ends once no event came for `LINGER` seconds, and holds no session it has finished
    with: a thread that waited forever held whatever it was started under (a thread keeps the
    `sys.stderr` of its start, in the full-screen app Textual's print capture, and through it the
    app, the agent and the session), so a process that opens many sessions (the editor protocol, the
    Python API, the sub-agents) kept each finished one alive.
    """

    def __init__(self, observers: Sequence[Observer] = ()) -> None:
        self.observers = tuple(observers)
        self._queue: queue.Queue[tuple[Session, Event]] = queue.Queue()
        self._errors: list[str] = []
        self._running = False
        self._lock = threading.Lock()

    def put(self, session: Session, event: Event) -> None:
        """Queue one event for every observer; returns at once."""
        if not self.observers:
            return
        with self._lock:
            self._queue.put((session, event))
            if not self._running:
                self._running = True
                threading.Thread(target=self._work, name="rhapsody-observers", daemon=True).start()

    async def drain(self) -> list[str]:
        """Wait until every queued event was observed; the errors observers raised since the last drain."""
        if self.observers:
            await asyncio.to_thread(self._queue.join)
        errors, self._errors = self._errors, []
        return errors

    def _work(self) -> None:
        while True:
            try:
                session, event = self._queue.get(timeout=LINGER)
            except queue.Empty:
                with self._lock:  # `put` starts another thread once this one has said it stops
                    if self._queue.empty():
                        self._running = False
                        return
                continue
            try:
                for observer in self.observers:
                    self._call(observer, session, event)
            finally:
                del session, event  # a waiting thread holds no session
                self._queue.task_done()

    def _call(self, observer: Observer, session: Session, event: Event) -> None:
        try:
            observer(session, event)
        except Exception as exc:  # noqa: BLE001 - an observer's failure must not end the session
            self._errors.append(f"{type(observer).__name__} failed on {type(event).__name__}: {type(exc).__name__}: {exc}")
