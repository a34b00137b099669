"""Benchmark: shell to first frame, rhapsody beside Claude Code, in a real pseudo-terminal.

    python bench/first_paint.py [--runs 7] [--claude PATH]

Each run starts the program in a fresh 80x24 pty (TERM=xterm-256color) in a fresh git
project and times, from fork to the moment, the first frame: the first time the screen
holds at least 40 printable characters once escape sequences are removed. rhapsody
runs with a dummy key (nothing is sent until the human types). rhapsody's first frame is
drawn before its session is built, so it also reports when the session is ready: the
moment the welcome names the model. rhapsody's modules are byte-compiled first, as an
installed package's are. Claude Code is looked up
as `--claude`, or `claude` under a `node_modules/.bin` given by CLAUDE_CODE_DIR; install it
outside the repository with

    npm install --prefix /tmp/cc @anthropic-ai/claude-code@2.1.332

and it is skipped (said so) when it is not there. Prints the median and range of each.
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


def first_frame(argv: list[str], cwd: Path, env: dict[str, str], ready: bytes = b"") -> tuple[float, float] | None:
    """Seconds from fork to the first frame, and to the moment the screen shows `ready` (the same
    moment when `ready` is empty); None when they did not come within TIMEOUT."""
    start = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.execvpe(argv[0], argv, env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    seen = b""
    first = 0.0
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
            if first and ready in plain:
                return first, time.perf_counter() - start
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


def measure(name: str, argv: list[str], runs: int, env: dict[str, str], ready: bytes = b"") -> None:
    times, readies = [], []
    for _ in range(runs):
        root = project()
        t = first_frame(argv, root, env, ready)
        shutil.rmtree(root, ignore_errors=True)
        if t is not None:
            times.append(t[0])
            readies.append(t[1])
    if not times:
        print(f"{name:<12} no frame within {TIMEOUT:.0f} s")
        return
    print(f"{name:<12} median {statistics.median(times):.3f} s  (min {min(times):.3f}, max {max(times):.3f}, "
          f"{len(times)}/{runs} runs)")
    if ready:
        print(f"{'':<12} session ready (the welcome names the model): median {statistics.median(readies):.3f} s "
              f"(min {min(readies):.3f}, max {max(readies):.3f})")


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
    measure("rhapsody", [rhapsody], ns.runs, env, ready=b"model        claude-")
    claude = ns.claude or str(Path(os.environ.get("CLAUDE_CODE_DIR", "/tmp/cc")) / "node_modules/.bin/claude")
    if Path(claude).exists():
        measure("claude code", [claude], ns.runs, env)
    else:
        print(f"claude code  not installed at {claude}: skipped")
    shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
