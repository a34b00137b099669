"""The window a session ran in, found where its history says and stated with where it came from: for the
what-if, `rhapsody stats`, the status bar and the automatic seam alike (core/window.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rhapsody.config.settings import Settings
from rhapsody.core.window import Evidence, session_window, share_limit
from rhapsody.wiring import build

from tests import launch
from tests.conftest import MODEL, SANDBOX, Stub
from tests.transcripts import claude_session, codex_rollout, dump

OPUS_46 = "claude-opus-4-6"


def rhapsody(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return launch.run(list(args), cwd=cwd, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), **env}, timeout=300)


def imported(project: Path, lines: list[dict[str, Any]], tmp: Path) -> str:
    result = rhapsody("import", str(dump(lines, tmp / "s.jsonl")), cwd=project)
    assert result.returncode == 0, result.stderr
    return result.stdout.split(" imported as ")[1].split()[0]


def what_if(project: Path, session: str, *args: str, **env: str) -> dict[str, Any]:
    result = rhapsody("stats", session, "--what-if", "share=0.4", "--json", *args, cwd=project, **env)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_a_claude_code_session_that_compacted_ran_in_200k_whatever_the_model_table_says(
        project: Path, tmp_path: Path) -> None:
    """claude-opus-4-6 has 1M in the table, but Claude Code ran it in 200k and compacted at ~155k."""
    session = imported(project, claude_session(300, model=OPUS_46), tmp_path)
    report = what_if(project, session)
    assert report["window"]["tokens"] == 200_000
    assert report["window"]["source"].startswith("the source compacted on its own at ") and "a 200k window" in report["window"]["source"]
    (share,) = report["policies"]
    assert share["seams"] > 0  # 0.4 of 200k is reached; of 1M it never was
    wider = what_if(project, session, "--context-window", "1000000")
    # 0.4 of 1M is never reached: the only seams are the two where the source compacted (a seam row seams where
    # its context grew as large as the source's had when it compacted, core/accounting/whatif.py `reached`)
    assert wider["window"] == {"tokens": 1_000_000, "source": "--context-window"}
    assert wider["policies"][0]["seams"] == 2 < share["seams"]
    env = what_if(project, session, RHAPSODY_CONTEXT_WINDOW="400000")
    assert env["window"] == {"tokens": 400_000, "source": "RHAPSODY_CONTEXT_WINDOW"}
    text = rhapsody("stats", session, cwd=project)
    assert "window 200,000 tokens: the source compacted on its own at " in text.stdout


def test_a_session_whose_requests_passed_200k_ran_in_the_1m_window(project: Path, tmp_path: Path) -> None:
    session = imported(project, claude_session(300, model=OPUS_46, autocompact=None), tmp_path)
    report = what_if(project, session)
    assert report["window"]["tokens"] == 1_000_000 and "more than 200k, so the 1M context was on" in report["window"]["source"]
    codex = imported(project, codex_rollout(3), tmp_path / "codex")
    assert what_if(project, codex)["window"] == {"tokens": 272_000,
                                                 "source": "the window the source reported (model_context_window)"}


def test_without_a_sign_the_window_is_the_standard_one_and_says_so() -> None:
    claude_code = Evidence(imported="claude-code", peak=40_000)
    manual = Evidence(imported="claude-code")
    manual.add({"kind": "compaction", "boundary": 3, "trigger": "manual", "pre_tokens": 16_000})
    assert "Claude Code's standard window" in session_window(OPUS_46, manual).source  # a /compact says nothing
    assert session_window(OPUS_46, claude_code).tokens == 200_000
    assert "Claude Code's standard window" in session_window(OPUS_46, claude_code).source
    assert session_window(f"{OPUS_46}[1m]", claude_code).tokens == 1_000_000
    assert session_window(OPUS_46, Evidence()).source == f"the model table's window for {OPUS_46}"  # a native session
    assert session_window("llama3.1:8b", Evidence()).assumed


@pytest.mark.parametrize("value", ["lots", "12"])
def test_a_window_setting_that_is_not_one_is_refused_in_one_line(project: Path, tmp_path: Path, value: str) -> None:
    session = imported(project, claude_session(3, model=OPUS_46), tmp_path)
    result = rhapsody("stats", session, "--what-if", "every=2", cwd=project, RHAPSODY_CONTEXT_WINDOW=value)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert "RHAPSODY_CONTEXT_WINDOW" in result.stderr and "Traceback" not in result.stderr


def test_a_resumed_import_shows_and_seams_at_the_window_it_ran_in(stub: Stub, project: Path, tmp_path: Path) -> None:
    session = imported(project, claude_session(300, model=OPUS_46), tmp_path)
    settings = Settings(permission_mode="yolo", sandbox=SANDBOX, handoff_at_share=0.4)
    wiring = build(project, settings, stub.model(), MODEL, resume=session)  # resumed on another model (1M in the table)
    figures = wiring.session.figures
    assert figures.window == 200_000 and "compacted" in figures.window_found().source
    assert figures.context_text() == f"ctx ~{figures.context:,} ({figures.context / 200_000:.1%})"
    limit = wiring.agent._threshold.limit(wiring.session)
    assert limit == share_limit(0.4, 200_000, 0)  # the automatic seam at 0.4 of the same window
    set_wide = build(project, Settings(permission_mode="yolo", sandbox=SANDBOX, handoff_at_share=0.4,
                                       context_window=1_000_000), stub.model(), MODEL, resume=session)
    assert set_wide.session.figures.window == 1_000_000
    assert set_wide.agent._threshold.limit(set_wide.session) == share_limit(0.4, 1_000_000, 0)
