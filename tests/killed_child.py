"""Child processes that each hold a session at one step, then die by SIGKILL: the kill -9 tests of the
handoff's states and of the window's safety net share them.

Each child is `python -c` forked from the run's worker server (tests/launch.py, `python`), which has imported
rhapsody, the SDKs and the test modules once and never ran a test: every child starts as a fresh
interpreter that had imported them would, with none of a test worker's state, threads or descriptors. It
says what it holds as one JSON line on its standard output, then reads its standard input, which only
this test process holds open: a child this process leaves behind ends when it does."""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import launch
from tests.conftest import make_project

READY_WITHIN = 60.0
REPO = Path(__file__).resolve().parent.parent


class Line:
    """The child's side of the talk: what it holds, sent once; then a wait that ends only with the test process."""

    def send(self, value: Any) -> None:
        sys.stdout.write(json.dumps(value) + "\n")
        sys.stdout.flush()

    def recv(self) -> None:
        """Block until the test process is gone (its end of the standard input closes): EOFError."""
        while sys.stdin.readline():
            pass
        raise EOFError


def held(module: str, project: str, step: str) -> None:
    """The child process: `module`'s `hold` at `step` in `project`."""
    importlib.import_module(module).hold(Path(project), step, Line())


class Child:
    """One child process holding a session at `step`; it says what it holds once it is there."""

    def __init__(self, module: str, project: Path, step: str) -> None:
        self.project = project
        self.step = step
        said, out = os.pipe()
        into, self._held = os.pipe()  # this process alone holds the write end: the child's input ends with it
        try:
            code = f"from tests.killed_child import held; held({module!r}, {str(project)!r}, {step!r})"
            self.proc = launch.python(code, stdin=into, stdout=out, cwd=REPO)
        finally:
            os.close(into)
            os.close(out)
        self._said = os.fdopen(said, "rb")

    def kill_when_ready(self) -> Any:
        """Wait (bounded) until the child holds its step, SIGKILL it, return what it said."""
        ready, _, _ = select.select([self._said], [], [], READY_WITHIN)
        assert ready, f"the {self.step} child said nothing in {READY_WITHIN} s"
        line = self._said.readline()
        assert line, f"the {self.step} child ended (status {self.proc.poll()}) before it said what it holds"
        self.proc.kill()
        assert self.proc.wait(10) == -signal.SIGKILL
        said = json.loads(line)
        return tuple(said) if isinstance(said, list) else said

    def end(self) -> None:
        """Killed if still alive; its pipes closed."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._said.close()
        os.close(self._held)


def children(tmp_path_factory: pytest.TempPathFactory, module: str, steps: list[str]) -> Iterator[dict[str, Child]]:
    """One child per step, each in a project of its own, all started at once; those still alive at the end
    are killed. Each runs `module`'s `hold(project, step, line)` with a `Line`."""
    started = {step: Child(module, make_project(tmp_path_factory.mktemp(step) / "proj"), step) for step in steps}
    yield started
    for child in started.values():
        child.end()
