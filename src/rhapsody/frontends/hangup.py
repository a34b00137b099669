"""Nothing outlives its terminal: on SIGHUP or a terminal that vanished, stop, save, and exit within 2 s.

A closed window or a dropped ssh connection reaches rhapsody three ways: SIGHUP (to the session
leader from the kernel, to a job from its shell), the terminal's file descriptors reporting a
hangup (POLLHUP; a pipe whose reader left reports POLLERR), or a write that fails with EIO or
EPIPE. Any of them `fire`s the same path, once:

- the front end's `stop` runs on its event loop: the turn is cancelled as an interrupt is (the
  loop records `interrupted`, a running command's group is killed), an open question is dropped;
  when it returns, every record is on disk (each append is fsynced), and the history is `saved`;
- a watchdog thread, started by `fire` and not by the loop, ends the process itself with
  `os._exit`: as soon as the history is saved when the terminal is gone (nothing is left to
  restore), or at `DEADLINE` whatever happens, after killing every child rhapsody started.
  A UI library whose own shutdown blocks on the dead terminal, a loop stuck in a blocking call
  (the `$EDITOR`), a stop that never returns: none of them keeps the process alive past it.

A child that holds the terminal (the editor) is registered in `foreground`; it gets SIGHUP as a
shell would give it, and SIGKILL at the deadline. A private file that a hard exit would leave
behind (the editor's draft) is registered in `leftovers` and removed first.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import stat
import sys
import termios
import threading
import time
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import Any, TypeVar

# Standard library only: the app imports this before its first frame, which must not wait for the core.

T = TypeVar("T")

DEADLINE = 2.0
"""Seconds from the hangup to the process gone."""

MARGIN = 0.25
"""Kept back from `DEADLINE` for killing the children and the exit itself."""

STATUS = 128 + signal.SIGHUP
"""The exit status after a hangup, as a shell reports a process ended by SIGHUP."""

foreground: set[int] = set()
"""Pids of children that hold the terminal while they run (the editor)."""

leftovers: set[str] = set()
"""Private files to remove were the process to end hard (the editor's draft)."""


class Hangup:
    """One process's answer to losing its terminal (see the module's docstring)."""

    status = STATUS

    def __init__(self, deadline: float = DEADLINE) -> None:
        self.deadline = deadline
        self.why = ""
        """What fired it (`SIGHUP`, `the terminal hung up`, the failed write); '' until then."""
        self.fired_at = 0.0
        self._fired = threading.Event()
        self._saved = threading.Event()
        self._lock = threading.RLock()  # reentrant: the SIGHUP handler may interrupt its own thread holding it
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: Callable[[], Awaitable[None]] | None = None
        self.stopper: asyncio.Task[Any] | None = None
        """The task running the front end's stop, once it runs (nothing else cancels it)."""
        self._fds = [fd for fd in (0, 1, 2) if _watchable(fd)]
        self._previous: Any = None
        self._wake: tuple[int, int] | None = None

    @property
    def fired(self) -> bool:
        """Whether the terminal went away."""
        return self._fired.is_set()

    def __enter__(self) -> Hangup:
        """Take SIGHUP (a plain handler, so it runs even while the event loop is stuck) and watch the terminal;
        under `nohup` (SIGHUP ignored) neither: the person asked for the run to outlive its terminal."""
        if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
            return self
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGHUP, self._on_signal)
        if self._fds:
            self._wake = os.pipe()
            threading.Thread(target=self._watch, args=(self._wake[0],), name="rhapsody-hangup-watch",
                             daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        """Give SIGHUP back and stop watching (a hangup already fired still ends the process)."""
        self.disarm()
        if self._previous is not None:
            signal.signal(signal.SIGHUP, self._previous)
            self._previous = None
        if self._wake is not None:
            os.write(self._wake[1], b"x")
            os.close(self._wake[1])
            self._wake = None

    def arm(self, loop: asyncio.AbstractEventLoop, stop: Callable[[], Awaitable[None]]) -> None:
        """What to run on `loop` when the terminal goes: `stop` returns once the history holds what it needs."""
        with self._lock:
            self._loop, self._stop = loop, stop
            pending = self.fired
        if pending:  # it went before the front end was ready for it
            self._schedule()

    def disarm(self) -> None:
        """The front end has ended: a later hangup only needs the watchdog."""
        with self._lock:
            self._loop, self._stop = None, None

    def fire(self, why: str) -> None:
        """The terminal is gone (any thread, a signal handler included): stop, save, exit."""
        with self._lock:
            if self._fired.is_set():
                return
            self.why, self.fired_at = why, time.monotonic()
            self._fired.set()
        threading.Thread(target=self._watchdog, name="rhapsody-hangup", daemon=True).start()

    def saved(self) -> None:
        """The history holds what it needs: the watchdog may end the process."""
        self._saved.set()

    def terminal_gone(self) -> bool:
        """Whether the terminal rhapsody was started in no longer answers (hung up, or its reader left)."""
        for fd in self._fds:
            try:
                if os.isatty(fd):
                    termios.tcgetattr(fd)  # EIO once the terminal is hung up
                elif _hung(fd):
                    return True
            except (termios.error, OSError):
                return True
        return False

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.fire("SIGHUP")

    def _watch(self, wake: int) -> None:
        poller = select.poll()
        for fd in self._fds:
            poller.register(fd, 0)  # no events asked: poll reports only a hangup or an error
        poller.register(wake, select.POLLIN)
        try:
            while not self.fired:
                ready = dict(poller.poll())
                if wake in ready:
                    return
                if any(mask & (select.POLLHUP | select.POLLERR) for mask in ready.values()):
                    self.fire("the terminal hung up")
                for fd in [fd for fd, mask in ready.items() if mask & select.POLLNVAL]:
                    poller.unregister(fd)  # closed under us: nothing more to hear from it
        finally:
            os.close(wake)

    def _schedule(self) -> None:
        with self._lock:
            loop, stop = self._loop, self._stop
        if loop is None or stop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._stop_and_save(stop), loop)
        except RuntimeError:  # the loop has closed: there is nothing left on it to stop
            self.saved()

    async def _stop_and_save(self, stop: Callable[[], Awaitable[None]]) -> None:
        self.stopper = asyncio.current_task()
        await stop()  # cancelled instead (the loop shutting down): whoever cancelled it says when it is saved
        self.saved()

    def _left(self) -> float:
        return max(0.0, self.fired_at + self.deadline - MARGIN - time.monotonic())

    def _watchdog(self) -> None:
        for pid in list(foreground):  # the editor hears what a shell would tell it
            _signal(pid, signal.SIGHUP)
        self._schedule()
        self._saved.wait(self._left())
        while self._left() > 0 and not self.terminal_gone():  # a window still open: let the normal exit restore it
            time.sleep(min(0.05, self._left()))
        self.end()

    def ended(self) -> None:
        """The front end has ended after the hangup: with the terminal gone, exit now (what is left, a flush of
        output into the dead terminal, would only fail); with it still open, return to the normal exit."""
        if self.terminal_gone():
            self.end()

    def end(self) -> None:
        """Kill every child rhapsody started and exit now, with the status of a hangup."""
        for pid in list(foreground):
            _signal(pid, signal.SIGKILL)
        procs = sys.modules.get("rhapsody.sandbox.procs")  # not imported: rhapsody started no command yet
        if procs is not None:
            procs.kill_all()
        for path in list(leftovers):
            try:
                os.unlink(path)
            except OSError:
                pass
        os._exit(STATUS)


