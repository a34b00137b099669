"""Time to consume a large streamed reply: the bare SDK against rhapsody's provider and loop.

    python bench/stream_bench.py [--sizes 1,2,4] [--repeat 3] [--helper]

The loopback server streams one text reply of N MB in 40-character deltas (as the API
does, roughly). Each size is consumed by:
- `sdk raw`: the SDK iterating the raw event stream (`messages.create(stream=True)`),
  the floor for any consumer of the stream;
- `rhapsody provider`: `AnthropicModel.stream`, which assembles the message;
- `rhapsody turn`: a whole headless turn (`Agent.run` rendered by `print_event` into a
  buffer, the history append included);
- with `--app`, `app`: the full-screen app under Textual's Pilot, from the task to idle;
- with `--helper`, `sdk MessageStream`: the SDK's own accumulating helper
  (`messages.stream()` + `get_final_message()`), which rhapsody used before.
The median of `--repeat` runs is printed, with the ratio to `sdk raw`.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anthropic

from rhapsody.providers.anthropic import AnthropicModel
from rhapsody.config.settings import Settings
from rhapsody.frontends.headless import print_event
from rhapsody.loopback.server import LoopbackServer
from rhapsody.wiring import build

MODEL = "claude-sonnet-5-5"
BODY = {"model": MODEL, "max_tokens": 64000, "messages": [{"role": "user", "content": "write a lot"}]}


def reply(megabytes: float) -> dict[str, Any]:
    line = "the parser fails on empty input because the guard checks len before strip\n"
    text = (line * (int(megabytes * 1_000_000) // len(line) + 1))[: int(megabytes * 1_000_000)]
    return {"content": [{"type": "text", "text": text}]}


async def sdk_raw(client: anthropic.AsyncAnthropic) -> int:
    stream = await client.messages.create(**BODY, stream=True)
    n = 0
    async with stream:
        async for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                n += len(event.delta.text)
    return n


async def sdk_helper(client: anthropic.AsyncAnthropic) -> int:
    async with client.messages.stream(**BODY) as stream:
        async for _ in stream:
            pass
        final = await stream.get_final_message()
    return sum(len(b.text) for b in final.content if b.type == "text")


async def provider(client: anthropic.AsyncAnthropic) -> int:
    model = AnthropicModel(client, retries=0)
    n = 0
    async for event in model.stream(BODY):
        if type(event).__name__ == "ModelResponse":
            n = sum(len(t) for t in event.message.texts())  # type: ignore[union-attr]
    return n


def turn_runner(root: Path) -> Callable[[anthropic.AsyncAnthropic], Awaitable[int]]:
    async def turn(client: anthropic.AsyncAnthropic) -> int:
        wiring = build(root, Settings(permission_mode="read-only"), AnthropicModel(client, retries=0), MODEL)
        out = io.StringIO()
        async for event in wiring.agent.run("write a lot"):
            print_event(event, out)
        return len(out.getvalue())
    return turn


def app_runner(root: Path) -> Callable[[anthropic.AsyncAnthropic], Awaitable[int]]:
    async def app_turn(client: anthropic.AsyncAnthropic) -> int:
        from rhapsody.frontends.app.app import RhapsodyApp

        wiring = build(root, Settings(permission_mode="read-only"), AnthropicModel(client, retries=0), MODEL)
        app = RhapsodyApp(wiring.agent, wiring.settings)
        async with app.run_test(size=(120, 40)) as pilot:
            app.start_turn("write a lot")
            while not app.busy:
                await asyncio.sleep(0.005)
            while app.busy:
                await asyncio.sleep(0.01)
            await pilot.exit(0)
        return 0
    return app_turn


def measure(url: str, consumer: Callable[[anthropic.AsyncAnthropic], Awaitable[int]], repeat: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(repeat):
        client = anthropic.AsyncAnthropic(base_url=url, api_key="k", max_retries=0, timeout=600)
        start = time.perf_counter()
        size = asyncio.run(consumer(client))
        times.append(time.perf_counter() - start)
    return statistics.median(times), size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,2,4", help="reply sizes in MB, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--helper", action="store_true", help="also time the SDK's MessageStream helper")
    parser.add_argument("--app", action="store_true", help="also time the full-screen app (Pilot, headless)")
    ns = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="stream-bench-"))
    consumers: dict[str, Callable[[anthropic.AsyncAnthropic], Awaitable[int]]] = {
        "sdk raw": sdk_raw, "rhapsody provider": provider, "rhapsody turn": turn_runner(root)}
    if ns.helper:
        consumers["sdk MessageStream"] = sdk_helper
    if ns.app:
        consumers["app"] = app_runner(root)
    print("| reply | " + " | ".join(consumers) + " |")
    print("| --- |" + " --- |" * len(consumers))
    for mb in (float(s) for s in ns.sizes.split(",")):
        turn = reply(mb)
        server = LoopbackServer(lambda body: turn).start()
        try:
            cells, base = [], 0.0
            for name, consumer in consumers.items():
                seconds, _ = measure(server.url, consumer, ns.repeat)
                base = base or seconds
                cells.append(f"{seconds:.2f} s" + ("" if name == "sdk raw" else f" ({seconds / base:.2f}×)"))
            print(f"| {mb:g} MB | " + " | ".join(cells) + " |", flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
