"""Fourth attack pass on the layers around the sandbox: settings, allow rules, the tools that run
outside the sandbox and the files rhapsody writes for itself. Each test failed on main before the
fix it names (2026-12-01); the attacks that held are listed in docs/security.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rhapsody.cli import main
from rhapsody.core.errors import HistoryError
from rhapsody.core.session import Session

from .conftest import MODEL, Stub
from .test_cli import rhapsody

HOSTILE_ID = "20261201-000000-abcdef"


def plant_history(project: Path, session: str) -> Path:
    """A history a cloned repository commits (or a downloaded one): its session record names `session`."""
    folder = project / ".rhapsody" / "history"
    folder.mkdir(parents=True)
    records = [{"v": 1, "seq": 0, "ts": 1.0, "kind": "session", "session": session, "cwd": str(project),
                "version": "0", "model": MODEL, "system": "s", "tools": []},
               {"v": 1, "seq": 1, "ts": 2.0, "kind": "message", "role": "user", "content": "hi"}]
    path = folder / f"{HOSTILE_ID}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_own_files_boundary_a_history_cannot_name_where_its_export_is_written(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`rhapsody export` named its page after the session record's `session`: `../../../outside/pwned`
    wrote `outside/pwned.html` beside the project. Now the history is refused, one line, status 2."""
    outside = tmp_path / "outside"
    outside.mkdir()
    plant_history(project, "../../../outside/pwned")
    assert main(["export", "--html", "--cwd", str(project)]) == 2
    assert "is not a session id" in capsys.readouterr().err
    assert list(outside.iterdir()) == [] and not (project / ".rhapsody" / "exports").exists()


def test_own_files_boundary_a_resumed_history_cannot_name_where_field_notes_go(
        project: Path, tmp_path: Path, stub: Stub) -> None:
    """A resumed session took its id from the record, and micro_handoff writes `notes/ID-seamN.md`: the
    note of `../../../outside/x` landed outside. Resuming such a history is now a one-line error."""
    path = plant_history(project, "../../../outside/x")
    with pytest.raises(HistoryError, match="is not a session id"):
        Session.resume(project, path)
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    result = rhapsody("-p", "go", "--resume", HOSTILE_ID, "--cwd", str(project), "--model", MODEL, env=env)
    assert result.returncode == 2 and "is not a session id" in result.stderr and "Traceback" not in result.stderr
