"""Time a whole headless turn with two sandboxed bash calls in a 10-file and a 20,000-file git project.

    .venv/bin/python bench/turn_bench.py [--turns 5] [--files 20000] [--headless]

Both projects are git repositories (every file committed) built in a temp folder, with a
state folder of their own (XDG_STATE_HOME, where the checkpoints' shadow lives). Each
project gets one session (`wiring.build` against the loopback server, `workspace-write`
sandbox, `auto-edit`), whose model is scripted: each turn it calls bash twice (`cat` a file,
then append a line to `notes.txt`), then answers. One turn is the wall time of `Agent.run`
to its last event: the turn's checkpoint, both calls with their checkpoints and git checks,
the end checkpoint, three requests. A warm-up turn in each project comes first (the first
checkpoint of the large tree hashes every file; its time is printed apart) and a pause of the
settle time (2 s: a folder or git file changed more recently is checked again), then the
projects take turns `--turns` times. Prints the median per project and the difference.

With `--headless` each turn is a `rhapsody -p ... --continue` process instead (its start-up,
the same in both projects, included): nothing is kept in memory from one turn to the next.

To time another checkout, run this file with `PYTHONPATH=OTHER/src`: it prints which
rhapsody it imported. docs/performance.md quotes it.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anthropic

import rhapsody
from rhapsody.config.settings import Settings
from rhapsody.frontends.headless import print_event
from rhapsody.loopback.script import call, say
from rhapsody.loopback.server import LoopbackServer
from rhapsody.providers.anthropic import AnthropicModel
from rhapsody.wiring import build

SETTLE_NS = 2_000_000_000
"""tools/gitscope.py's and sandbox/tree_index.py's settle time: a stamp this recent is checked again."""

MODEL = "claude-sonnet-4-5"
GIT = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
       "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
TURN = [call("I will read the first file to see what it holds before changing anything.", "bash",
             command="cat README.md"),
        call("I will append one line to the notes file so the change is recorded there.", "bash",
             command="echo step >> notes.txt"),
        say("Done.")]


def project(root: Path, files: int) -> Path:
    """A git repository of `files` small files (20 to a folder, folders 25 to a parent), all committed."""
    root.mkdir()
    (root / "README.md").write_text("readme\n", encoding="utf-8")
    for i in range(files - 1):
        folder = root / f"pkg{i // 500:03d}" / f"mod{i // 20 % 25:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{i % 20:02d}.py").write_text(f"x = {i}\n", encoding="utf-8")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "initial"]):
        subprocess.run(["git", *args], cwd=root, env={**os.environ, **GIT}, check=True, capture_output=True)
    return root


class Looped:
    """The scripted model's next answer: the two calls, then the answer, round and round."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        turn = TURN[self.n % len(TURN)]
        self.n += 1
        return turn


async def one_turn(agent: Any) -> float:
    """Wall seconds of one turn, to its last event."""
    out = io.StringIO()
    start = time.perf_counter()
    async for event in agent.run("append a step to the notes"):
        print_event(event, out)
    took = time.perf_counter() - start
    if "Done." not in out.getvalue():
        raise SystemExit(f"the turn did not finish: {out.getvalue()[-2000:]}")
    return took


async def run(roots: list[Path], url: str, turns: int) -> tuple[list[float], list[list[float]]]:
    client = anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=0, timeout=600)
    agents = [build(r, Settings(permission_mode="auto-edit", sandbox="workspace-write"),
                    AnthropicModel(client, retries=0), MODEL).agent for r in roots]
    warm = [await one_turn(agent) for agent in agents]
    await asyncio.sleep(SETTLE_NS / 1e9 + 0.2)  # the warm-up wrote notes.txt: a stamp that recent is not trusted
    times: list[list[float]] = [[] for _ in roots]
    for _ in range(turns):
        for agent, out in zip(agents, times):
            out.append(await one_turn(agent))
    return warm, times


def headless_turn(root: Path, url: str, first: bool) -> float:
    """Wall seconds of one `rhapsody -p` run in `root` (continuing its session after the first)."""
    env = {**os.environ, "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": url}
    argv = [sys.executable, "-m", "rhapsody", "-p", "append a step to the notes", "--cwd", str(root), "--model", MODEL]
    start = time.perf_counter()
    done = subprocess.run([*argv, *([] if first else ["--continue"])], env=env, capture_output=True, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0 or "Done." not in done.stdout:
        raise SystemExit(f"the turn did not finish: {done.stderr[-2000:]}")
    return took


def run_headless(roots: list[Path], url: str, turns: int) -> tuple[list[float], list[list[float]]]:
    warm = [headless_turn(root, url, True) for root in roots]
    time.sleep(SETTLE_NS / 1e9 + 0.2)
    times: list[list[float]] = [[] for _ in roots]
    for _ in range(turns):
        for root, out in zip(roots, times):
            out.append(headless_turn(root, url, False))
    return warm, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--headless", action="store_true", help="each turn a `rhapsody -p` process")
    ns = parser.parse_args()
    print(f"rhapsody from {Path(rhapsody.__file__).parent}")
    with tempfile.TemporaryDirectory(prefix="turn-bench-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        roots = [project(Path(tmp) / "small", 10), project(Path(tmp) / "large", ns.files)]
        server = LoopbackServer(Looped()).start()
        try:
            if ns.headless:
                warm, times = run_headless(roots, server.url, ns.turns)
            else:
                warm, times = asyncio.run(run(roots, server.url, ns.turns))
        finally:
            server.stop()
    small, large = (statistics.median(t) for t in times)
    print(f"first turn (first checkpoint): 10 files {warm[0]:.2f} s, {ns.files} files {warm[1]:.2f} s")
    kind = "`rhapsody -p` processes" if ns.headless else "turns of one session each"
    print(f"turn with two sandboxed bash calls, median of {ns.turns} (alternated, {kind}):")
    print(f"  10 files      {small:6.3f} s")
    print(f"  {ns.files} files {large:6.3f} s")
    print(f"  difference    {large - small:6.3f} s")


if __name__ == "__main__":
    main()
