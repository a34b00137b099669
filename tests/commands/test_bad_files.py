"""One answer for a bad file across every command: the real CLI, as a subprocess, says one line naming the
file and what is wrong and exits non-zero (`import`, `stats`, `export`, `rewind --list`, `mcp list`); a
session whose usage is all zeros is a session, not a division by zero; the picker says what it set aside."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from rhapsody.loopback.script import say

from tests import launch
from tests.conftest import Stub, collect
from tests.transcripts import FIXTURES

CLAUDE = FIXTURES / "claude" / "5b1e7a52-9d0c-4f3e-8a61-2f4c1d3e9b70.jsonl"
CODEX = next((FIXTURES / "codex").rglob("rollout-*.jsonl"))


def rhapsody(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # A key and an address nothing listens on: a bad file must stop the run before any request.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "ANTHROPIC_API_KEY": "sk-test-key",
           "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    return launch.run(list(args), cwd=cwd, env=env, timeout=120)


def one_line(ran: subprocess.CompletedProcess[str], status: int, *said: str) -> str:
    """The run exited with `status` and said exactly one line on stderr, holding every part of `said`."""
    assert "Traceback" not in ran.stderr + ran.stdout and "internal error" not in ran.stderr, ran.stderr
    assert ran.returncode == status and len(ran.stderr.splitlines()) == 1, (ran.returncode, ran.stderr)
    for part in said:
        assert part in ran.stderr, (part, ran.stderr)
    return ran.stderr


def damaged(tmp_path: Path, source: Path, line: int, change: dict[str, object]) -> Path:
    """A copy of `source` whose line `line` (from 1) has `change` merged into it (dotted keys go deep)."""
    rows = source.read_text(encoding="utf-8").splitlines()
    record = json.loads(rows[line - 1])
    for dotted, value in change.items():
        *parents, key = dotted.split(".")
        at = record
        for part in parents:
            at = at[part]
        at[key] = value
    rows[line - 1] = json.dumps(record)
    out = tmp_path / "sessions" / source.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return out


def first_line_with(source: Path, *keys: str) -> int:
    """The first line (from 1) of `source` holding the nested `keys`."""
    for number, raw in enumerate(source.read_text(encoding="utf-8").splitlines(), 1):
        at = json.loads(raw)
        for key in keys:
            at = at.get(key) if isinstance(at, dict) else None
        if at is not None:
            return number
    raise AssertionError(f"no line of {source} holds {keys}")


@pytest.mark.parametrize(("source", "keys", "change", "said"), [
    (CLAUDE, ("uuid",), {"uuid": ["a", "list"]}, "'uuid' is not a string (a list)"),
    (CLAUDE, ("message", "usage"), {"message.usage.input_tokens": "12"}, "'message.usage.input_tokens' is not a whole number"),
    (CLAUDE, ("message", "usage"), {"message.usage.output_tokens": -3}, "'message.usage.output_tokens' is the number -3"),
    (CODEX, ("payload", "info", "last_token_usage"), {"payload.info.last_token_usage.input_tokens": [1]},
     "'payload.info.last_token_usage.input_tokens' is not a whole number (a list)"),
])
def test_a_field_of_the_wrong_type_in_an_imported_file_is_one_line_naming_file_line_and_field(
        tmp_path: Path, project: Path, source: Path, keys: tuple[str, ...], change: dict[str, object], said: str) -> None:
    line = first_line_with(source, *keys)
    bad = damaged(tmp_path, source, line, change)
    one_line(rhapsody("import", str(bad), cwd=project), 2, f"{bad} line {line}: {said}")
    assert not (project / ".rhapsody" / "history").exists() or not list((project / ".rhapsody" / "history").iterdir())
    one_line_ok = rhapsody("import", str(source), cwd=project)  # the file as written imports as before
    assert one_line_ok.returncode == 0 and "imported as" in one_line_ok.stdout, one_line_ok.stderr


def zero_usage_session(stub: Stub, project: Path) -> Path:
    """A real session whose every usage block the API reported as zeros."""
    import asyncio

    stub.script(say("Nothing to do."))
    wiring = stub.wire(project)
    asyncio.run(collect(wiring.agent.run("hi")))
    asyncio.run(wiring.close())
    path = wiring.session.path
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        if row["kind"] == "usage":
            row.update({k: 0 for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                                       "output_tokens")})
    assert any(row["kind"] == "usage" for row in rows)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_a_session_whose_usage_is_all_zeros_has_stats_and_an_export(stub: Stub, project: Path) -> None:
    path = zero_usage_session(stub, project)
    for args in (["stats", path.stem], ["stats", path.stem, "--json"], ["export", path.stem, "--md", "-o", "-"],
                 ["export", path.stem, "--html"]):
        ran = rhapsody(*args, cwd=project)
        assert ran.returncode == 0 and not ran.stderr, (args, ran.stderr)
    assert json.loads(rhapsody("stats", path.stem, "--json", cwd=project).stdout)["saving"] == 0.0
    assert "Nothing to do." in rhapsody("export", path.stem, "--md", "-o", "-", cwd=project).stdout


@pytest.mark.parametrize(("content", "why"), [
    (b"this is not json\n", "line 1 is not a JSON record with a 'kind'"),
    (b'{"kind": "message", "role": "user", "content": [{"type": "text", "text": "hi"}]}\n',
     "line 1 is a 'message' record; a history starts"),
    (b"", "it is empty"),
])
def test_a_bad_history_is_the_same_one_line_from_stats_export_rewind_and_resume(project: Path, content: bytes,
                                                                          why: str) -> None:
    folder = project / ".rhapsody" / "history"
    folder.mkdir(parents=True)
    bad = folder / "20260101-000000-abcdef.jsonl"
    bad.write_bytes(content)
    answers = set()
    for args in (["stats", bad.stem], ["stats", str(bad)], ["export", bad.stem, "--md", "-o", "-"],
                 ["rewind", bad.stem, "--list"], ["rewind", str(bad), "--list"], ["rewind", bad.stem, "--to", "1"],
                 ["--resume", bad.stem, "-p", "go on"]):
        answers.add(one_line(rhapsody(*args, cwd=project), 2, str(bad), "is not a rhapsody history file", why))
    assert len(answers) == 1  # one answer, word for word, whichever command read it


def test_mcp_list_with_a_malformed_mcp_json_names_the_file_and_fails(project: Path) -> None:
    (project / ".mcp.json").write_text('{"mcpServers": {"docs": {"command": "x",}}}', encoding="utf-8")
    ran = rhapsody("mcp", "list", cwd=project)
    one_line(ran, 2, str(project / ".mcp.json"), "line 1 column")
    assert "no MCP servers configured" not in ran.stdout
    (project / ".mcp.json").write_text('{"mcpServers": {"docs": {"command": ["not", "a", "string"]}}}', encoding="utf-8")
    one_line(rhapsody("mcp", "list", cwd=project), 2, str(project / ".mcp.json"), "'docs' command")
    (project / ".mcp.json").write_text('{"mcpServers": {"docs": {"type": ["stdio"], "command": "x"}}}', encoding="utf-8")
    one_line(rhapsody("mcp", "list", cwd=project), 2, str(project / ".mcp.json"), "'docs': 'type' is [\"stdio\"]")


async def test_the_picker_says_which_files_it_set_aside(stub: Stub, project: Path) -> None:
    from textual.widgets import Static

    from rhapsody.frontends.app.picker import SessionPicker

    stub.script(say("The total lives in report.py."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("where is the total computed?"))
    bad = project / ".rhapsody" / "history" / "20260101-000000-abcdef.jsonl"
    bad.write_bytes(b"garbage\n")
    picker = SessionPicker(project)
    async with picker.run_test(size=(120, 24)):
        listing = picker.query_one("OptionList")
        assert listing.option_count == 1 and "where is the total" in str(listing.get_option_at_index(0).prompt)
        notice = str(picker.query_one("#problems", Static).render())
        assert f"{bad} is not a rhapsody history file (line 1 is not a JSON record with a 'kind')" in notice


def test_with_only_a_bad_history_resume_names_it(project: Path) -> None:
    from rhapsody.core.errors import HistoryError
    from rhapsody.frontends.app.picker import pick_session

    folder = project / ".rhapsody" / "history"
    folder.mkdir(parents=True)
    (folder / "20260101-000000-abcdef.jsonl").write_bytes(b'{"kind": "message", "role": "user", "content": "x"}\n')
    with pytest.raises(HistoryError, match="20260101-000000-abcdef.jsonl is not a rhapsody history file"):
        pick_session(project)


def test_a_negative_token_count_in_a_history_is_one_line_naming_its_line(stub: Stub, project: Path) -> None:
    path = zero_usage_session(stub, project)
    rows = path.read_text(encoding="utf-8").splitlines()
    line = next(n for n, row in enumerate(rows, 1) if json.loads(row)["kind"] == "usage")
    path.write_text(path.read_text(encoding="utf-8").replace('"input_tokens": 0', '"input_tokens": -5', 1),
                    encoding="utf-8")
    for args in (["stats", path.stem], ["export", path.stem, "--md", "-o", "-"], ["rewind", path.stem, "--list"]):
        one_line(rhapsody(*args, cwd=project), 2, f"{path.name} line {line}: usage record: 'input_tokens' is int, "
                 "expected a count of 0 or more")
