"""`rhapsody import` of a Claude Code 2.1 transcript with the real structure of parallel calls (each result
on its own call's branch, hook progress between calls): every call stays, every result that is in the
file is found, and only the call whose result never came says so; then resume, export and field note."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rhapsody.core.session.session import Session
from rhapsody.importer.to_history import INTERRUPTED
from rhapsody.loopback.script import say
from rhapsody.loopback.validate import validate
from rhapsody.tools.handoff import harness_facts

from tests.conftest import MODEL, Stub
from tests.importer.test_import import imported, kinds, rhapsody
from tests.transcripts import FIXTURES, codex_rollout, dump
from tests.transcripts_parallel import BD_SYNC, NEVER_CAME, PARALLEL_SESSION

SOURCE = FIXTURES / "claude-2.1" / f"{PARALLEL_SESSION}.jsonl"


def source_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SOURCE.read_text().splitlines()]


def source_blocks(kind: str) -> list[dict[str, Any]]:
    """The blocks of `kind` in the source's main-conversation lines."""
    return [b for r in source_lines() if r.get("type") in ("user", "assistant") and not r.get("isSidechain")
            and isinstance(r["message"]["content"], list) for b in r["message"]["content"] if b.get("type") == kind]


def blocks(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [b for m in kinds(records, "message") for b in m["content"] if b["type"] == kind]


def test_the_source_has_the_structure_the_old_walk_got_wrong() -> None:
    """The fixture is what Claude Code writes: results off the parent chain, calls hanging off progress lines."""
    lines = source_lines()
    by_uuid = {r["uuid"]: r for r in lines if "uuid" in r}
    calls = {b["id"]: r for r in lines if r.get("type") == "assistant" for b in r["message"]["content"]
             if b["type"] == "tool_use"}
    parents = [by_uuid[r["parentUuid"]]["type"] for r in calls.values() if r["parentUuid"] in by_uuid]
    assert parents.count("progress") >= 5  # the second and later calls of a batch
    results = [r for r in lines if r.get("type") == "user" and isinstance(r["message"]["content"], list)
               and r["message"]["content"][0].get("type") == "tool_result"]
    assert all(r["parentUuid"] == calls[r["message"]["content"][0]["tool_use_id"]]["uuid"] for r in results)
    assert NEVER_CAME in calls and not [r for r in results if r["message"]["content"][0]["tool_use_id"] == NEVER_CAME]


def test_every_parallel_call_and_every_result_in_the_file_is_imported(project: Path) -> None:
    records = imported(project, SOURCE)
    calls, results = blocks(records, "tool_use"), blocks(records, "tool_result")
    assert [c["id"] for c in calls] == [b["id"] for b in source_blocks("tool_use")]  # none left the conversation
    real = {b["tool_use_id"]: b["content"] for b in source_blocks("tool_result")}
    got = {b["tool_use_id"]: b["content"] for b in results}
    assert len(got) == len(calls) == 14
    assert {k: v for k, v in got.items() if k != NEVER_CAME} == real  # each the source's own, byte for byte
    assert got[NEVER_CAME] == INTERRUPTED  # only the call whose result truly never came says so
    assert BD_SYNC in got.values()
    assert "[Request interrupted by user for tool use]" in got.values()  # the interrupted call keeps its own result
    assert [r["what"] for r in kinds(records, "aside")] == ["system", "sidechain", "sidechain"]  # no "branch"
    # one request per API message, with the 1-hour writes Claude Code reported
    ids = {r["message"]["id"] for r in source_lines() if r.get("type") == "assistant" and not r.get("isSidechain")}
    usage = kinds(records, "usage")
    assert len(usage) == len(kinds(records, "request")) == len(ids) == 10
    hours = sum(r["message"]["usage"]["cache_creation"]["ephemeral_1h_input_tokens"]
                for r in {r["message"]["id"]: r for r in source_lines()
                          if r.get("type") == "assistant" and not r.get("isSidechain")}.values())
    assert sum(u.get("cache_creation_1h_input_tokens", 0) for u in usage) == hours > 0


def test_a_resumed_parallel_import_sends_every_result(stub: Stub, project: Path) -> None:
    records = imported(project, SOURCE)
    stub.script(say("Going on."))
    resumed = rhapsody("-p", "go on", "--resume", records[0]["session"], "--cwd", str(project), "--model", MODEL,
                       cwd=project, env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url})
    assert resumed.returncode == 0, resumed.stderr
    (body,) = stub.bodies()
    validate(body)
    full = [b for r in kinds(records, "message") for b in r["content"]]
    assert sum(1 for b in full if b["type"] == "tool_use") == 14
    sent = json.dumps(body)
    assert "All checks passed!" in sent and "Exported 0 issues" not in sent  # the view starts at the compaction
    (compaction,) = kinds(records, "compaction")
    assert compaction["pre_tokens"] == 167_117


