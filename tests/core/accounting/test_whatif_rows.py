"""The what-if's other rows, priced by hand on the small session of test_whatif: rhapsody's own prompt in
place of the source's prefix, the source's compaction with its own request, the server clearing old tool
results; and on a long imported session, through the command."""

from __future__ import annotations

from rhapsody.core.session.records import parsed
import json
from pathlib import Path
from typing import Any

import pytest

from rhapsody.core.accounting import whatif
from rhapsody.core.session.messages import compact_json
from rhapsody.core.accounting.whatif import calibrate, parse_policy, prompt_head, run
from rhapsody.core.accounting.whatif_rows import PLACEHOLDER, Clearing, clearing_arm, compaction_arm

from tests.core.accounting.test_whatif import NOTE, rhapsody, small_session
from tests.transcripts import claude_session, dump


def _tokens(text: str) -> int:
    return -(-len(text) // 4)


def test_own_prompt_replaces_the_head_in_every_request_and_nothing_else() -> None:
    # A 400-character system prompt: its text block list is 427 characters (107 tokens) against the empty one's
    # 27 (7), so every request carries 100 tokens more; priced by hand like test_whatif's.
    records = small_session()
    fit = calibrate(parsed(records), 0.1)
    own = prompt_head("s" * 400, [])
    extra = sum(whatif.tokens(p) for p in own) - sum(whatif.tokens(p) for p in fit.head)
    assert extra == 100
    # r1: 208 written (×1.25) = 260; r2: 208 read + 200 written = 270.8; r3: 408 read + 200 written = 290.8
    base = run(parsed(records), None, NOTE, 1000, 0.1, fit, own)
    assert base.input_tokens == 924 + 3 * extra and base.billed_input_tokens == round(260 + 270.8 + 290.8) == 822
    assert run(parsed(records), None, NOTE, 1000, 0.1, fit).billed_input_tokens == 677  # the source's prefix, unchanged


def with_compaction() -> list[dict[str, Any]]:
    """small_session with the source compacting after r2: m0..m2 leave, a 100-token summary comes in, and r3
    reported over [S m3 m4] (308), so the calibration still adds no prefix and scales by 1."""
    records = small_session()
    records[-2]["cache_creation_input_tokens"] = 308
    at = next(i for i, r in enumerate(records) if r["kind"] == "usage" and r["cache_creation_input_tokens"] == 308) + 1
    summary = {"kind": "message", "role": "user", "compact_summary": True,
               "content": [{"type": "text", "text": "s" * 347}]}  # 400 characters, like every message here
    records[at:at] = [{"kind": "compaction", "boundary": 3, "pre_tokens": 308}, summary]
    return [{**r, "v": 1, "seq": n, "ts": r.get("ts", 20)} for n, r in enumerate(records)]


def test_the_source_compaction_row_prices_the_summarising_request_and_its_summary() -> None:
    # r1 135, r2 260.8; the compaction's own request over [m0 m1 m2] (308, all read) 30.8, its summary (the
    # content's 373 characters: 94 output tokens); r3 over [S m3 m4] (308: the head read, 300 written) 375.8.
    records = with_compaction()
    arm = compaction_arm(parsed(records), 0.1, calibrate(parsed(records), 0.1))
    assert (arm.requests, arm.seams, arm.note_output_tokens) == (4, 1, 94)
    assert arm.billed_input_tokens == round(135 + 260.8 + 30.8 + 375.8) == 802


def test_a_seam_row_compacts_only_where_its_context_grew_as_large_and_seams_there_instead() -> None:
    records = with_compaction()
    fit = calibrate(parsed(records), 0.1)
    assert fit.compacted_at == {next(r["seq"] for r in records if r["kind"] == "compaction"): 308}
    # every=5 is never due by its count (2 calls); the compaction point is reached (308 ≥ 308): a seam before r3
    # instead of the source's cut and without its summary: asked over [m0..m4] 508, answered 592, r3 [m0 A U] 192.
    arm = run(parsed(records), parse_policy("every=5"), NOTE, 1000, 0.1, fit)
    assert arm.seams == 1 and arm.peak_context == 592 and arm.requests == 5
    base = run(parsed(records), None, NOTE, 1000, 0.1, fit)  # without seams the source's cut stands: r3 over [S m3 m4]
    assert base.seams == 0 and base.peak_context == 308


def test_clearing_replaces_all_but_the_newest_results_once_a_request_reaches_the_trigger() -> None:
    # Clearing(trigger=300, keep=1): r1 (108) is under it; r2 (308) keeps its only result; r3 (508) clears t1:
    # m2 becomes the placeholder result; head + m0 read (cached by r1), the rest written.
    records = small_session()
    fit = calibrate(parsed(records), 0.1)
    cleared = _tokens(compact_json({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": PLACEHOLDER}]}))
    arm = clearing_arm(parsed(records), 0.1, fit, Clearing(trigger=300, keep=1))
    assert arm.input_tokens == 108 + 308 + 408 + cleared
    assert arm.billed_input_tokens == round(135 + 260.8 + 10.8 + (100 + cleared + 200) * 1.25)
    assert arm.peak_context == 408 + cleared < 508
    untouched = clearing_arm(parsed(records), 0.1, fit, Clearing(trigger=10_000, keep=1))
    assert untouched.billed_input_tokens == run(parsed(records), None, NOTE, 1000, 0.1, fit).billed_input_tokens


def test_what_if_shows_rhapsodys_own_prompt_and_the_two_alternatives_beside_the_seams(project: Path,
                                                                                      tmp_path: Path) -> None:
    source = dump(claude_session(400), tmp_path / "long.jsonl")
    assert rhapsody("import", str(source), cwd=project).returncode == 0
    result = rhapsody("stats", "--what-if", "every=50", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    (every,) = report["policies"]
    head = json.loads((project / ".rhapsody" / "history").glob("*.jsonl").__next__().read_text().splitlines()[0])
    own_tokens = sum(whatif.tokens(p) for p in prompt_head(head["system"], head["tools"]))
    # the report's scale is rounded to 4 places, the figure is computed with the whole one: one token apart at most
    assert abs(report["own_prompt"]["tokens"] - own_tokens * report["calibration"]["scale"]) <= 1
    assert 4_000 < report["own_prompt"]["request_bytes"] < 20_000  # the first request's head, without messages
    assert report["calibration"]["prefix_tokens"] > 10_000  # the source's own prompt, far larger than rhapsody's
    own = every["own_prompt"]
    assert own["billed_input_tokens"] < every["billed_input_tokens"] and own["usd"] < every["usd"]
    assert set(every) >= {"label", "requests", "seams", "billed_input_tokens", "usd", "saving", "peak_context"}
    compaction, clearing = report["alternatives"]
    assert compaction["label"] == "source's compaction" and compaction["seams"] == 3
    assert compaction["billed_input_tokens"] > report["without_seams"]["billed_input_tokens"]
    assert clearing["label"].startswith("clear tool results") and clearing["peak_context"] <= 100_000 * 1.05
    text = rhapsody("stats", "--what-if", "every=50", cwd=project).stdout
    assert "rhapsody's prompt" in text and "source's compaction" in text and "clear tool results" in text


def words_session(calls: int) -> list[dict[str, Any]]:
    """A user message, then `calls` narrated calls whose answers each carry 400 characters of words."""
    records = small_session()[:3]  # the session head, the user message, its request
    for n in range(1, calls + 1):
        ts = 10.0 * n
        records.append({"v": 1, "seq": 0, "ts": ts, "kind": "message", "role": "assistant", "content": [
            {"type": "text", "text": "w" * 400},
            {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {"c": "c" * 300}}]})
        records.append({"v": 1, "seq": 0, "ts": ts, "kind": "message", "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "r" * 300}]})
        records.append({"v": 1, "seq": 0, "ts": ts, "kind": "request", "bytes": 0, "est_tokens": 0})
        records.append({"v": 1, "seq": 0, "ts": ts, "kind": "usage", "input_tokens": 100 + 300 * n,
                        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
    return [{**r, "seq": i} for i, r in enumerate(records)]


def test_a_seam_row_moves_the_oldest_words_out_as_rhapsody_would_once_a_seam_leaves_half_the_window() -> None:
    records = words_session(12)
    fit = calibrate(parsed(records), 0.1)
    unbounded = run(parsed(records), parse_policy("every=1"), NOTE, None, 0.1, fit)  # no window known: nothing moves
    held = run(parsed(records), parse_policy("every=1"), NOTE, 2000, 0.1, fit)
    assert unbounded.shelves == 0 and held.shelves >= 1
    assert held.peak_context < unbounded.peak_context and held.seams == unbounded.seams
    assert held.peak_context <= 2000  # what the seams keep never outgrows the window


def test_own_prompt_replaces_every_models_prefix(project: Path, tmp_path: Path) -> None:
    # The two-model session of test_replay_bill: Opus's first request shows a 20k-token prefix, Haiku's 8k;
    # with rhapsody's own prompt every request of both models carries that prompt instead, nothing else changes.
    from rhapsody.core.accounting.billing import replay
    from rhapsody.core.session.history import read_history

    from tests.core.accounting.test_replay_bill import HAIKU, OPUS, PLAN, session
    source, _ = session(tmp_path)
    assert rhapsody("import", str(source), cwd=project).returncode == 0
    records = read_history(next((project / ".rhapsody" / "history").glob("*.jsonl"))).records
    fit = calibrate(parsed(records))
    weight = {m: sum(whatif.tokens(p) for p in fit.head_of(m)) for m in (OPUS, HAIKU)}
    assert weight[OPUS] > weight[HAIKU] + 10_000  # two prefixes, one per model
    own = prompt_head("s" * 4000, [])
    mine = sum(whatif.tokens(p) for p in own)
    assert all(fit.own(own).head_of(m) is own for m in (OPUS, HAIKU))
    base, swapped = run(parsed(records), None, NOTE, None, None, fit), run(parsed(records), None, NOTE, None, None, fit, own)
    assert len(replay(parsed(records))) == base.requests == swapped.requests == len(PLAN)
    expected = base.input_tokens - fit.scale * sum(weight[m] - mine for m, _ in PLAN)
    assert abs(swapped.input_tokens - expected) <= 2
    assert swapped.input_usd is not None and base.input_usd is not None and swapped.input_usd < base.input_usd


def test_a_sessions_subagent_requests_are_said_beside_the_rows_at_their_own_model(project: Path, tmp_path: Path) -> None:
    """The paced fixture's Explore subagent runs on Haiku: its sidechain requests, with their usage (1-hour
    writes kept), are counted once per request and priced at Haiku's rate, said in `--json` and under the table."""
    from tests.core.accounting.test_whatif import rhapsody
    from tests.transcripts import dump
    from tests.transcripts_real import HAIKU, claude_real_session

    lines = claude_real_session()
    usages = {line["message"]["id"]: line["message"]["usage"] for line in lines
              if line.get("isSidechain") and line.get("type") == "assistant"}
    assert len(usages) == 12 and all(line["message"]["model"] == HAIKU for line in lines if line.get("isSidechain"))
    by_hand = sum(u["input_tokens"] + u["cache_creation_input_tokens"] * 1.25 + u["cache_read_input_tokens"] * 0.1
                  for u in usages.values())
    assert rhapsody("import", str(dump(lines, tmp_path / "real.jsonl")), cwd=project).returncode == 0
    result = rhapsody("stats", "--what-if", "checkpoint", "--json", cwd=project)
    sub = json.loads(result.stdout)["subagents"]
    assert sub["requests"] == 12 and sub["billed_input_tokens"] == round(by_hand)
    assert sub["usd"] == pytest.approx(by_hand * 1.0 / 1e6, abs=1e-4)  # Haiku 4.5: $1 per million input
    text = rhapsody("stats", "--what-if", "checkpoint", cwd=project).stdout
    assert "its subagents (sidechains) sent 12 requests" in text
