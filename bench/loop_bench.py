"""Benchmark: harness overhead per tool round trip, at 10 and 1,000 turns of history.

    python bench/loop_bench.py

Each round trip is one request to the loopback server (zero delay), the streamed answer
(narration plus one tool call), the tool run (`find_files` on an empty folder) and the
history appends. "end to end" includes the SDK, HTTP and the server thread; "harness"
is rhapsody's own share: building the request from the history view, measuring it, and
appending the records. Also reported: one history append with fsync, and the weight of
the first request of a session (system prompt plus tool definitions).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from contextlib import aclosing
from pathlib import Path

import anthropic

from rhapsody.providers.anthropic import AnthropicModel
from rhapsody.config.settings import Settings
from rhapsody.core.history import HistoryWriter
from rhapsody.core.messages import TextBlock, ToolResultBlock, ToolUseBlock
from rhapsody.loopback.server import LoopbackServer
from rhapsody.wiring import build

NARRATION = "I will list the files matching a pattern to check the layout before the next change."
TURN = {"content": [{"type": "text", "text": NARRATION}, {"type": "tool_use", "name": "find_files", "input": {"pattern": "*.none"}}]}
DONE = {"content": [{"type": "text", "text": "done"}]}


class Responder:
    def __init__(self, rounds: int) -> None:
        self.left = rounds

    def __call__(self, body: dict) -> dict:
        self.left -= 1
        return TURN if self.left >= 0 else DONE


def seed_history(wiring, turns: int) -> None:  # type: ignore[no-untyped-def]
    session = wiring.session
    session.append_message("user", [TextBlock(text="start")])
    for i in range(turns):
        session.append_message("assistant", [TextBlock(text=NARRATION), ToolUseBlock(id=f"seed_{i}", name="bash", input={"command": "true"})])
        session.append_message("user", [ToolResultBlock(tool_use_id=f"seed_{i}", content="ok " * 100)])
    session.append_message("assistant", [TextBlock(text="seeded")])


async def round_trips(turns: int, rounds: int) -> tuple[float, float]:
    server = LoopbackServer(Responder(rounds)).start()
    root = Path(tempfile.mkdtemp())
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="bench", max_retries=0)
    wiring = build(root, Settings(), AnthropicModel(client, retries=0), "claude-sonnet-5-5")
    seed_history(wiring, turns)
    start = time.perf_counter()
    async with aclosing(wiring.agent.run("go")) as events:
        async for _ in events:
            pass
    end_to_end = (time.perf_counter() - start) / (rounds + 1)
    harness = []
    for _ in range(20):
        t0 = time.perf_counter()
        wiring.session.request_and_size()
        harness.append(time.perf_counter() - t0)
    server.stop()
    return end_to_end * 1000, statistics.median(harness) * 1000


def append_cost(n: int = 500) -> float:
    writer = HistoryWriter(Path(tempfile.mkdtemp()) / "h.jsonl")
    record = {"role": "assistant", "content": [{"type": "text", "text": NARRATION * 3}]}
    t0 = time.perf_counter()
    for _ in range(n):
        writer.append("message", **record)
    writer.close()
    return (time.perf_counter() - t0) / n * 1000


async def first_request_bytes() -> int:
    root = Path(tempfile.mkdtemp())
    client = anthropic.AsyncAnthropic(base_url="http://127.0.0.1:9", api_key="bench", max_retries=0)
    wiring = build(root, Settings(), AnthropicModel(client, retries=0), "claude-sonnet-5-5")
    wiring.session.append_message("user", [TextBlock(text="fix the failing test")])
    return wiring.session.request_and_size()[1]


def main() -> None:
    print(f"{'history turns':>13} {'end to end ms':>14} {'harness ms':>11}")
    for turns in (10, 1000):
        e2e, harness = asyncio.run(round_trips(turns, 30))
        print(f"{turns:>13,} {e2e:>14.2f} {harness:>11.2f}")
    print(f"history append with fsync: {append_cost():.3f} ms")
    print(f"first request of a session: {asyncio.run(first_request_bytes()):,} bytes")


if __name__ == "__main__":
    main()
