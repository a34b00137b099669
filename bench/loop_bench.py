"""Benchmark: one tool round trip at 10 and 1,000 turns of history, client and server apart.

    python bench/loop_bench.py [--rounds 30] [--turns 10,1000]

Each round trip is one request to the loopback server (zero delay), the streamed answer
(narration plus one tool call), the tool run (`find_files` on an empty folder) and the
history appends. The server runs in its own process, so the figures split at the socket:

- "end to end": wall time per round trip, the server's parsing and validation included;
- "client CPU": CPU time (`time.process_time`) of the client process per round trip:
  everything on rhapsody's side of the socket, the SDK and HTTP included, the tool and
  the history appends too; CPU time is less disturbed by a loaded machine than wall time;
- "server CPU": the server process's CPU time per round trip, for the anchor;
- "harness": rhapsody's own share: building the request body from the history view and
  measuring it (median of 20).

Also reported: one history append with fsync, and the weight of the first request of a
session (system prompt plus tool definitions). To compare with another checkout, run
this file with `PYTHONPATH=OTHER/src`: it prints which rhapsody it imported.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import aclosing
from pathlib import Path

import anthropic

import rhapsody
from rhapsody.providers.anthropic import AnthropicModel
from rhapsody.config.settings import Settings
from rhapsody.core.session.history import HistoryWriter
from rhapsody.core.session.messages import TextBlock, ToolResultBlock, ToolUseBlock
from rhapsody.loopback.server import LoopbackServer
from rhapsody.wiring import build
from rhapsody.core.session import records as rec

NARRATION = "I will list the files matching a pattern to check the layout before the next change."
TURN = {"content": [{"type": "text", "text": NARRATION}, {"type": "tool_use", "name": "find_files", "input": {"pattern": "*.none"}}]}
DONE = {"content": [{"type": "text", "text": "done"}]}


class Responder:
    def __init__(self, rounds: int) -> None:
        self.left = rounds

    def __call__(self, body: dict) -> dict:
        self.left -= 1
        return TURN if self.left >= 0 else DONE


def serve(rounds: int) -> None:
    """The server process: print the URL, serve until stdin closes, then print its CPU seconds."""
    server = LoopbackServer(Responder(rounds)).start()
    print(server.url, flush=True)
    start = time.process_time()
    sys.stdin.read()
    print(time.process_time() - start, flush=True)
    server.stop()


class ServerProcess:
    """A loopback server in a child process, so its CPU time is not the client's."""

    def __init__(self, rounds: int) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(rounds)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def stop(self) -> float:
        """Stop it; its CPU seconds while serving."""
        out, _ = self.proc.communicate("", timeout=60)
        return float(out.strip().splitlines()[-1])


def seed_history(wiring, turns: int) -> None:  # type: ignore[no-untyped-def]
    session = wiring.session
    session.append_message("user", [TextBlock(text="start")])
    for i in range(turns):
        session.append_message("assistant", [TextBlock(text=NARRATION), ToolUseBlock(id=f"seed_{i}", name="bash", input={"command": "true"})])
        session.append_message("user", [ToolResultBlock(tool_use_id=f"seed_{i}", content="ok " * 100)])
    session.append_message("assistant", [TextBlock(text="seeded")])


async def round_trips(turns: int, rounds: int) -> dict[str, float]:
    """Per round trip, in ms: end to end, client CPU, server CPU, harness."""
    server = ServerProcess(rounds)
    root = Path(tempfile.mkdtemp())
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="bench", max_retries=0)
    wiring = build(root, Settings(), AnthropicModel(client, retries=0), "claude-sonnet-5-5")
    seed_history(wiring, turns)
    wall, cpu = time.perf_counter(), time.process_time()
    async with aclosing(wiring.agent.run("go")) as events:
        async for _ in events:
            pass
    n = rounds + 1
    figures = {"end to end": (time.perf_counter() - wall) / n, "client CPU": (time.process_time() - cpu) / n}
    figures["server CPU"] = server.stop() / n
    harness = []
    for _ in range(20):
        t0 = time.perf_counter()
        wiring.session.request_and_size()
        harness.append(time.perf_counter() - t0)
    figures["harness"] = statistics.median(harness)
    return {k: v * 1000 for k, v in figures.items()}


def append_cost(n: int = 500) -> float:
    writer = HistoryWriter(Path(tempfile.mkdtemp()) / "h.jsonl")
    record = {"role": "assistant", "content": [{"type": "text", "text": NARRATION * 3}]}
    t0 = time.perf_counter()
    for _ in range(n):
        writer.append(rec.MessageAdded(**record))
    writer.close()
    return (time.perf_counter() - t0) / n * 1000


async def first_request_bytes() -> int:
    root = Path(tempfile.mkdtemp())
    client = anthropic.AsyncAnthropic(base_url="http://127.0.0.1:9", api_key="bench", max_retries=0)
    wiring = build(root, Settings(), AnthropicModel(client, retries=0), "claude-sonnet-5-5")
    wiring.session.append_message("user", [TextBlock(text="fix the failing test")])
    return wiring.session.request_and_size()[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", type=int, metavar="ROUNDS", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=30, help="round trips per history size (default 30)")
    parser.add_argument("--turns", default="10,1000", help="history sizes, comma-separated (default 10,1000)")
    ns = parser.parse_args()
    if ns.serve is not None:
        return serve(ns.serve)
    print(f"rhapsody from {Path(rhapsody.__file__).parent}, anthropic {anthropic.__version__}")
    columns = ("end to end", "client CPU", "server CPU", "harness")
    print(f"{'history turns':>13} " + " ".join(f"{c + ' ms':>13}" for c in columns))
    for turns in (int(t) for t in ns.turns.split(",")):
        figures = asyncio.run(round_trips(turns, ns.rounds))
        print(f"{turns:>13,} " + " ".join(f"{figures[c]:>13.2f}" for c in columns))
    print(f"history append with fsync: {append_cost():.3f} ms")
    print(f"first request of a session: {asyncio.run(first_request_bytes()):,} bytes")


if __name__ == "__main__":
    main()
