"""Benchmark: the app's first paint, resume of a long session, and typing while text streams.

    python bench/tui_bench.py

- first paint of a new session (goal under 1 s);
- resume of a session of 2,000 messages and 5,000 tool calls: from app start to the
  transcript painted (goal under 1 s);
- event-loop stalls while a long reply streams at full speed from the loopback server,
  sampled by a 5 ms ticker (a stall is what a keystroke would wait), plus how long a
  keystroke's text takes to reach the prompt mid-stream.
"""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import asyncio
import gc
import tempfile
import time
from pathlib import Path

import anthropic

from rhapsody.providers.anthropic import AnthropicModel
from rhapsody.config.settings import Settings
from rhapsody.core.session.messages import TextBlock, ToolResultBlock, ToolUseBlock
from rhapsody.loopback.server import LoopbackServer
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.widgets import PromptInput
from rhapsody.wiring import build

NARRATION = "I will run the five checks together, because they are independent and each takes a second."


def wiring_for(root: Path, responder):  # type: ignore[no-untyped-def]
    server = LoopbackServer(responder).start()
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="bench", max_retries=0)
    return server, build(root, Settings(), AnthropicModel(client, retries=0), "claude-sonnet-5-5")


def seed(wiring, assistant_messages: int = 1000, calls_per_message: int = 5) -> None:  # type: ignore[no-untyped-def]
    session = wiring.session
    session.append_message("user", [TextBlock(text="audit every module")])
    for i in range(assistant_messages):
        calls = [ToolUseBlock(id=f"t{i}_{j}", name="bash", input={"command": f"pytest -q tests/test_{j}.py"})
                 for j in range(calls_per_message)]
        session.append_message("assistant", [TextBlock(text=f"{NARRATION} (round {i})"), *calls])
        results = [ToolResultBlock(tool_use_id=c.id, content="3 passed in 0.4s\n" * 5) for c in calls]
        session.append_message("user", list(results))
    session.append_message("assistant", [TextBlock(text="All rounds done.")])


async def paint_time(app: RhapsodyApp) -> float:
    start = time.perf_counter()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        elapsed = time.perf_counter() - start
        await pilot.exit(0)
    return elapsed


async def streaming_stalls() -> tuple[float, float, float, int]:
    paragraph = "Streaming narration at full speed, measured and inferred claims alike. " * 6
    text = "\n\n".join([paragraph] * 100)
    root = Path(tempfile.mkdtemp())
    server, wiring = wiring_for(root, lambda body: {"content": [{"type": "text", "text": text}]})
    app = RhapsodyApp(wiring.agent, wiring.settings)
    gaps: list[float] = []
    typed: list[float] = []
    async with app.run_test(size=(120, 40)) as pilot:
        app.start_turn("talk")
        prompt = app.query_one(PromptInput)
        last = time.perf_counter()
        while app.transcript.live is None:
            await asyncio.sleep(0.005)
        while app.busy:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last - 0.005)
            last = now
            if len(gaps) % 20 == 0:
                t0 = time.perf_counter()
                prompt.insert("x")
                await asyncio.sleep(0)
                typed.append(time.perf_counter() - t0)
        await pilot.exit(0)
    server.stop()
    gaps.sort()
    return max(gaps) * 1000, gaps[int(len(gaps) * 0.99)] * 1000, max(typed or [0]) * 1000, len(text)


async def main() -> None:
    root = Path(tempfile.mkdtemp())
    server, wiring = wiring_for(root, lambda body: {"content": []})
    print(f"first paint, new session: {await paint_time(RhapsodyApp(wiring.agent, wiring.settings)):.2f} s")
    seed(wiring)
    start = time.perf_counter()
    resumed = build(root, Settings(), wiring.agent.model, None, continue_last=True)
    gc.freeze()  # as `rhapsody --resume` does
    load = time.perf_counter() - start
    records = dumped(resumed.session.records)
    messages = sum(1 for r in records if r["kind"] == "message")
    calls = sum(len([b for b in r["content"] if b.get("type") == "tool_use"]) for r in records if r["kind"] == "message")
    paint = await paint_time(RhapsodyApp(resumed.agent, resumed.settings))
    print(f"resume of {messages:,} messages, {calls:,} tool calls: load {load:.2f} s + paint {paint:.2f} s = {load + paint:.2f} s")
    server.stop()
    worst, p99, typed, chars = await streaming_stalls()
    print(f"streaming {chars:,} chars: event-loop stall max {worst:.1f} ms, p99 {p99:.1f} ms; keystroke insert max {typed:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
