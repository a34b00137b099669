"""`rhapsody stats --what-if`: seams placed by a policy, replayed and priced, checked by hand on a small
session and against the issue's bar on a long imported one."""

from __future__ import annotations

from rhapsody.core.session.records import parsed
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rhapsody.core.accounting import whatif
from rhapsody.core.accounting.whatif import NoteCost, SeamPolicy, calibrate, note_cost, parse_policy, run

from tests import launch
from tests.transcripts import claude_session, claude_session_1m, codex_rollout, dump


def _message(seq: int, ts: float, role: str, block: dict[str, Any]) -> dict[str, Any]:
    return {"v": 1, "seq": seq, "ts": ts, "kind": "message", "role": role, "content": [block]}


def small_session() -> list[dict[str, Any]]:
    """Three requests; every message is exactly 400 characters of compact JSON (100 tokens), the head
    (no tools `[]`: 2 characters, empty system prompt: 27) is 1 + 7 = 8 tokens; the API reported exactly
    the rebuilt sizes (as 5-minute cache writes, nothing uncached), so the calibration scales by 1."""
    records: list[dict[str, Any]] = [{"v": 1, "seq": 0, "ts": 0.0, "kind": "session", "session": "s", "model":
                                      "claude-sonnet-5-5", "system": "", "tools": []}]

    def add(kind: str, ts: float, **fields: Any) -> None:
        records.append({"v": 1, "seq": len(records), "ts": ts, "kind": kind, **fields})

    def request(ts: float, tokens: int) -> None:
        add("request", ts, bytes=0, est_tokens=0, model="claude-sonnet-5-5")
        add("usage", ts, input_tokens=0, cache_creation_input_tokens=tokens, cache_read_input_tokens=0,
            output_tokens=5)

    add("message", 0, role="user", content=[{"type": "text", "text": "u" * 347}])  # 53 + 347 = 400
    request(0, 108)
    for n, ts in ((1, 10), (2, 20)):
        add("message", ts, role="assistant",  # 93 + 307 = 400
            content=[{"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {"c": "c" * 307}}])
        add("message", ts, role="user", content=[{"type": "tool_result", "tool_use_id": f"t{n}", "content": "r" * 318}])
        request(ts, 108 + 200 * n)
    add("message", 30, role="assistant", content=[{"type": "text", "text": "a" * 342}])  # 58 + 342 = 400
    return records


NOTE = NoteCost(added=30, output=10, basis="test")
"""The micro_handoff call: 117 characters + a 40-character note = 157 → 40 tokens; its result: 94 + 80 = 174
→ 44 tokens. A seam adds 84 tokens to the context."""


def arm(policy: str | None) -> whatif.Arm:
    records = small_session()
    fit = calibrate(parsed(records), 0.1)
    assert fit.scale == 1.0 and len(fit.head) == 2
    return run(parsed(records), parse_policy(policy) if policy else None, NOTE, 1000, 0.1, fit)


def test_without_seams_matches_the_cache_model_by_hand() -> None:
    # r1: 108 written (×1.25) = 135; r2: 108 read (×0.1) + 200 written = 260.8; r3: 308 read + 200 written = 280.8
    base = arm(None)
    assert (base.requests, base.seams, base.input_tokens, base.peak_context) == (3, 0, 924, 508)
    assert base.billed_input_tokens == round(135 + 260.8 + 280.8) == 677


def test_a_seam_every_call_is_priced_by_hand() -> None:
    # r1 135. Seam 1 before r2: asked over [m0 m1 m2] (308: 108 read, 200 written) 260.8; answered with the
    # note pair (392: 308 read, 84 written) 135.8; r2 over [m0 A U] (192: 108 read, 84 written) 115.8.
    # Seam 2 before r3: asked over [m0 A U m3 m4] (392: 192 read, 200 written) 269.2; answered (476: 392 read,
    # 84 written) 144.2; r3 over [m0 A U A2 U2] (276: 192 read, 84 written) 124.2.
    every = arm("every=1")
    assert (every.requests, every.seams, every.note_output_tokens) == (7, 2, 20)
    assert every.input_tokens == 108 + 308 + 392 + 192 + 392 + 476 + 276 == 2144
    assert every.billed_input_tokens == round(135 + 260.8 + 135.8 + 115.8 + 269.2 + 144.2 + 124.2) == 1185
    assert every.peak_context == 476


def test_thresholds_place_the_seam_before_the_first_request_that_reaches_them() -> None:
    # every=2 and at=400 both seam only before r3: asked over [m0..m4] (508: 308 read, 200 written) 280.8,
    # answered (592: 508 read, 84 written) 155.8, r3 over [m0 A U] (192: 108 read, 84 written) 115.8.
    expected = round(135 + 260.8 + 280.8 + 155.8 + 115.8)
    assert arm("every=2").billed_input_tokens == arm("at=400").billed_input_tokens == expected == 948
    assert arm("at=300").billed_input_tokens == arm("every=1").billed_input_tokens  # 308 ≥ 300 before r2
    assert arm("share=0.4").billed_input_tokens == 948  # 0.4 of a 1,000-token window


def test_as_it_happened_prices_the_reported_usage() -> None:
    records = small_session()
    happened = whatif.as_happened(parsed(records), 0.1, calibrate(parsed(records), 0.1))
    assert (happened.requests, happened.input_tokens, happened.billed_input_tokens) == (3, 924, round(924 * 1.25))


@pytest.mark.parametrize("text", ["every=0", "every=x", "share=1.5", "at=", "often=3", "share=0"])
def test_a_policy_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="expected every=N"):
        parse_policy(text)
    assert parse_policy("share=0.6") == SeamPolicy("share", 0.6)


def test_note_cost_comes_from_the_notes_the_project_wrote_else_a_stated_default() -> None:
    seam = {"kind": "seam", "boundary": 1, "before": {"est_tokens": 5000}, "after": {}, "asked_est_tokens": 3800}
    call = {"type": "tool_use", "id": "x", "name": "micro_handoff", "input": {"done": ["a" * 387]}}  # 13 + 387 = 400
    note = {"kind": "message", "role": "assistant", "content": [call]}
    result = {"kind": "message", "role": "user",  # the block: 53 + 747 = 800 characters
              "content": [{"type": "tool_result", "tool_use_id": "x", "content": "n" * 747}]}
    found = note_cost([parsed([seam, note, result]), parsed([{**seam, "asked_est_tokens": 4000}])])
    assert (found.added, found.output) == (1100, 100) and "from 2 seam(s) that measured it" in found.basis
    older = note_cost([parsed([note, result])])  # a seam written before asked_est_tokens: the pair that stays is measured
    call_tokens = -(-len(json.dumps(call, separators=(",", ":"))) // 4)
    assert (older.added, older.output) == (call_tokens + 200, 100) and "the call and its result" in older.basis
    default = note_cost([parsed([note])])
    assert default.added == whatif.DEFAULT_NOTE_ADDED and "default" in default.basis


def rhapsody(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return launch.run(list(args), cwd=cwd, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)}, timeout=300)


@pytest.mark.parametrize("make, alone, own", [(claude_session_1m, 0.5, 0.5), (codex_rollout, 0.6, 0.5),
                                              (claude_session, 0.85, 0.7)])
def test_seams_every_50_calls_bill_at_most_half_of_a_long_imported_session(project: Path, tmp_path: Path,
                                                                           make: Any, alone: float, own: float) -> None:
    """With rhapsody's own prompt, at most half where the source let its context grow (a 1M window; Codex
    compacting only near its 272k); where Claude Code compacted three times on its own at 155k, its context
    was already cut (a seam row is not given those cuts: it seams where its context grew as large) and the
    seams save less (docs/performance.md)."""
    source = dump(make(400), tmp_path / "long.jsonl")
    assert rhapsody("import", str(source), cwd=project).returncode == 0
    result = rhapsody("stats", "--what-if", "every=50", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (every,) = report["policies"]
    assert abs(report["replay_error"]) < 0.02  # the replay as it happened is the reported bill
    billed = report["as_happened"]["billed_input_tokens"]
    assert every["seams"] == 8 and every["billed_input_tokens"] <= billed * alone
    assert every["own_prompt"]["billed_input_tokens"] <= billed * own
    assert "no field note written in this project yet" in report["note"]["basis"]
    text = rhapsody("stats", "--what-if", "sweep", cwd=project)
    assert text.returncode == 0 and "every=100" in text.stdout and "share=0.6" in text.stdout
    assert f"default {whatif.DEFAULT_NOTE_ADDED:,} tokens added" in text.stdout


def test_what_if_answers_bad_input_in_one_line(project: Path) -> None:
    result = rhapsody("stats", "--what-if", "often=3", cwd=project)
    assert result.returncode == 2 and "expected every=N" in result.stderr and len(result.stderr.splitlines()) == 1


def test_a_native_session_is_replayed_with_the_cost_of_its_own_field_note(project: Path) -> None:
    recorded = next((Path(__file__).parents[3] / "history").glob("review-*.jsonl"))
    result = rhapsody("stats", str(recorded), "--what-if", "every=50,at=40000", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["note"]["basis"].startswith("estimated from 1 field note(s) (the call and its result)")
    assert report["as_happened"]["seams"] == 1 and report["without_seams"]["seams"] == 0
    every, at = report["policies"]
    assert every["seams"] == 3 and every["billed_input_tokens"] < report["without_seams"]["billed_input_tokens"]
    assert at["label"] == "at=40000" and at["peak_context"] < 40000 + 20000  # a seam once the context reached 40k
    assert report["as_happened"]["usd"] is not None and every["usd"] < report["without_seams"]["usd"]


def test_the_default_note_cost_is_what_the_caps_let_a_seam_leave_and_note_tokens_overrides_it(
        project: Path, tmp_path: Path) -> None:
    """The default is built from the prompts' note aim and the caps (not a guessed 2,500), and agrees with them;
    `--note-tokens N` prices every seam at N, stated, and a bigger note bills more on the same replay."""
    from rhapsody.core.session.handoff import INDEX_CHARS
    from rhapsody.core.accounting.seam_cost import ASK_CHARS, FACTS_CAP_CHARS, NOTE_AIM_CHARS
    from rhapsody.prompts import load
    from rhapsody.tools.handoff import FACTS_CHARS

    assert FACTS_CHARS == FACTS_CAP_CHARS and len(load("handoff")) <= ASK_CHARS
    assert "about 1,000 characters" in load("handoff") and NOTE_AIM_CHARS == 1_000
    assert whatif.DEFAULT_NOTE_ADDED == round((2 * NOTE_AIM_CHARS + FACTS_CHARS + INDEX_CHARS + ASK_CHARS + 200) / 4)
    assert whatif.DEFAULT_NOTE_ADDED < 2_500 and whatif.DEFAULT_NOTE_OUTPUT < 600
    source = dump(claude_session(120), tmp_path / "long.jsonl")
    assert rhapsody("import", str(source), cwd=project).returncode == 0
    billed = {}
    for tokens in (300, 3_000):
        result = rhapsody("stats", "--what-if", "every=25", "--json", "--note-tokens", str(tokens), cwd=project)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["note"]["added"] == tokens and report["note"]["output"] == tokens // 4
        assert "--note-tokens" in report["note"]["basis"]
        billed[tokens] = report["policies"][0]["billed_input_tokens"]
        assert "billed_ttl_choice" in report["policies"][0]["own_prompt"]  # the own-prompt row's 1h variant
    assert billed[3_000] > billed[300]
    bad = rhapsody("stats", "--what-if", "every=25", "--note-tokens", "0", cwd=project)
    assert bad.returncode != 0 and "--note-tokens 0" in bad.stderr and len(bad.stderr.splitlines()) == 1


def test_a_seams_two_requests_write_with_the_lifetime_of_the_request_they_precede() -> None:
    """As the module docstring says: the request before the seam wrote for five minutes, the one after for an
    hour (rhapsody chose the hour across a pause): the seam's requests, sent at the later moment, write for the
    hour; on the old code they took the five minutes of the request before."""
    from rhapsody.core.accounting.billing import TTL_1H, TTL_5M, Sent, ttl_of
    from rhapsody.core.pricing import WRITE_1H_KEY

    five = {"input_tokens": 1, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 0, WRITE_1H_KEY: 0}
    hour = {**five, WRITE_1H_KEY: 100}
    sent = [Sent(0.0, [], five), Sent(900.0, [], {}), Sent(901.0, [], {}), Sent(902.0, [], hour)]
    given = whatif.with_ttls(sent)
    assert [s.ttl for s in given] == [None, (TTL_1H, TTL_1H), (TTL_1H, TTL_1H), None]
    assert ttl_of(five, (TTL_1H, TTL_1H)) == (TTL_5M, TTL_5M)  # without it the seam's requests took this one's