def _watchable(fd: int) -> bool:
    """A terminal, or a pipe (whose reader leaving is a vanished terminal for headless output)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return os.isatty(fd) or (fd != 0 and stat.S_ISFIFO(mode))  # a pipe into stdin may close at any time


def _hung(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, 0)
    return any(mask & (select.POLLHUP | select.POLLERR) for _, mask in poller.poll(0))


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        foreground.discard(pid)


async def until_hangup(hangup: Hangup, run: Awaitable[T]) -> T | int:
    """Run a front end (plain, headless); when the terminal goes, cancel it and every task it started (its
    turn is interrupted as ctrl+c interrupts it, and recorded), and return `STATUS`. A front end that ended by
    itself meanwhile (its input at EOF, a write that failed) has what it left running stopped the same way."""
    task = asyncio.ensure_future(run)
    caller = asyncio.current_task()
    hangup.arm(asyncio.get_running_loop(), lambda: _cancel_all_but(caller, hangup))
    try:
        return await task
    except (asyncio.CancelledError, Exception):
        if hangup.fired:
            return STATUS
        raise
    finally:
        if hangup.fired:
            await _cancel_all_but(caller, hangup)
            hangup.saved()
        hangup.disarm()


async def _cancel_all_but(caller: asyncio.Task[Any] | None, hangup: Hangup) -> None:
    """Cancel every task on this loop but this one, `caller` and the hangup's stop, and wait until they end."""
    tasks = asyncio.all_tasks() - {asyncio.current_task(), caller, hangup.stopper}
    for each in tasks:
        each.cancel()
    if tasks:
        await asyncio.wait(tasks)
