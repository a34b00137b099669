"""Benchmark: strip of a 2,000-tool-call, ~1.5 MB conversation, and of 4x that size.

    python bench/strip_bench.py

Goal: under 50 ms for the 1.5 MB conversation, and linear in size. Each size is timed with
Python's garbage collector as it is, and with the conversation frozen out of collection
(`gc.freeze()`), which separates the strip's own cost from collections its objects trigger.
"""

from __future__ import annotations

import gc
import json
import statistics
import time

from common import conversation

from rhapsody.core.session.messages import Request
from rhapsody.core.session.strip import authored_sha256, strip, validity_problems


def bench(tool_calls: int, result_chars: int, frozen: bool) -> tuple[int, float, float]:
    body = {"model": "m", "max_tokens": 1, "messages": conversation(tool_calls, result_chars)}
    size = len(json.dumps(body, separators=(",", ":")).encode())
    request = Request.from_api(body)
    gc.collect()
    if frozen:
        gc.freeze()
    strip_times, audit_times = [], []
    for _ in range(7):
        t0 = time.perf_counter()
        after = strip(request.messages)
        t1 = time.perf_counter()
        assert authored_sha256(after) == authored_sha256(request.messages) and not validity_problems(after)
        t2 = time.perf_counter()
        strip_times.append(t1 - t0)
        audit_times.append(t2 - t1)
    gc.unfreeze()
    return size, statistics.median(strip_times) * 1000, statistics.median(audit_times) * 1000


def main() -> None:
    print(f"{'tool calls':>10} {'bytes':>11} {'gc':>7} {'strip ms':>9} {'audit ms':>9}")
    for frozen in (False, True):
        for calls in (2000, 8000):
            size, strip_ms, audit_ms = bench(calls, 420, frozen)
            mode = "frozen" if frozen else "on"
            print(f"{calls:>10,} {size:>11,} {mode:>7} {strip_ms:>9.1f} {audit_ms:>9.1f}")


if __name__ == "__main__":
    main()
