"""Benchmark: the full-screen app's own CPU from `run_test()` entering to its first idle frame.

    python bench/app_start.py [--starts 10] [--keys 40] [--repeat 3] [--profile PATH]

Each start builds the app as the suite does (`RhapsodyApp` on a fresh wiring, no request sent)
and times, with `time.process_time()`, `App.run_test(size=(120, 40))` entering until the app is
idle (`pilot.pause()` and its scheduled animations), then the exit. `--keys` characters are then
typed into the prompt of the last app, each waited for. The median of `--repeat` rounds is
printed, with the range. With `--profile PATH` one round runs under cProfile (stats to PATH).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

TYPED = "please check the parser again and run the slow tests after it, then commit"


def make_app() -> Any:
    import anthropic

    from rhapsody.config.settings import Settings
    from rhapsody.frontends.app.app import RhapsodyApp
    from rhapsody.providers.anthropic import AnthropicModel
    from rhapsody.wiring import build

    client = anthropic.AsyncAnthropic(base_url="http://127.0.0.1:9", api_key="bench", max_retries=0)
    wiring = build(Path(tempfile.mkdtemp()), Settings(permission_mode="yolo", sandbox="off"),
                   AnthropicModel(client, retries=0), "claude-sonnet-5-5")
    return RhapsodyApp(wiring.agent, wiring.settings)


async def one_round(starts: int, keys: int, profile: cProfile.Profile | None) -> tuple[float, float]:
    from textual import events

    start_cpu = 0.0
    key_cpu = 0.0
    for index in range(starts):
        app = make_app()
        begin = time.process_time()
        if profile is not None:
            profile.enable()
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.wait_for_scheduled_animations()
            start_cpu += time.process_time() - begin
            if index == starts - 1 and keys:
                begin = time.process_time()
                for character in TYPED[:keys]:
                    app.post_message(events.Key(character, character))
                    await pilot.pause()
                key_cpu = time.process_time() - begin
            begin = time.process_time()
        if profile is not None:
            profile.disable()
        start_cpu += time.process_time() - begin
    return start_cpu, key_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path)
    ns = parser.parse_args()
    profile = cProfile.Profile() if ns.profile else None
    make_app()  # imports, once, outside the clock
    rounds = [asyncio.run(one_round(ns.starts, ns.keys, profile)) for _ in range(1 if profile else ns.repeat)]
    if profile is not None:
        profile.dump_stats(ns.profile)
    starts = [r[0] / ns.starts for r in rounds]
    keys = [r[1] / max(ns.keys, 1) for r in rounds]
    print(f"app start to first idle and exit: {statistics.median(starts) * 1000:.0f} ms a start "
          f"({min(starts) * 1000:.0f}–{max(starts) * 1000:.0f}), median of {len(rounds)} rounds of {ns.starts}")
    print(f"typing into the prompt: {statistics.median(keys) * 1000:.2f} ms a key "
          f"({min(keys) * 1000:.2f}–{max(keys) * 1000:.2f}), {ns.keys} keys")


if __name__ == "__main__":
    main()
