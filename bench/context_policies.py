"""Compare context policies on the recorded sessions in history/, priced with prompt caching.

    python bench/context_policies.py [history/*.jsonl]

For every request of a recorded session, the messages the model would have seen are
rebuilt under each policy:

- none: everything kept;
- seam/50: a micro-handoff strip after every 50 tool calls (the field note's own size is
  not added, so this slightly flatters it);
- rolling: rhapsody's rolling policy (3 verbatim rounds, 6 working, cut when 6 over);
- mask/10: per-round observation masking, tool traffic older than the newest 10 rounds
  dropped at every request (the prefix changes every time).

Tokens are estimated as JSON characters / 4. Cost assumes a cache breakpoint on the
newest message: the part of a request equal to the previous request's prefix is read from
cache (0.1x base input), the rest is written (1.25x). Figures are in base-input tokens.
"""

from __future__ import annotations

import glob
import json
import sys
from pathlib import Path
from typing import Callable

from rhapsody.core.session.history import read_history
from rhapsody.core.session.messages import Message
from rhapsody.core.session.rolling import RollingPolicy, plan_cut
from rhapsody.core.session.strip import compact, drop_tool_ids, strip

READ, WRITE = 0.1, 1.25
REPO = Path(__file__).resolve().parent.parent


def requests(records: list[dict]) -> tuple[list[Message], list[int]]:
    """All messages, and for each request the number of messages it carried (before seams)."""
    messages, counts = [], []
    for r in records:
        if r["kind"] == "message":
            messages.append(Message(role=r["role"], content=r["content"]))
        elif r["kind"] == "request":
            counts.append(len(messages))
    return messages, counts


def calls_before(messages: list[Message], n: int) -> int:
    return sum(len(m.tool_uses()) for m in messages[:n])


def policy_none(messages: list[Message], n: int, state: dict) -> list[Message]:
    return compact(messages[:n])


def policy_seam(messages: list[Message], n: int, state: dict) -> list[Message]:
    calls = calls_before(messages, n)
    if calls // 50 > state.get("seams", 0):
        state["seams"] = calls // 50
        state["boundary"] = n
    return strip(messages[:n], state.get("boundary", 0))


def policy_rolling(messages: list[Message], n: int, state: dict) -> list[Message]:
    pruned = state.setdefault("pruned", set())
    pruned.update(plan_cut(messages[:n], pruned, RollingPolicy()))
    return compact(drop_tool_ids(messages[:n], pruned))


def policy_mask(messages: list[Message], n: int, state: dict) -> list[Message]:
    rounds = [m for m in messages[:n] if m.role == "assistant" and m.tool_uses()]
    old = {b.id for m in rounds[:-10] for b in m.tool_uses()}
    return compact(drop_tool_ids(messages[:n], old))


POLICIES: dict[str, Callable[[list[Message], int, dict], list[Message]]] = {
    "none": policy_none, "seam/50": policy_seam, "rolling": policy_rolling, "mask/10": policy_mask,
}


def tokens(message: Message) -> int:
    return len(json.dumps(message.to_api(), ensure_ascii=False)) // 4


def simulate(messages: list[Message], counts: list[int], head: int, policy: Callable) -> tuple[float, float]:
    state: dict = {}
    previous: list[str] = []
    billed, total = 0.0, 0
    for n in counts:
        view = policy(messages, n, state)
        keys = [json.dumps(m.to_api(), sort_keys=True) for m in view]
        sizes = [tokens(m) for m in view]
        common = 0
        while common < min(len(keys), len(previous)) and keys[common] == previous[common]:
            common += 1
        cached = head + sum(sizes[:common]) if previous else 0
        size = head + sum(sizes)
        billed += cached * READ + (size - cached) * WRITE
        total += size
        previous = keys
    return total / len(counts), billed


def main() -> None:
    files = sys.argv[1:] or sorted(glob.glob(str(REPO / "history" / "*.jsonl")))
    for file in files:
        records = read_history(Path(file)).records
        head_record = records[0]
        head = (len(head_record["system"]) + len(json.dumps(head_record["tools"]))) // 4
        messages, counts = requests(records)
        print(f"{Path(file).name}: {len(counts)} requests, {calls_before(messages, len(messages))} tool calls")
        base = None
        print(f"  {'policy':<8} {'mean tokens/request':>20} {'billed input (cached)':>22} {'vs none':>8}")
        for name, policy in POLICIES.items():
            mean, billed = simulate(messages, counts, head, policy)
            base = base or billed
            print(f"  {name:<8} {mean:>20,.0f} {billed:>22,.0f} {billed / base:>7.2f}x")


if __name__ == "__main__":
    main()
