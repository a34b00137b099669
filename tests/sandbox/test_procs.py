"""A command rhapsody runs, stopped while it is still starting (Esc, ctrl+c at the moment a call begins)."""

from __future__ import annotations

import asyncio
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
