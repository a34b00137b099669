"""Kill rhapsody with SIGKILL at random points of a scripted session, then resume; N trials.

    python bench/kill_trials.py [--trials 50] [--seed 1]

Each trial: a fresh git project; a loopback server playing 14 narrated steps (bash
commands that append to log.txt and sleep a little, file writes) with the session's hints
typed by a second writer; `rhapsody -p` in a subprocess; SIGKILL at a random moment between 0 and 3.5 s after its
history file appears (the run itself lasts about 2-3 s, so some kills land after the end).
Then, every time:

- the history loads (a torn last line is tolerated, nothing else is skipped);
- `seq` numbers are contiguous and every `tool_run` names a tool_use that is on disk;
- no complete record was lost: the bash steps on disk (lines in log.txt) are at least the
  `tool_run` records of them, and at most one more (a command killed after it ran but
  before its record was written);
- the session resumes and its next request is accepted by the loopback server, which
  enforces the API's validation rules.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import aclosing
from pathlib import Path

import anthropic

from rhapsody.providers.anthropic import AnthropicModel
from rhapsody.config.settings import Settings
from rhapsody.core.session.history import read_history
from rhapsody.core.agent.loop import Agent
from rhapsody.core.session.session import Session
from rhapsody.loopback.script import ScriptedResponder, call, say
from rhapsody.loopback.server import LoopbackServer
from rhapsody.tools import default_toolbox
from rhapsody.wiring import policy

STEPS = 14


def script() -> list[dict]:
    turns = []
    for i in range(STEPS):
        if i % 3 == 2:
            turns.append(call(f"Step {i}: I will write a note file so each step leaves a mark I can count later.",
                              "write_file", path=f"notes/step{i}.txt", content=f"step {i}\n"))
        else:
            turns.append(call(f"Step {i}: I will append a line to log.txt and pause briefly, to leave a countable trace.",
                              "bash", command=f"echo step-{i} >> log.txt; sleep 0.{random.randint(0, 3)}"))
    turns.append(say("All steps done."))
    return turns


def make_project() -> Path:
    root = Path(tempfile.mkdtemp()) / "proj"
    root.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def check(root: Path, url: str) -> str | None:
    """None when every invariant holds, else what failed (prefixed "ok:" with where it died)."""
    files = list((root / ".rhapsody" / "history").glob("*.jsonl"))
    if not files:
        return "no-history"  # killed before the session record: nothing was promised yet
    path = files[0]
    read = read_history(path)
    if read.skipped:
        return f"{read.skipped} malformed lines in the middle"
    seqs = [r["seq"] for r in read.records]
    if seqs != list(range(len(seqs))):
        return "seq numbers not contiguous"
    uses = {b["id"] for r in read.records if r["kind"] == "message" for b in r["content"] if b.get("type") == "tool_use"}
    runs = [r for r in read.records if r["kind"] == "tool_run"]
    if any(r["tool_use_id"] not in uses for r in runs):
        return "tool_run without its tool_use"
    logged = (root / "log.txt").read_text().count("\n") if (root / "log.txt").exists() else 0
    bash_runs = sum(1 for r in runs if r["name"] == "bash")
    if not bash_runs <= logged <= bash_runs + 1:
        return f"log has {logged} lines for {bash_runs} recorded bash runs"
    problem = asyncio.run(resume(root, path, url))
    return problem or f"ok: {len(runs)} tool runs recorded, {len(read.records)} records, torn tail {read.torn_tail}"


async def resume(root: Path, path: Path, url: str) -> str | None:
    session = Session.resume(root, path)
    client = anthropic.AsyncAnthropic(base_url=url, api_key="trial", max_retries=0)
    agent = Agent(session, AnthropicModel(client, retries=0), default_toolbox("yolo"), policy(Settings()))
    async with aclosing(agent.run("status?")) as events:
        async for event in events:
            if type(event).__name__ == "Failed":
                return f"resumed request failed: {event.message}"  # type: ignore[attr-defined]
    return None


def trial(rng: random.Random) -> tuple[str | None, float]:
    root = make_project()
    responder = ScriptedResponder(script() + [say("resumed and fine")])
    server = LoopbackServer(responder).start()
    env = {**os.environ, "ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "trial"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rhapsody", "-p", "do the steps", "--model", "claude-sonnet-5-5",
         "--permission-mode", "yolo", "--cwd", str(root)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    history = root / ".rhapsody" / "history"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (history.exists() and any(history.glob("*.jsonl"))):
        time.sleep(0.01)
    delay = rng.uniform(0.0, 3.5)  # from the first history record to past the end of the run
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    try:
        return check(root, server.url), delay
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    ns = parser.parse_args()
    rng = random.Random(ns.seed)
    random.seed(ns.seed)
    failures, empty = [], 0
    for n in range(ns.trials):
        problem, delay = trial(rng)
        if problem == "no-history":
            empty += 1
        elif problem and not problem.startswith("ok"):
            failures.append((n, delay, problem))
        print(f"trial {n + 1}: killed {delay:.2f} s after the history began: {problem}", flush=True)
    print(f"{ns.trials} trials, {len(failures)} failed, {empty} without a history")
    for n, delay, problem in failures:
        print(f"  trial {n + 1} at {delay:.2f} s: {problem}")


if __name__ == "__main__":
    main()
