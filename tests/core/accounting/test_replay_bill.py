"""The replay of a session as it happened is its bill: every figure of a small imported session, with
1-hour writes, two models and a pause longer than five minutes, reproduced by hand."""

from __future__ import annotations

from rhapsody.core.session.records import parsed
import json
import subprocess
from pathlib import Path
from typing import Any

from rhapsody.core.accounting import billing
from rhapsody.core.session.history import read_history

from tests import launch
from tests.transcripts import dump

OPUS, HAIKU = "claude-opus-4-6", "claude-haiku-4-5-20251001"
PREFIX = {OPUS: 20_000, HAIKU: 8_000}
"""Tokens of the source's own system prompt and tools per model, which the transcript does not hold."""
TTL = {OPUS: 3600, HAIKU: 300}
"""Claude Code's writes: 1-hour for the main model, 5-minute for Haiku."""
PLAN = [(OPUS, 0), (OPUS, 30), (HAIKU, 60), (HAIKU, 660), (OPUS, 690)]
"""(model, seconds from the start) of each request: ten minutes pass before the fourth."""
IN = {OPUS: 5.0, HAIKU: 1.0}
OUT = {OPUS: 25.0, HAIKU: 5.0}
"""Dollars per million tokens (the price table, core/pricing.py)."""


def session(tmp: Path) -> tuple[Path, list[dict[str, int]]]:
    """A Claude Code transcript whose usage is what a per-model prompt cache with those TTLs reports."""
    lines: list[dict[str, Any]] = []
    usages: list[dict[str, int]] = []
    cache: dict[str, tuple[int, float]] = {}
    parent, conversation = None, 0

    def add(kind: str, t: float, **fields: Any) -> None:
        nonlocal parent
        stamp = f"2025-11-20T10:{int(t // 60):02d}:{t % 60:06.3f}Z"
        lines.append({"parentUuid": parent, "isSidechain": False, "type": kind, "uuid": f"u{len(lines)}",
                      "timestamp": stamp, "sessionId": "s-bill", "cwd": "/p", "version": "2.1.39", **fields})
        parent = lines[-1]["uuid"]

    prompt = "Count the values in every file."
    add("user", 0, message={"role": "user", "content": prompt})
    conversation += len(json.dumps(prompt)) // 4
    for i, (model, t) in enumerate(PLAN):
        total = PREFIX[model] + conversation
        cached, last = cache.get(model, (0, -1e9))
        read = cached if t - last <= TTL[model] else 0  # the entry is cold once its TTL has passed
        written = total - read - 3
        hour = written if TTL[model] == 3600 else 0
        usages.append({"input_tokens": 3, "cache_creation_input_tokens": written, "cache_read_input_tokens": read,
                       "cache_creation_1h_input_tokens": hour, "output_tokens": 50})
        cache[model] = (total - 3, t)
        call = {"type": "tool_use", "id": f"toolu_{i}", "name": "Bash", "input": {"command": f"wc -l file{i}"}}
        usage = {**{k: v for k, v in usages[-1].items() if k != "cache_creation_1h_input_tokens"},
                 "cache_creation": {"ephemeral_5m_input_tokens": written - hour, "ephemeral_1h_input_tokens": hour}}
        add("assistant", t, message={"model": model, "id": f"msg_{i}", "role": "assistant", "type": "message",
                                     "content": [call], "stop_reason": "tool_use", "usage": usage})
        output = "\n".join(f"file{i}:{n}: value_{n} = {n * 7}" for n in range(300))
        add("user", t + 5, message={"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"],
                                                                  "content": output}]})
        conversation += (len(json.dumps([call])) + len(json.dumps(output))) // 4
    return dump(lines, tmp / "bill.jsonl"), usages


def rhapsody(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return launch.run(list(args), cwd=cwd, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)}, timeout=120)


def by_hand(usage: dict[str, int] | billing.Split, model: str) -> float:
    """Dollars of one request's input: uncached 1x, 5-minute writes 1.25x, 1-hour writes 2x, reads 0.1x."""
    split = billing.split_of(usage) if isinstance(usage, dict) else usage
    return (split.uncached + 1.25 * split.write_5m + 2 * split.write_1h + 0.1 * split.read) * IN[model] / 1e6


def test_the_replay_as_it_happened_reproduces_the_bill_request_by_request(project: Path, tmp_path: Path) -> None:
    source, usages = session(tmp_path)
    assert rhapsody("import", str(source), cwd=project).returncode == 0
    result = rhapsody("stats", "--what-if", "every=2", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    models = [m for m, _ in PLAN]
    # as it happened: the reported usage, each request at the model that answered it (not all at Opus)
    billed = sum(by_hand(u, m) for u, m in zip(usages, models))
    assert report["as_happened"]["usd"] == round(billed, 4)
    assert billed < sum(by_hand(u, OPUS) for u in usages) * 0.9
    reported = report["replay"]["reported"]
    assert reported == {"uncached": 15, "write_5m": sum(u["cache_creation_input_tokens"] for u in usages[2:4]),
                        "write_1h": sum(usages[i]["cache_creation_input_tokens"] for i in (0, 1, 4)),
                        "read": sum(u["cache_read_input_tokens"] for u in usages)}
    # the replay, request by request: a cache per model, each entry living for its own TTL
    history = next((project / ".rhapsody" / "history").glob("*.jsonl"))
    records = read_history(history).records
    sent = billing.replay(parsed(records))
    assert [s.model for s in sent] == models
    splits = billing.bill(sent, billing.fit(parsed(records)))
    assert [s.read == 0 for s in splits] == [True, False, True, True, False]  # Haiku's first; cold after the pause
    assert [s.write_1h > 0 for s in splits] == [True, True, False, False, True]
    assert [s.write_5m > 0 for s in splits] == [False, False, True, True, False]
    for split, usage in zip(splits, usages):
        assert abs(split.tokens - billing.reported(usage)) <= 0.02 * billing.reported(usage)
        assert split.uncached == usage["input_tokens"] == 3
    replayed = sum(by_hand(s, m) for s, m in zip(splits, models))
    assert report["replay_error"] == round(replayed / billed - 1, 4) and abs(report["replay_error"]) < 0.02
    assert report["replay"]["replayed"] == billing.total(splits).as_dict()
    for key, value in report["replay"]["replayed"].items():
        assert abs(value - reported[key]) <= 0.02 * sum(reported.values()), key
    # rhapsody stats prices the same requests the same way, with their output
    stats = json.loads(rhapsody("stats", "--json", cwd=project).stdout)
    assert stats["cost_usd"] == round(billed + sum(50 * OUT[m] / 1e6 for m in models), 6)
    assert stats["cache_write_1h_tokens"] == reported["write_1h"]
