"""Benchmark: shell to first frame, rhapsody beside Claude Code, in a real pseudo-terminal.

    python bench/first_paint.py [--runs 7] [--claude PATH]

Each run starts the program in a fresh 80x24 pty (TERM=xterm-256color) in a fresh git
project and times, from fork to the moment, the first frame: the first time the screen
holds at least 40 printable characters once escape sequences are removed. rhapsody
runs with a dummy key (nothing is sent until the human types). rhapsody's first frame is
drawn before its session is built, so it also reports when the session is ready: the
moment the welcome names the model, and when the app is live: the moment its terminal driver
starts (it turns on bracketed paste, `ESC[?2004h`), from when the app itself reads the keys
(typed earlier, they wait for it). rhapsody's modules are byte-compiled first, as an
installed package's are. Claude Code is looked up
as `--claude`, or `claude` under a `node_modules/.bin` given by CLAUDE_CODE_DIR; install it
outside the repository with

    npm install --prefix /tmp/cc @anthropic-ai/claude-code@2.1.332

and it is skipped (said so) when it is not there. The two run alternated, each run in a fresh
project; prints the median and range of each and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import fcntl
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
import time
from pathlib import Path

ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[@-Z\\-_]|[\x00-\x1f\x7f]")
VISIBLE = 40
TIMEOUT = 20.0
READY = b"model        claude-"
LIVE = b"\x1b[?2004h"


def first_frame(argv: list[str], cwd: Path, env: dict[str, str], ready: bytes = b"",
                live: bytes = b"") -> tuple[float, float, float] | None:
    """Seconds from fork to the first frame, to the moment the screen shows `ready`, and to the moment
    the program writes `live` (the first frame's moment where one is empty); None when they did not
    come within TIMEOUT."""
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    seen = b""
    first = shown = alive = 0.0
    try:
        while time.perf_counter() - start < TIMEOUT:
            readable, _, _ = select.select([fd], [], [], 0.05)
            if not readable:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return None
            if not chunk:
                return None
            seen += chunk
            plain = ANSI.sub(b"", seen)
            if not first and len(plain.strip()) >= VISIBLE:
                first = time.perf_counter() - start
            now = time.perf_counter() - start
            if first and not shown and ready in plain:
                shown = now
            if first and not alive and live in seen:
                alive = now
            if shown and alive:
                return first, shown, alive
        return None
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)


def project() -> Path:
    """A fresh git project with one file."""
    root = Path(tempfile.mkdtemp(prefix="first-paint-"))
    (root / "app.py").write_text("print('hi')\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def once(argv: list[str], env: dict[str, str], ready: bytes = b"",
         live: bytes = b"") -> tuple[float, float, float] | None:
    """One start in a fresh project."""
    root = project()
    try:
        return first_frame(argv, root, env, ready, live)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(name: str, times: list[tuple[float, float, float] | None], ready: bool = False) -> float | None:
    """Print the median and range of the first frames (and of the session ready); the first frames' median."""
    got = [t for t in times if t is not None]
    if not got:
        print(f"{name:<12} no frame within {TIMEOUT:.0f} s")
        return None
    frames, readies, lives = [t[0] for t in got], [t[1] for t in got], [t[2] for t in got]
    print(f"{name:<12} median {statistics.median(frames):.3f} s  (min {min(frames):.3f}, max {max(frames):.3f}, "
          f"{len(got)}/{len(times)} runs)")
    if ready:
        print(f"{'':<12} session ready (the welcome names the model): median {statistics.median(readies):.3f} s "
              f"(min {min(readies):.3f}, max {max(readies):.3f})")
        print(f"{'':<12} the app live (its driver reads the keys): median {statistics.median(lives):.3f} s "
              f"(min {min(lives):.3f}, max {max(lives):.3f})")
    return statistics.median(frames)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--claude", help="path of the claude executable")
    ns = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="first-paint-home-"))
    env = {**os.environ, "TERM": "xterm-256color", "HOME": str(home), "ANTHROPIC_API_KEY": "sk-ant-bench-dummy",
           "COLUMNS": "80", "LINES": "24"}
    rhapsody = shutil.which("rhapsody", path=str(Path(sys.executable).parent)) or "rhapsody"
    import compileall

    import rhapsody as package

    # An installed package starts from bytecode; where PYTHONDONTWRITEBYTECODE is set, an
    # editable install would otherwise compile its changed modules at every start.
    compileall.compile_dir(str(Path(package.__file__).parent), quiet=1)
    claude = ns.claude or str(Path(os.environ.get("CLAUDE_CODE_DIR", "/tmp/cc")) / "node_modules/.bin/claude")
    ours: list[tuple[float, float, float] | None] = []
    theirs: list[tuple[float, float, float] | None] = []
    for _ in range(ns.runs):  # alternated, so a change in the machine's load falls on both
        ours.append(once([rhapsody], env, READY, LIVE))
        if Path(claude).exists():
            theirs.append(once([claude], env))
    mine = report("rhapsody", ours, ready=True)
    if not theirs:
        print(f"claude code  not installed at {claude}: skipped")
    elif (anchor := report("claude code", theirs)) and mine:
        print(f"ratio        {mine / anchor:.2f}x Claude Code's first frame (medians)")
    shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
