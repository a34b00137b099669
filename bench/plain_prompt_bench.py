"""Benchmark: plain mode's prompt after each reply, in a terminal that answers cursor position requests and one
that never does.

    python bench/plain_prompt_bench.py [--runs 3] [--turns 4] [--pause 0.3]

Each run starts `python -m rhapsody --plain` (a fresh interpreter) in a fresh 80x24 pty (TERM=xterm-256color)
in a fresh git project, against the loopback server in this process. It waits for the prompt under the
opening lines, then types `--turns` messages, each `--pause` seconds after the prompt is back (a person's
quick "go on"). Each reply is one line of text, streamed at once as its request arrives, so "reply → prompt"
is the time from the reply's end to the prompt back under it on the screen; "line → prompt" is from Enter
to that moment; "opening" is from the fork to the prompt under the opening lines. The first turn is shown
apart: it also pays the client's first request (the SDK's import). One terminal answers each `ESC[6n` at
once, as an emulator does; the other never answers (some multiplexers, serial consoles, `script`); the two run alternated. Prints
the median and the largest of each figure for each terminal, the requests it was sent per session, and
how many sessions printed prompt-toolkit's warning that the terminal does not answer.
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import select
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import fcntl
import time
from pathlib import Path
from typing import Any

from rhapsody.loopback.script import ScriptedResponder, say
from rhapsody.loopback.server import LoopbackServer

ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x00-\x1f\x7f]")
CPR = b"\x1b[6n"
PROMPT = "›".encode()
OPENED = b"/help lists the commands and keys."
TIMEOUT = 30.0
WARNING = b"doesn't support cursor position requests"


class Stamped:
    """Replies numbered in order, each with the moment its request arrived."""

    def __init__(self) -> None:
        self.play = ScriptedResponder([say(f"Reply number {n}.") for n in range(100)])
        self.arrived: list[float] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.arrived.append(time.monotonic())
        return self.play(body)


class Pty:
    """A program in a pseudo-terminal that answers cursor position requests, or never does."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], answers: bool) -> None:
        self.answers, self.raw, self.asked = answers, b"", 0
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))

    def until(self, mark: bytes, then: bytes) -> float:
        """The moment the screen shows `then` after the last `mark` (escape sequences removed)."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            plain = ANSI.sub(b"", self.raw)
            if mark in plain and then in plain.rsplit(mark, 1)[1]:
                return time.monotonic()
            if select.select([self.fd], [], [], 0.05)[0]:
                self.raw += os.read(self.fd, 65536)
                self._answer()
        raise TimeoutError(f"no {then!r} after {mark!r}: {ANSI.sub(b'', self.raw)[-500:]!r}")

    def _answer(self) -> None:
        for _ in range(self.raw.count(CPR) - self.asked):
            self.asked += 1
            if self.answers:
                os.write(self.fd, b"\x1b[1;1R")

    def close(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)


class Session:
    """What one session measured."""

    def __init__(self) -> None:
        self.opening = 0.0
        self.turns: list[tuple[float, float]] = []
        """Per turn, seconds from the reply's end and from Enter to the prompt back."""
        self.asked = 0
        self.warned = False


def run(env: dict[str, str], answers: bool, turns: int, pause: float) -> Session:
    """One session of `turns` messages."""
    replies = Stamped()
    server = LoopbackServer(replies).start()
    root = Path(tempfile.mkdtemp(prefix="plain-prompt-"))
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    got = Session()
    start = time.monotonic()
    term = Pty([sys.executable, "-m", "rhapsody", "--plain"], root, {**env, "ANTHROPIC_BASE_URL": server.url}, answers)
    try:
        got.opening = term.until(OPENED, PROMPT) - start
        for n in range(turns):
            time.sleep(pause)  # the person reads the reply and types
            typed = time.monotonic()
            os.write(term.fd, f"message {n}\r".encode())
            back = term.until(f"Reply number {n}.".encode(), PROMPT)
            got.turns.append((back - replies.arrived[n], back - typed))
        got.asked, got.warned = term.asked, WARNING in ANSI.sub(b"", term.raw)
        return got
    finally:
        term.close()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def line(name: str, seconds: list[float]) -> str:
    return f"{name} median {statistics.median(seconds):.3f} s, max {max(seconds):.3f} s"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--pause", type=float, default=0.3, help="seconds from the prompt back to the next Enter")
    ns = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="plain-prompt-home-"))
    env = {**os.environ, "TERM": "xterm-256color", "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
           "ANTHROPIC_API_KEY": "sk-ant-bench-dummy", "RHAPSODY_MODEL": "claude-sonnet-4-5"}
    kinds: dict[bool, list[Session]] = {True: [], False: []}
    for _ in range(ns.runs):  # alternated, so a change in the machine's load falls on both
        for answers, sessions in kinds.items():
            sessions.append(run(env, answers, ns.turns, ns.pause))
    for answers, sessions in kinds.items():
        first = [s.turns[0] for s in sessions]
        rest = [t for s in sessions for t in s.turns[1:]]
        print(f"terminal {'answers' if answers else 'never answers'} ({ns.runs} runs of {ns.turns} turns, "
              f"pause {ns.pause} s)")
        print(f"  {line('opening', [s.opening for s in sessions])};  cursor position requests per session "
              f"{sorted(s.asked for s in sessions)};  warned in {sum(s.warned for s in sessions)} of {ns.runs}")
        print(f"  first turn:   {line('reply → prompt', [t[0] for t in first])};  "
              f"{line('line → prompt', [t[1] for t in first])}")
        if rest:
            print(f"  later turns:  {line('reply → prompt', [t[0] for t in rest])};  "
                  f"{line('line → prompt', [t[1] for t in rest])}")
    shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
