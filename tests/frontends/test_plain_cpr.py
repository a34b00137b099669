"""`rhapsody --plain` in a terminal that never says where the cursor is, as a person meets it.

prompt-toolkit asks the terminal for the cursor's position (a CPR) as it draws the prompt and waits up to a
second for the answer before each line printed above the prompt and at the end of each prompt; it stopped
asking only once a single prompt had stood for two seconds. A real `rhapsody --plain` child runs in a
pseudo-terminal against the loopback server; the terminal answers, or never does, and the test types one
message after another as soon as the prompt is back. A prompt run in this process on a pseudo-terminal shows
the rest: the wait under way cut short, and a late answer taking the requests up again.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import struct
import termios
import time
from pathlib import Path
from typing import Any

import pytest

from rhapsody.loopback.script import ScriptedResponder, say
from tests.conftest import MODEL, Stub, until
from tests.frontends.test_start import CPR, Forked, _env

BACK_WITHIN = 0.8
"""Seconds from a reply's request to the prompt back under it. prompt-toolkit's wait for an answer is a fixed
second, so a figure under it shows nothing waited; the margin below it is for a loaded machine."""

WARNING = "your terminal doesn't support cursor position requests"
"""prompt-toolkit's own line once it gives up: nothing a person can act on."""


class Stamped:
    """The scripted replies, each with the moment its request reached the server (its reply streams at once)."""

    def __init__(self, turns: list[dict[str, Any]]) -> None:
        self.play = ScriptedResponder(turns)
        self.arrived: list[float] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.arrived.append(time.monotonic())
        return self.play(body)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def _after(text: str, mark: str) -> str:
    """What the screen shows after the last `mark`, '' before it appears."""
    return text.rsplit(mark, 1)[1] if mark in text else ""


@pytest.mark.parametrize("answers", [False, True], ids=["never-answers", "answers"])
def test_plain_mode_prompt_comes_back_after_each_reply_without_waiting(project: Path, home: Path, stub: Stub,
                                                                       answers: bool) -> None:
    replies = Stamped([say(f"Reply number {n}.") for n in range(3)])
    stub.responder = replies  # type: ignore[assignment]  # the stub calls whatever answers a request
    env = _env(home, ANTHROPIC_BASE_URL=stub.server.url, ANTHROPIC_API_KEY="sk-ant-test", RHAPSODY_MODEL=MODEL)
    term = Forked(project, env, args=("--plain",), answers_cpr=answers)
    try:
        assert term.read_until(lambda s: "›" in s, 30), term.seen[-2000:]
        took = []
        for n in range(3):
            typed = time.monotonic()
            os.write(term.fd, f"message {n}\r".encode())
            assert term.read_until(lambda s: "›" in _after(s, f"Reply number {n}.")), term.seen[-2000:]
            back = time.monotonic()
            took.append((round(back - replies.arrived[n], 3), round(back - typed, 3)))
        assert all(reply < BACK_WITHIN for reply, _ in took), took  # nothing waited between a reply and its prompt
        assert all(line < BACK_WITHIN for _, line in took[1:]), took  # nor between a line entered and its reply
        asked = term.raw.count(CPR)
        assert WARNING not in term.seen
    finally:
        term.close()
    if answers:
        assert asked >= 4, asked  # each prompt drawn still asks: the completion menu may use the rows below
    else:
        assert 1 <= asked <= 2, asked  # asked, then given up on for the session


class Screen:
    """A real pseudo-terminal for a prompt run in this process: what the prompt writes, and keys typed into it."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        self.keys = open(self.slave, "r", closefd=False)
        self.out = open(self.slave, "w", closefd=False)
        self.written = b""
        asyncio.get_running_loop().add_reader(self.master, self._read)

    def _read(self) -> None:
        self.written += os.read(self.master, 65536)

    def type(self, data: bytes) -> None:
        os.write(self.master, data)

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.master)
        self.keys.close()
        self.out.close()
        os.close(self.slave)
        os.close(self.master)


async def test_unanswered_the_requests_stop_the_waits_end_and_a_late_answer_takes_them_up_again() -> None:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.application import create_app_session, run_in_terminal
    from prompt_toolkit.input import create_input
    from prompt_toolkit.output.vt100 import Vt100_Output
    from prompt_toolkit.renderer import CPR_Support

    from rhapsody.frontends.plain_cpr import CursorReports

    screen = Screen()
    output = Vt100_Output.from_pty(screen.out, term="xterm-256color")
    try:
        with create_app_session(input=create_input(screen.keys), output=output):
            prompt: PromptSession[str] = PromptSession()
            reports = CursorReports(prompt.app, within=0.2)
            line = asyncio.create_task(prompt.prompt_async("› "))
            await until(lambda: CPR in screen.written)
            started = time.monotonic()
            await run_in_terminal(lambda: None)  # a line printed above the prompt waits for the answer...
            waited = time.monotonic() - started
            assert reports.given_up and 0.1 < waited < 0.9, waited  # ...until the answer's time is up, not a second
            assert not output.responds_to_cpr and prompt.app.renderer.cpr_support is CPR_Support.NOT_SUPPORTED
            asked = screen.written.count(CPR)
            await run_in_terminal(lambda: None)
            assert screen.written.count(CPR) == asked  # the prompt drawn again asks nothing
            screen.type(b"\x1b[3;1R")  # the answer, late: the terminal does answer
            screen.type(b"x")  # a key, so the prompt draws again
            await until(lambda: output.responds_to_cpr)
            assert prompt.app.renderer.cpr_support is CPR_Support.SUPPORTED and not reports.given_up
            screen.type(b"\r")
            assert await asyncio.wait_for(line, 10) == "x"
    finally:
        screen.close()
