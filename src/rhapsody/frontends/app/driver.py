"""Textual's terminal driver, with writes that cannot wedge the app once the terminal is gone.

Textual writes the screen from one thread fed by a queue of 30 writes. A write to a hung-up
terminal raises EIO there, which ends that thread; the queue then fills, and the next write
from the event loop (a frame, the shutdown's "leave the alternate screen") blocks forever:
the app can no longer stop, nor save, nor exit. Here the thread's file swallows that error
and tells the hangup (`frontends/hangup.py`) instead, so the thread keeps draining the queue,
dropping what it is given, and the app's own shutdown goes through.
"""

from __future__ import annotations

import errno
import io
import sys
from typing import IO, Any, cast

from textual.drivers.linux_driver import LinuxDriver

from rhapsody.frontends.hangup import Hangup


GONE = (errno.EIO, errno.EPIPE, errno.ENXIO, errno.EBADF)
"""The errors of a write to a terminal that is no longer there."""


class _Guarded(io.TextIOBase):
    """A terminal's text stream whose failed writes say the terminal is gone, instead of raising."""

    def __init__(self, stream: IO[str], hangup: Hangup) -> None:
        super().__init__()
        self._stream = stream
        self._hangup = hangup
        self._failed = False

    def write(self, text: str) -> int:
        """Write `text`; dropped once a write has failed."""
        if not self._failed:
            try:
                self._stream.write(text)
            except OSError as exc:  # EIO (hung up), EPIPE
                self._fail(exc)
        return len(text)

    def flush(self) -> None:
        """Flush, as `write`."""
        if not self._failed:
            try:
                self._stream.flush()
            except OSError as exc:
                self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        if exc.errno not in GONE:  # a write refused for now (EAGAIN, EINTR): that text is lost, not the terminal
            return
        self._failed = True
        self._hangup.fire(f"a write to the terminal failed: {exc.strerror or exc}")

    def fileno(self) -> int:
        """The terminal's descriptor."""
        return self._stream.fileno()

    def isatty(self) -> bool:
        """As the terminal says."""
        return self._stream.isatty()


class GuardedDriver(LinuxDriver):
    """Textual's Linux and macOS driver, writing through `_Guarded` when the app has a `hangup`."""

    def __init__(self, app: Any, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        hangup = getattr(app, "hangup", None)
        if isinstance(hangup, Hangup) and sys.__stderr__ is not None:
            self._file = cast("Any", _Guarded(sys.__stderr__, hangup))
