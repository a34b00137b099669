"""Child processes rhapsody starts for tools: bounded output, a timeout, and no survivors.

Each command runs in its own process group (a new session). Its output is read as a
stream into a bounded buffer that keeps the head and the tail, so a command that prints
forever (`yes`) costs a fixed amount of memory. When the command ends, times out or is
cancelled, its whole group is killed, so a backgrounded `cmd &` does not outlive it. A command run
`supervised` (bash outside the sandbox, a hook) is ended by its supervisor instead, which kills what
left the group too (`setsid -f`, a double fork: `sandbox/lifeline.py`).
Every group still running is killed when rhapsody exits normally or on SIGTERM/SIGHUP;
after SIGKILL the parent-death signal (`sandbox/lifeline.py`) and the sandbox's
`--die-with-parent` do it.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import signal
from dataclasses import dataclass
from types import FrameType

from rhapsody.core.toolbox.output_caps import marker
from rhapsody.sandbox import lifeline

CHUNK = 65536
DRAIN_AFTER_EXIT = 2.0
"""Seconds to keep reading after the command's group is killed (what is left in the pipe)."""
SWEEP_WAIT = 2.0
"""Seconds a supervisor has to kill what its command started before its group is killed regardless."""

_LIVE: dict[int, bool] = {}
"""The groups started and still running: leader pid, and whether it is a supervisor."""


@dataclass(frozen=True)
class Finished:
    """A command's captured output and how it ended."""

    output: str
    exit_code: int | None
    timed_out: bool
    total_bytes: int
    cap_bytes: int

    @property
    def cut(self) -> bool:
        """Whether the middle of the output was dropped."""
        return self.total_bytes > self.cap_bytes


class Bounded:
    """Keeps the first and last `cap // 2` bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        """Take one chunk."""
        self.total += len(data)
        room = self.cap // 2 - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        if len(self.tail) > self.cap // 2:
            del self.tail[: len(self.tail) - self.cap // 2]

    def text(self) -> str:
        """The kept bytes as text, saying what was cut and what the cap is."""
        head = self.head.decode("utf-8", errors="replace")
        if self.total <= self.cap:
            return head + self.tail.decode("utf-8", errors="replace")
        cut = self.total - len(self.head) - len(self.tail)
        kept = f", kept the first and last {self.cap // 2:,} (cap {self.cap:,})"
        return head + marker(cut, self.total, "bytes", kept) + self.tail.decode("utf-8", errors="replace")


async def run(argv: list[str], cwd: str, env: dict[str, str], timeout: float, cap: int,
              pass_fds: tuple[int, ...] = (), supervised: bool = False) -> Finished:
    """Run `argv` in a new session; stdout and stderr together, bounded; the group killed at the end.

    `pass_fds` are inherited by the child and closed here once it has started. `supervised`: under the
    supervisor, for a command that may start processes of its own outside any sandbox.
    """
    argv, preexec = lifeline.dying_with_us(argv) if not supervised else (lifeline.supervised(argv), None)
    starting = asyncio.ensure_future(asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, start_new_session=True, pass_fds=pass_fds, preexec_fn=preexec))
    try:
        proc = await asyncio.shield(starting)
    except asyncio.CancelledError:  # Esc as it starts: asyncio's own clean-up waits for every holder of the pipe
        proc = await starting        # (a sandboxed child can outlive the sandbox's first process); end it here
        await stop(proc, supervised)
        await _exited(proc)
        release(proc)
        raise
    finally:
        for fd in pass_fds:
            os.close(fd)
    _LIVE[proc.pid] = supervised
    buffer = Bounded(cap)
    reader = asyncio.ensure_future(_read(proc.stdout, buffer))
    timed_out = False
    try:
        await asyncio.wait_for(_exited(proc), timeout)
    except TimeoutError:
        timed_out = True
    finally:
        await stop(proc, supervised)
        try:
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_AFTER_EXIT)
        except (TimeoutError, asyncio.CancelledError):
            reader.cancel()
        if proc.returncode is None:
            await _exited(proc)
        _LIVE.pop(proc.pid, None)
        release(proc)
    return Finished(buffer.text(), proc.returncode, timed_out, buffer.total, cap)


def release(proc: asyncio.subprocess.Process) -> None:
    """Close the pipes asyncio holds for a command rhapsody is done with. One a process outside the killed group
    still holds, or one left unread when a read was cut short (Esc, the drain's limit), would otherwise stay open
    until the garbage collector closes it, on an event loop that may have ended by then (an error at exit)."""
    transport = getattr(proc, "_transport", None)
    if isinstance(transport, asyncio.SubprocessTransport) and not transport.is_closing():
        transport.close()


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Until the command itself exits. (`Process.wait` before Python 3.12 also waits for every
    pipe to close, so a backgrounded child holding stdout would keep it waiting.)"""
    step = 0.002
    while proc.returncode is None:
        await asyncio.sleep(step)
        step = min(step * 1.5, 0.05)  # quick commands answer fast, long ones cost few wake-ups


async def _read(stream: asyncio.StreamReader | None, buffer: Bounded) -> None:
    if stream is None:
        return
    while chunk := await stream.read(CHUNK):
        buffer.add(chunk)


async def stop(proc: asyncio.subprocess.Process, supervised: bool) -> None:
    """End a command and everything it started: a supervisor still running is told to (`lifeline.SWEEP`) and
    given `SWEEP_WAIT` to finish; then the group is killed."""
    if supervised and proc.returncode is None:
        try:
            os.kill(proc.pid, lifeline.SWEEP)
            await asyncio.wait_for(asyncio.shield(_exited(proc)), SWEEP_WAIT)
        except (ProcessLookupError, TimeoutError):
            pass
    kill_group(proc.pid)


def kill_group(pgid: int) -> None:
    """SIGKILL a process group; already gone is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_all() -> None:
    """Kill every group rhapsody started that is still running (a supervisor is told to, and does it whole)."""
    for pgid, supervised in list(_LIVE.items()):
        if supervised:
            try:
                os.kill(pgid, lifeline.SWEEP)
            except ProcessLookupError:
                pass
        else:
            kill_group(pgid)
        _LIVE.pop(pgid, None)


def install_exit_cleanup() -> None:
    """Kill every started group on normal exit, SIGTERM and SIGHUP (then die of the signal as usual)."""
    atexit.register(kill_all)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, _on_signal)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    kill_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


async def piped(argv: list[str], data: bytes, env: dict[str, str]) -> tuple[int | None, bytes, bytes]:
    """Run one of rhapsody's own workers: `data` on its stdin, its stdout and stderr read whole (the worker
    bounds them), in its own group that dies with rhapsody and is killed when the caller is cancelled."""
    argv, preexec = lifeline.dying_with_us(argv)
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True, preexec_fn=preexec)
    _LIVE[proc.pid] = False
    try:
        out, err = await proc.communicate(data)
    finally:
        kill_group(proc.pid)
        if proc.returncode is None:
            await proc.wait()
        _LIVE.pop(proc.pid, None)
        release(proc)
    return proc.returncode, out, err
