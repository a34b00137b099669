"""Benchmark: what a process that opens session after session (a script, the editor protocol's server) keeps.

    python bench/many_sessions.py [--sessions 30]

Opens `--sessions` sessions one after another through the Python API (`rhapsody.Agent.open`) in one
process, each in its own git project against the loopback server, sends one turn, closes it, and keeps
only a weak reference to its session. Then, after the observers' linger (1.5 s), prints how many
observer threads are alive, how many of the closed sessions are still reachable after a collection,
and the process's resident memory growth across the sessions. Compare another checkout by running this
file with `PYTHONPATH=OTHER/src`: it prints which rhapsody it imported.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import tempfile
import threading
import weakref
from pathlib import Path

import rhapsody
from rhapsody import Agent
from rhapsody.loopback.script import ScriptedResponder, say
from rhapsody.loopback.server import LoopbackServer

MODEL = "claude-sonnet-5-5"


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def project(base: Path, n: int) -> Path:
    root = base / f"p{n}"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "README.md").write_text("a project\n")
    return root


async def main(sessions: int) -> None:
    server = LoopbackServer(ScriptedResponder([say("word " * 2000) for _ in range(sessions)])).start()
    os.environ["ANTHROPIC_BASE_URL"] = server.url
    os.environ["ANTHROPIC_API_KEY"] = "bench"
    base = Path(tempfile.mkdtemp())
    os.environ["XDG_CONFIG_HOME"] = str(base / "config")
    os.environ["XDG_STATE_HOME"] = str(base / "state")
    refs = []
    start = None
    for n in range(sessions):
        async with Agent.open(project(base, n), model=MODEL, permission_mode="yolo", sandbox="off") as agent:
            async for _ in agent.send(f"session {n}: say something long"):
                pass
            refs.append(weakref.ref(agent._wiring.session))
        del agent
        if start is None:
            gc.collect()
            start = rss_mib()
    await asyncio.sleep(1.5)
    gc.collect()
    threads = sum(thread.name == "rhapsody-observers" for thread in threading.enumerate())
    alive = sum(ref() is not None for ref in refs)
    print(f"rhapsody from {Path(rhapsody.__file__).parent}")
    print(f"{sessions} sessions: {threads} observer threads alive, {alive} closed sessions still reachable, "
          f"resident memory +{rss_mib() - (start or 0):.1f} MiB after the first")
    server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=30)
    asyncio.run(main(parser.parse_args().sessions))
