"""bench/seam_eval.py: the long tasks, the three arms over the loopback server, identity, the dollar cap."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from rhapsody.core.session.history import read_history
from rhapsody.loopback.server import LoopbackServer

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("seam_eval", BENCH / "seam_eval.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["seam_eval"] = module
    spec.loader.exec_module(module)
    return module


def test_every_task_is_long_and_every_answer_lies_only_in_stripped_tool_output() -> None:
    seam_eval = _module()
    from seam_eval_record import check
    from seam_eval_tasks import TASKS

    entries = json.loads((BENCH / "seam_eval" / "tasks.json").read_text())
    definitions = {t["name"]: t for t in TASKS}
    assert len(entries) >= 3
    for entry in entries:
        records = read_history(BENCH / "seam_eval" / entry["history"]).records
        assert check(definitions[entry["name"]], records, seam_eval.MIN_CALLS) == entry
        assert entry["stripped_calls"] >= 30
        assert [q["answer"] for q in entry["questions"]].count("UNKNOWN") == 1  # one control per task


def test_loopback_run_recall_is_exact_under_the_full_history_and_unknown_stays_unknown(tmp_path: Path,
                                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    seam_eval = _module()
    docs = tmp_path / "performance.md"
    docs.write_text("# Performance\n\n<!-- seam-eval:loopback -->\nold\n<!-- /seam-eval:loopback -->\n\n## Next\n")
    assert seam_eval.main(["--loopback", "--json", "--docs", str(docs)]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = result["rows"]
    assert len(rows) == result["questions"] >= 15
    for row in rows:
        full, seam, recall = (row["arms"][arm] for arm in seam_eval.ARMS)
        assert all(not row["arms"][arm]["identity"] for arm in seam_eval.ARMS), row
        assert row["stripped_tokens"] >= 20 * recall["recall_tokens"] > 0 and row["stripped_calls"] >= 30
        assert full["recall_calls"] == 0 and full["requests"] == 1 and seam["recall_calls"] == 0
        assert seam["answer"] == "UNKNOWN" and recall["correct"] and full["correct"], row["question"]
        assert seam["correct"] == row["control"]  # the seam arm is right only where the answer is UNKNOWN
        assert recall["recall_calls"] >= (1 if row["control"] else 2), row["question"]  # a search, then fetches
    for task in {r["task"] for r in rows}:
        arm_total = {arm: sum(r["arms"][arm]["input_tokens"] for r in rows if r["task"] == task) for arm in seam_eval.ARMS}
        assert arm_total["seam+recall"] < 0.5 * arm_total["full"], (task, arm_total)
    assert seam_eval.too_short(rows) == []
    table = seam_eval.table(result)
    assert "| **exact value** | | **12/12** | **0/12** | **12/12** |" in table
    assert "| **control: UNKNOWN** | | **3/3** | **3/3** | **3/3** |" in table
    written = docs.read_text()
    assert "old" not in written and "**12/12** | **0/12**" in written and written.endswith("## Next\n")


def test_a_task_that_strips_too_little_for_its_recall_is_flagged() -> None:
    seam_eval = _module()
    row = {"task": "t", "question": "q", "stripped_calls": 35, "stripped_tokens": 19_999,
           "arms": {"seam+recall": {"recall_tokens": 1_000}}}
    assert seam_eval.too_short([row]) and not seam_eval.too_short([{**row, "stripped_tokens": 20_000}])
    assert seam_eval.too_short([{**row, "stripped_tokens": 90_000, "stripped_calls": 29}])


@pytest.mark.parametrize("reply, problem", [
    ("I read config/services.toml before the seam.\n8443", ""),
    ("My notes from the port check still hold.\n8443", ""),
    ("According to the summary, the billing port was read earlier.\n8443", "according to the summary"),
    ("The previous session read the file; I trust it.\n8443", "the previous session"),
    ("The field note says the value was 11.\n11", "the field note says"),
    ("The value was read from the config.\n8443", "no first-person word"),
    ("8443", "no first-person word"),
])
def test_identity_check_wants_the_first_person_and_no_third_person_account(reply: str, problem: str) -> None:
    found = _module().identity_problem(reply)
    assert (problem in found and bool(found)) if problem else found == ""


def _body(text: str, tools: list[str]) -> dict[str, Any]:
    return {"tools": [{"name": t} for t in tools], "messages": [{"role": "user", "content": text}]}


def test_reader_answers_only_what_the_request_carries_and_asks_recall_otherwise() -> None:
    _module()
    from seam_eval_reader import Reader

    reader = Reader()
    reader.aim(r"port = (\d+)", "billing port")
    assert reader(_body("[billing]\nport = 8443\nWhich port?", []))["content"][-1]["text"].endswith("\n8443")
    assert reader(_body("Which port?", []))["content"][-1]["text"].endswith("\nUNKNOWN")
    asked = reader(_body("Which port?", ["recall"]))["content"]
    assert asked[-1] == {"type": "tool_use", "name": "recall", "input": {"query": "billing port"}}


@pytest.mark.parametrize("cap", [0.01, 0.3])
def test_a_priced_run_stops_before_a_question_that_would_pass_the_dollar_cap(cap: float) -> None:
    seam_eval = _module()
    from seam_eval_reader import Reader

    reader = Reader()
    server = LoopbackServer(reader).start()
    try:  # the loopback server stands in for the provider; the model id gives the run a price
        result = asyncio.run(seam_eval.evaluate(seam_eval.loopback_model(server.url), "claude-sonnet-5-5",
                                                ["parser-refactor"], cap=cap, reader=reader))
    finally:
        server.stop()
    done = len(result["rows"])
    assert result["stopped_at_cap"] and (done == 0 if cap < 0.1 else 1 <= done < 5)
    assert 0.0 <= result["dollars"] <= cap and (result["dollars"] > 0) == (done > 0)
    assert f"stopped at the dollar cap after {done} of 5 questions" in seam_eval.table(result)


def test_a_model_error_stops_the_run_keeps_what_was_answered_and_writes_no_table(tmp_path: Path) -> None:
    seam_eval = _module()
    from seam_eval_reader import Reader

    from rhapsody.loopback.server import Fault

    class FailsLater(Reader):
        """Answers five requests (the first question's three arms), then the server refuses one."""

        def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
            self.answered = getattr(self, "answered", 0) + 1
            if self.answered == 5:
                server.inject(Fault("status", status=400))
            return super().__call__(body)

    reader = FailsLater()
    server = LoopbackServer(reader).start()
    try:
        result = asyncio.run(seam_eval.evaluate(seam_eval.loopback_model(server.url), None, ["parser-refactor"], reader=reader))
    finally:
        server.stop()
    assert [r["question"] for r in result["rows"]] == ["definition-line"] and "400" in result["error"]
    docs = tmp_path / "performance.md"
    assert seam_eval.finish(result, "the table", docs, "real") == 1 and not docs.exists()


def test_without_a_key_or_loopback_it_says_so_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert _module().main([]) == 2
    assert "ANTHROPIC_API_KEY is not set" in capsys.readouterr().err
