"""Helpers shared by the benchmark scripts: synthetic conversations of a given size."""

from __future__ import annotations

import random
from typing import Any

WORDS = ("the parser fails on empty input because the guard checks len before strip and the test "
         "expects a ValueError measured at line 88 of parser.py while the fixture builds three rows").split()


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def conversation(tool_calls: int, result_chars: int = 600, seed: int = 7) -> list[dict[str, Any]]:
    """A request's messages: user task, then narrated tool calls with results and some hints."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the parser and keep the tests green."}]
    for i in range(tool_calls):
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": sentence(rng, 30)},
            {"type": "tool_use", "id": f"toolu_{i:06d}", "name": "bash", "input": {"command": f"pytest -q tests/test_{i % 40}.py"}},
        ]})
        content: list[dict[str, Any]] = [{"type": "tool_result", "tool_use_id": f"toolu_{i:06d}",
                                          "content": sentence(rng, result_chars // 6)[:result_chars]}]
        if i % 25 == 24:
            content.append({"type": "text", "text": "hint: " + sentence(rng, 8)})
        messages.append({"role": "user", "content": content})
    messages.append({"role": "assistant", "content": [{"type": "text", "text": "Done: " + sentence(rng, 20)}]})
    return messages
