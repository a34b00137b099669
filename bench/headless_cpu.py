"""Benchmark: the CPU one `rhapsody -p` run costs once its entry modules are imported, against the loopback.

    python bench/headless_cpu.py [--runs 6] [--all]

Imports what a headless run imports before its first request (the entry modules, as the suite's fork
server does; `--all`: every rhapsody module but the app's and acp's, and the SDK's transport, as it now
does), then runs `python -m rhapsody -p hello` in this process `--runs` times, each in the same git project
against an in-process loopback server, and prints the CPU of the first run (the imports and first-use
work the entry modules leave) and the median of the others. Compare another checkout by running this
file with `PYTHONPATH=OTHER/src` (its `prompts/` beside its `src/`): it prints which rhapsody it imported.
"""

from __future__ import annotations

import argparse
import importlib
import os
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENTRY = ("rhapsody.cli", "rhapsody.providers.anthropic", "rhapsody.providers.openai", "rhapsody.commands.slash",
         "rhapsody.frontends.headless", "rhapsody.wiring")


def one_run() -> float:
    started = time.process_time()
    try:
        runpy.run_module("rhapsody", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--all", action="store_true", help="import every module first, as the fork server does")
    args = parser.parse_args()
    if args.runs < 2:
        parser.error("--runs must be at least 2: the first run, then the ones its median is taken over")
    for name in ENTRY:
        importlib.import_module(name)
    import rhapsody
    from rhapsody.loopback.script import ScriptedResponder, say
    from rhapsody.loopback.server import LoopbackServer

    if args.all:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from tests.launch import TRANSPORT, every_module

        for name in [*every_module("rhapsody"), *TRANSPORT]:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - as the fork server: left to the run
                pass
    server = LoopbackServer(ScriptedResponder([say("Hello there.")] * args.runs)).start()
    base = Path(tempfile.mkdtemp(prefix="rhapsody-headless-cpu-"))
    (base / "home").mkdir()
    root = base / "proj"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    (root / "a.txt").write_text("hi\n", encoding="utf-8")
    os.environ.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-ant-bench", HOME=str(base / "home"))
    os.chdir(root)
    sys.argv = ["rhapsody", "-p", "hello"]
    out = sys.stdout
    sys.stdout = open(os.devnull, "w")
    try:
        times = [one_run() for _ in range(args.runs)]
    finally:
        sys.stdout = out
    print(f"rhapsody from {Path(rhapsody.__file__).parent}")
    print(f"first run {times[0] * 1000:.0f} ms of CPU; later runs, median of {len(times) - 1}: "
          f"{statistics.median(times[1:]) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
