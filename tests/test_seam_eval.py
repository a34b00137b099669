"""bench/seam_eval.py --loopback: the three-arm test's mechanics, offline."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from rhapsody.core.history import read_history

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("seam_eval", BENCH / "seam_eval.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["seam_eval"] = module
    spec.loader.exec_module(module)
    return module


def test_every_recorded_answer_lies_only_in_stripped_tool_output() -> None:
    seam_eval = _module()
    tasks = json.loads((BENCH / "seam_eval" / "tasks.json").read_text())
    definitions = {t["name"]: t for t in seam_eval.TASKS}
    assert len(tasks) >= 10
    for task in tasks:
        records = read_history(BENCH / "seam_eval" / task["history"]).records
        assert seam_eval._check(definitions[task["name"]], records) == task["answer"]


def test_loopback_run_scores_full_and_recall_arms_and_not_the_seam_arm(capsys: pytest.CaptureFixture[str]) -> None:
    seam_eval = _module()
    assert seam_eval.main(["--loopback", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 10
    for row in rows:
        full, seam, recall = (row["arms"][arm] for arm in ("full", "seam", "seam+recall"))
        assert full["correct"] and full["recall_calls"] == 0 and full["requests"] == 1, row["task"]
        assert not seam["correct"] and seam["answer"] == "UNKNOWN" and seam["recall_calls"] == 0, row["task"]
        assert recall["correct"] and recall["recall_calls"] >= 2, row["task"]  # a search, then a fetch by id
        assert seam["input_tokens"] < full["input_tokens"]
    assert "**12/12** | **0/12** | **12/12**" in seam_eval.table(rows)


def test_without_a_key_or_loopback_it_says_so_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert _module().main([]) == 2
    assert "ANTHROPIC_API_KEY is not set" in capsys.readouterr().err