def test_imported_commands_show_an_exit_code_only_where_the_source_states_one(project: Path) -> None:
    records = imported(project, SOURCE)
    runs = {r["command"]: r for r in kinds(records, "tool_run") if r.get("command")}
    assert runs["pytest -q"]["exit_code"] == 1 and runs["pytest -q"]["is_error"]  # "Exit code 1" in the source
    assert "exit_code" not in runs["bd sync 2>&1"] and not runs["bd sync 2>&1"]["is_error"]
    session = Session.resume(project, project / ".rhapsody" / "history" / f"{records[0]['session']}.jsonl")
    facts = harness_facts(project, session)
    assert "- `pytest -q` → exit 1" in facts and "- `bd sync 2>&1` → ok" in facts
    assert "- `pytest -q tests/test_slow.py` → error" in facts
    assert "exit None" not in facts
    assert "### Last failing command (verbatim; its source states no exit status)\n`ruff check src`" in facts
    exported = rhapsody("export", records[0]["session"], "--md", "-o", "-", cwd=project)
    assert exported.returncode == 0, exported.stderr
    assert "Bash bd sync 2&gt;&amp;1 → ok" in exported.stdout and "Bash pytest -q → exit 1" in exported.stdout


def test_a_codex_count_written_after_its_calls_outputs_is_kept_and_exit_codes_come_from_the_output(
        project: Path, tmp_path: Path) -> None:
    """Codex runs a response's calls while it streams, so their outputs can precede the response's token count."""
    lines = codex_rollout(4)
    for i in range(len(lines) - 1):
        if lines[i]["payload"].get("type") == "token_count" and lines[i + 1]["payload"].get("type") == "function_call_output":
            lines[i], lines[i + 1] = lines[i + 1], lines[i]
    records = imported(project, dump(lines, tmp_path / "rollout-streamed.jsonl"))
    assert len(kinds(records, "usage")) == 5  # four calls and the closing answer, none dropped
    runs = kinds(records, "tool_run")
    assert len(runs) == 4 and all(r["exit_code"] == 0 for r in runs)  # `metadata.exit_code` of each output


def test_the_replay_of_the_parallel_import_as_it_happened_is_its_reported_bill(project: Path) -> None:
    imported(project, SOURCE)
    result = rhapsody("stats", "--what-if", "every=5", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert abs(report["replay_error"]) < 0.02
    assert report["replay"]["reported"]["write_5m"] == 0 and report["replay"]["replayed"]["write_5m"] == 0  # all 1-hour


def test_the_import_line_says_how_many_calls_have_no_result_and_the_window(project: Path) -> None:
    result = rhapsody("import", str(SOURCE), cwd=project)
    assert result.returncode == 0, result.stderr
    assert "14 tool calls (1 without a result in the file)" in result.stdout
    assert "window 200,000: the source compacted on its own at 167,117 tokens" in result.stdout
