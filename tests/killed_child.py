"""Child processes that each hold a session at one step, then die by SIGKILL: the kill -9 tests of the
handoff's states and of the window's safety net share them."""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import make_project

READY_WITHIN = 60.0


class Child:
    """One child process holding a session at `step`; it sends what it holds once it is there."""

    def __init__(self, context: BaseContext, hold: Callable[..., None], project: Path, step: str) -> None:
        self.project = project
        self.step = step
        self.conn, child_end = multiprocessing.Pipe()
        self.proc = context.Process(target=hold, args=(project, step, child_end), daemon=True)  # type: ignore[attr-defined]
        self.proc.start()
        child_end.close()

    def kill_when_ready(self) -> Any:
        """Wait (bounded) until the child holds its step, SIGKILL it, return what it sent."""
        assert self.conn.poll(READY_WITHIN), f"the {self.step} child said nothing in {READY_WITHIN} s"
        said = self.conn.recv()
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.join(10)
        assert self.proc.exitcode == -signal.SIGKILL
        return said


def children(tmp_path_factory: pytest.TempPathFactory, module: str, hold: Callable[..., None],
             steps: list[str]) -> Iterator[dict[str, Child]]:
    """One child per step, each in a project of its own, all started at once (the forkserver imports
    `module`, and so rhapsody, once); those still alive at the end are killed."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([module])
    started = {step: Child(context, hold, make_project(tmp_path_factory.mktemp(step) / "proj"), step) for step in steps}
    yield started
    for child in started.values():
        if child.proc.is_alive():
            child.proc.kill()
            child.proc.join(10)
