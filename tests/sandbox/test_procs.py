"""A command rhapsody runs, stopped while it is still starting (Esc, ctrl+c at the moment a call begins)."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
from pathlib import Path

from rhapsody.sandbox import procs

from tests.conftest import until, waited
from tests.sandbox.test_no_orphans import marked


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie has no command line)."""
    try:
        return bool(Path(f"/proc/{pid}/cmdline").read_bytes())
    except OSError:
        return False


async def test_a_command_cancelled_as_it_starts_ends_at_once_with_what_it_backgrounded(tmp_path: Path) -> None:
    spawned = tmp_path / "spawned"
    script = f"sleep 300 & echo $! > {spawned}; wait"  # the backgrounded sleep holds the output pipe
    task = asyncio.ensure_future(procs.run(["bash", "-c", script], str(tmp_path), dict(os.environ), 60, 1000))
    while not marked(str(spawned), os.getpid()):  # the loop step that forks it: its pipes are not connected yet
        await asyncio.sleep(0)
    # waited without yielding: the event loop held, the start cannot finish before the cancel lands
    assert waited(lambda: spawned.exists() and spawned.read_text().endswith("\n"), step=0.005), "never backgrounded"
    background = int(spawned.read_text())
    try:
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=5)
        assert task in done, "the cancelled start waited for the backgrounded sleep to close the pipe"
        assert task.cancelled()
        await until(lambda: not alive(background), 5)  # killed with its group, not left to run 300 s
    finally:
        if alive(background):
            os.kill(background, signal.SIGKILL)
        await asyncio.wait([task], timeout=10)


def _open_transports() -> list[object]:
    """asyncio's subprocess transports alive in this process and not closed."""
    from asyncio.base_subprocess import BaseSubprocessTransport

    return [t for t in gc.get_objects() if isinstance(t, BaseSubprocessTransport) and not t.is_closing()]


async def test_a_command_stopped_as_it_starts_or_runs_leaves_no_pipe_open(tmp_path: Path) -> None:
    """Esc at any moment of a command: what asyncio held for it is closed when the call returns, not later by the
    garbage collector on an event loop that may be gone (once seen as an error in a whole run)."""
    before = {id(t) for t in _open_transports()}
    for steps in (0, 1, 2, 3, 5, 8, 50):  # cancelled that many loop steps after the call began
        task = asyncio.ensure_future(procs.run(["bash", "-c", "sleep 300"], str(tmp_path), dict(os.environ), 60, 1000))
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=5)
        assert task in done
        left = [t for t in _open_transports() if id(t) not in before]
        assert left == [], f"cancelled {steps} steps in: {left}"
