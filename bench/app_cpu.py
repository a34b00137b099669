"""Benchmark: the full-screen app's own CPU for what a person waits on, part by part.

    python bench/app_cpu.py [--repeat 3] [--delay 0.02] [--profile PATH]

The real app runs headless (Textual's `App.run_test()`, 120x40) against the loopback server,
which runs in a child process so that its CPU is not counted. Each part is timed with
`time.process_time()` deltas of the app's process (the app, the agent, the SDK's stream read):

- `stream`: a reply of 200 streamed deltas (40 characters each, paragraphs, a list and a code
  block), `--delay` seconds between them as a model paces them, from the turn's start to idle;
- `tool call`: a narrated `bash` call whose output is 300 lines, then a one-line reply;
- `up/down`: 30 keys (15 Up, 15 Down) through a 70-entry transcript, each waited for until the
  focus moved;
- `typing`: 61 characters typed into the prompt, one key event each, each waited for until the prompt
  holds it (a person types slower than the app draws).

Each part runs `--repeat` times in one app; the median is printed, with the range. With
`--profile PATH`, the parts run once under cProfile and the stats are written to PATH.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPLY_DELTAS = 200
KEYS = 30
TOOL_TASK = "list the numbers"
TYPED = "please check the parser again and run the slow tests after it"


def reply_text() -> str:
    """Markdown of exactly REPLY_DELTAS × 40 characters: paragraphs, a list, a code block."""
    paragraph = ("The parser fails on empty input because the guard checks the length before it strips "
                 "the line, so a blank line reaches the tokenizer and raises there instead of here. ")
    parts = [paragraph * 3, "- the guard moves above the strip\n- the test expects a ValueError\n- one fixture row",
             "```python\ndef parse(line: str) -> list[str]:\n    if not line.strip():\n"
             "        raise ValueError('empty')\n    return line.split()\n```", paragraph * 4]
    text = "\n\n".join(parts * 4)
    size = REPLY_DELTAS * 40
    return (text * (size // len(text) + 1))[:size]


def respond(delay: float) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The server's answer to each request, by what it asks, so that any part can run alone or repeated."""
    reply = {"content": [{"type": "text", "text": reply_text()}], "delay": delay}
    call = {"content": [{"type": "text", "text": "I will list the numbers, because the output is long."},
                        {"type": "tool_use", "name": "bash", "input": {"command": "seq 1 300"}}], "delay": delay}
    answer = {"content": [{"type": "text", "text": "The numbers are listed."}], "delay": delay}

    def turn(body: dict[str, Any]) -> dict[str, Any]:
        content = body["messages"][-1]["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if any(block.get("type") == "tool_result" for block in blocks):
            return answer
        return call if any(TOOL_TASK in str(block.get("text", "")) for block in blocks) else reply

    return turn


def serve(delay: float) -> None:
    """The server process: print the URL, serve until stdin closes."""
    from rhapsody.loopback.server import LoopbackServer

    server = LoopbackServer(respond(delay)).start()
    print(server.url, flush=True)
    sys.stdin.read()
    server.stop()


class ServerProcess:
    """A loopback server in a child process, so its CPU time is not the app's."""

    def __init__(self, delay: float) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", json.dumps(delay)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()

    def stop(self) -> None:
        """Stop it."""
        self.proc.communicate("", timeout=60)


async def until(condition: Callable[[], object], within: float = 30.0) -> None:
    """Wait for `condition()`, polling often enough that the wait adds little time and less CPU."""
    end = time.monotonic() + within
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError("the app did not get there")
        await asyncio.sleep(0.002)


async def settle(pilot: Any) -> None:
    """Let the app finish what the part started (layout, paint) before the clock stops."""
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()


async def stream_part(app: Any, pilot: Any) -> None:
    app.start_turn("explain the parser bug")
    await until(lambda: app.busy)
    await until(lambda: not app.busy)
    await settle(pilot)


async def tool_part(app: Any, pilot: Any) -> None:
    app.start_turn(TOOL_TASK)
    await until(lambda: app.busy)
    await until(lambda: not app.busy)
    await settle(pilot)


async def keys_part(app: Any, pilot: Any) -> None:
    from rhapsody.frontends.app.widgets import Foldable

    app.action_to_transcript()
    await settle(pilot)
    for i in range(KEYS):
        before = app.focused
        app.post_message(_key("up" if i < KEYS // 2 else "down"))
        await until(lambda: app.focused is not before and isinstance(app.focused, Foldable))
    await settle(pilot)
    app.prompt.focus()
    await settle(pilot)


async def typing_part(app: Any, pilot: Any) -> None:
    prompt = app.prompt
    prompt.focus()
    await settle(pilot)
    for n, char in enumerate(TYPED, 1):  # each key waited for, as a person types: a frame each
        app.post_message(_key("space" if char == " " else char, char))
        await until(lambda: len(prompt.text) == n)
    await settle(pilot)
    prompt.text = ""
    await settle(pilot)


def _key(key: str, character: str | None = None) -> Any:
    from textual import events

    return events.Key(key, character)


async def seventy_entries(app: Any, pilot: Any) -> None:
    from rhapsody.frontends.app.widgets import Entry

    await app.transcript.load([Entry("tool", f"bash pytest -q tests/test_{i}.py → exit 0 (0.4 s)", "3 passed\n" * 3,
                                     f"t{i}", "exit") for i in range(70)])
    await settle(pilot)


PARTS: dict[str, tuple[Callable[[Any, Any], Awaitable[None]], Callable[[Any, Any], Awaitable[None]] | None]] = {
    "stream": (stream_part, None),
    "tool call": (tool_part, None),
    "up/down": (keys_part, seventy_entries),
    "typing": (typing_part, None),
}
"""Each part, and what is set up before its clock starts."""


async def run(repeat: int, delay: float, profile: cProfile.Profile | None, names: list[str]) -> dict[str, list[float]]:
    import anthropic

    from rhapsody.config.settings import Settings
    from rhapsody.frontends.app.app import RhapsodyApp
    from rhapsody.providers.anthropic import AnthropicModel
    from rhapsody.wiring import build

    server = ServerProcess(delay)
    root = Path(tempfile.mkdtemp())
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="bench", max_retries=0)
    wiring = build(root, Settings(permission_mode="yolo", sandbox="off"), AnthropicModel(client, retries=0),
                   "claude-sonnet-5-5")
    app = RhapsodyApp(wiring.agent, wiring.settings)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            for _ in range(repeat):
                for name in names:
                    part, setup = PARTS[name]
                    if setup is not None:
                        await setup(app, pilot)
                    start = time.process_time()
                    if profile is not None:
                        profile.enable()
                    await part(app, pilot)
                    if profile is not None:
                        profile.disable()
                    cpu[name].append(time.process_time() - start)
    finally:
        server.stop()
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.02, help="seconds between streamed events")
    parser.add_argument("--profile", type=Path, help="run each part once under cProfile; write the stats here")
    parser.add_argument("--parts", default=",".join(PARTS), help="the parts to run, by name, comma-separated")
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.serve:
        return serve(json.loads(ns.serve))
    profile = cProfile.Profile() if ns.profile else None
    names = [name.strip() for name in ns.parts.split(",")]
    unknown = [name for name in names if name not in PARTS]
    if unknown:
        parser.error(f"unknown part {unknown[0]!r} (the parts: {', '.join(PARTS)})")
    cpu = asyncio.run(run(1 if profile else ns.repeat, ns.delay, profile, names))
    if profile is not None:
        profile.dump_stats(ns.profile)
    print(f"app CPU per part (median of {len(next(iter(cpu.values())))}, range), {REPLY_DELTAS} deltas at {ns.delay} s, "
          f"{KEYS} keys, {len(TYPED)} characters")
    for name, seconds in cpu.items():
        per = {"up/down": KEYS, "typing": len(TYPED)}.get(name)
        each = f"   {statistics.median(seconds) / per * 1000:.1f} ms a key" if per else ""
        print(f"  {name:<10} {statistics.median(seconds):6.3f} s  ({min(seconds):.3f}–{max(seconds):.3f}){each}")


if __name__ == "__main__":
    main()
