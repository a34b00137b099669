"""`rhapsody import`: Claude Code transcripts and Codex rollouts become rhapsody sessions that resume,
hand off and recall through the real loop on the loopback server."""

from __future__ import annotations

from rhapsody.core.session.records import parse
from rhapsody.core.session.records import parsed
from rhapsody.core.session.records import dumped
import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from rhapsody.config.settings import Settings
from rhapsody.core.session.context import Conversation
from rhapsody.core.session.messages import Message
from rhapsody.core.session.history import read_history, started_by_another
from rhapsody.core.session.recall import search
from rhapsody.loopback.script import say
from rhapsody.loopback.validate import validate
from rhapsody.wiring import build

from tests import launch
from tests.conftest import MODEL, SANDBOX, Stub, plain_mode, until
from tests.core.session.test_handoff_e2e import handoff_turn
from tests.transcripts import FIXTURES, claude_session, codex_rollout, dump

CLAUDE = FIXTURES / "claude" / "5b1e7a52-9d0c-4f3e-8a61-2f4c1d3e9b70.jsonl"
CODEX = next((FIXTURES / "codex").rglob("rollout-*.jsonl"))


def rhapsody(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return launch.run(list(args), cwd=cwd, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), **(env or {})}, timeout=120)


def imported(project: Path, *paths: Path) -> list[dict[str, Any]]:
    """Import `paths` and return the records of the one new session."""
    result = rhapsody("import", *map(str, paths), cwd=project)
    assert result.returncode == 0, result.stderr
    session_id = result.stdout.split(" imported as ")[1].split()[0]
    assert f"rhapsody --resume {session_id}" in result.stdout
    return read_history(project / ".rhapsody" / "history" / f"{session_id}.jsonl").records


def kinds(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == kind]


def test_claude_code_transcript_keeps_every_shape_as_its_own_record(project: Path) -> None:
    records = imported(project, CLAUDE)
    assert [r["kind"] for r in records[:2]] == ["session", "import"]
    provenance = records[1]
    assert provenance["format"] == "claude-code" and provenance["source_session"] == CLAUDE.stem
    assert provenance["sha256"] == __import__("hashlib").sha256(CLAUDE.read_bytes()).hexdigest()
    messages = kinds(records, "message")
    blocks = [b for m in messages for b in m["content"]]
    # one API message written as one line per block comes back as one message, parallel calls together
    parallel = [m for m in messages if [b.get("name") for b in m["content"] if b["type"] == "tool_use"] == ["Grep", "Glob"]]
    assert len(parallel) == 1
    thinking = [b for b in blocks if b["type"] == "thinking"]
    assert len(thinking) == 1 and len(thinking[0]["signature"]) > 100
    assert any(b["type"] == "image" for b in blocks)
    interrupted = [b for b in blocks if b["type"] == "tool_result" and "interrupted" in str(b["content"])]
    assert len(interrupted) == 1 and interrupted[0]["is_error"] is True
    asides = [r["what"] for r in kinds(records, "aside")]
    assert asides.count("sidechain") == 4 and asides.count("branch") == 1 and "summary" in asides
    (hint,), (delivered,) = kinds(records, "hint"), kinds(records, "hint_delivered")
    assert hint["mode"] == "queue" and delivered["ids"] == [hint["id"]]
    assert "also run the linter" in json.dumps(records[delivered["message_seq"]]["content"])
    # the source's usage, once per API message, as it reported it
    source = [json.loads(line) for line in CLAUDE.read_text().splitlines()]
    per_message = {r["message"]["id"]: r["message"]["usage"] for r in source
                   if r.get("type") == "assistant" and not r.get("isSidechain")}
    usage = kinds(records, "usage")
    assert len(usage) == len(kinds(records, "request")) == len(per_message)
    assert sum(u["cache_read_input_tokens"] for u in usage) == sum(u["cache_read_input_tokens"] for u in per_message.values())
    assert [r["kind"] for r in records[-1:]] == ["thinking_cut"]
    assert kinds(records, "tool_run")[-1]["command"] == "ruff check src"


def test_compaction_leaves_the_view_as_it_left_the_source_context(project: Path) -> None:
    records = imported(project, CLAUDE)
    view = Conversation.from_records(records).active()
    (compaction,) = kinds(records, "compaction")
    assert compaction["trigger"] == "manual" and compaction["pre_tokens"] > 16_000
    assert view[0].role == "user" and view[0].texts()[0].startswith("This session is being continued")
    assert len(view) == len(kinds(records, "message")) - compaction["boundary"]
    assert not any(b.type == "thinking" for m in view for b in m.content)


def test_codex_rollout_maps_calls_outputs_reasoning_and_token_counts(project: Path) -> None:
    records = imported(project, CODEX)
    assert records[1]["format"] == "codex" and records[1]["context_window"] == 272000
    assert records[0]["model"] == "gpt-5-codex"
    blocks = [b for m in kinds(records, "message") for b in m["content"]]
    names = [b["name"] for b in blocks if b["type"] == "tool_use"]
    assert names == ["shell", "shell", "shell", "apply_patch", "local_shell", "shell"]
    results = {b["tool_use_id"]: b for b in blocks if b["type"] == "tool_result"}
    assert len(results) == len(names)
    assert sum(1 for b in results.values() if b.get("is_error")) == 2  # the failed rg and the interrupted call
    reasoning = [b for b in blocks if b["type"] == "thinking"]
    assert reasoning[0]["thinking"] == "**Step 1**" and reasoning[0]["encrypted_content"].startswith("gAAAA")
    assert any(b["type"] == "image" and b["source"]["type"] == "base64" for b in blocks)
    token_counts = [json.loads(line) for line in CODEX.read_text().splitlines() if '"token_count"' in line]
    answered = {json.dumps(t["payload"]["info"]["total_token_usage"]) for t in token_counts if t["payload"]["info"]}
    usage = kinds(records, "usage")
    assert len(usage) == len(answered) == 6
    assert all(u["cache_creation_input_tokens"] == 0 for u in usage) and usage[1]["cache_read_input_tokens"] > 9_000
    assert [r["what"] for r in kinds(records, "aside")] == ["developer", "turn_aborted"]
    assert len(kinds(records, "compaction")) == 1


def test_importing_the_same_file_twice_names_the_session_it_became(project: Path, tmp_path: Path) -> None:
    first = rhapsody("import", str(FIXTURES), cwd=project)
    assert first.returncode == 0, first.stderr
    again = rhapsody("import", str(CLAUDE), cwd=project)
    session_id = first.stdout.split(f"{CLAUDE}: imported as ")[1].split()[0]
    assert again.returncode == 0 and f"already imported as {session_id}" in again.stdout
    files = list((project / ".rhapsody" / "history").glob("*.jsonl"))
    assert len([p for p in files if not started_by_another(p)]) == 3  # two Claude Code files, one Codex
    assert len(files) > 3  # and their Task sub-agents' sessions (tests/importer/test_import_subagents.py)
    grown = tmp_path / CLAUDE.name  # the session went on in Claude Code after the first import
    grown.write_text(CLAUDE.read_text() + json.dumps({"type": "summary", "summary": "later", "leafUuid": "x"}) + "\n")
    later = rhapsody("import", str(grown), cwd=project)
    assert f"the file has changed since an earlier copy was imported as {session_id}" in later.stdout


@pytest.mark.parametrize("damage, where", [
    (lambda text: text.replace("\n", "\n{not json\n", 1), "line 2: not a JSON object"),
    (lambda text: text[:-40], "a partial last line"),
    (lambda text: text + '{"type":"user","uuid":"u9","parentUuid":null,"message":5}\n', "line 32: 'message' is not a dict"),
])
def test_a_malformed_or_partial_file_is_one_line_and_nothing_is_written(project: Path, tmp_path: Path,
                                                                        damage: Any, where: str) -> None:
    folder = tmp_path / "sessions"
    shutil.copytree(FIXTURES, folder)
    bad = folder / "claude" / CLAUDE.name
    bad.write_text(damage(bad.read_text()))
    result = rhapsody("import", str(folder), cwd=project)
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert str(bad) in result.stderr and where in result.stderr
    assert not list(project.glob(".rhapsody/history/*")), "the good file in the same folder was not imported either"


def test_a_file_of_another_kind_is_refused_in_one_line(project: Path, tmp_path: Path) -> None:
    other = dump([{"event": "x"}], tmp_path / "other.jsonl")
    result = rhapsody("import", str(other), cwd=project)
    assert result.returncode == 2 and "line 1: neither a Claude Code transcript nor a Codex rollout" in result.stderr
    assert rhapsody("import", str(tmp_path / "missing"), cwd=project).returncode == 2


@pytest.mark.parametrize("make, tool", [(claude_session, "Bash"), (codex_rollout, "shell")])
async def test_a_long_imported_session_resumes_headless_then_hands_off_with_slash_handoff_and_recalls(
        stub: Stub, project: Path, tmp_path: Path, make: Any, tool: str) -> None:
    source = dump(make(300), tmp_path / "src" / "session.jsonl")
    records = imported(project, source)
    session_id = records[0]["session"]
    stub.script(say("I have read the imported session and will go on from where it stopped."))
    # The context is past 0.4 of the window the source ran in (Codex's 272k): the automatic seam would come
    # first, and this test is about /handoff; with the checkpoint policy a seam that pays comes before the
    # human's words too (tests/core/session/test_checkpoint_seams.py has that seam)
    resumed = rhapsody("-p", "go on", "--resume", session_id, "--cwd", str(project), "--model", MODEL,
                       "--handoff-at-share", "off", "--seam-policy", "threshold",
                       cwd=project, env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url})
    assert resumed.returncode == 0, resumed.stderr
    (first,) = stub.bodies()
    validate(first)  # the loopback would have refused it too: roles alternate, every call answered
    sent = [b for m in first["messages"] if isinstance(m["content"], list) for b in m["content"]]
    in_view = [b for m in Conversation.from_records(records).active() for b in m.tool_uses()]
    assert len(in_view) > 30 and len(kinds(records, "compaction")) >= 1  # the source compacted on its own
    assert sum(1 for b in sent if b["type"] == "tool_use" and b["name"] == tool) == len(in_view)
    assert not any(b["type"] == "thinking" for b in sent)

    stub.script(handoff_turn(), say("Noted."), say("Going on from my note."))
    wiring = build(project, Settings(permission_mode="yolo", sandbox=SANDBOX, handoff_at_share="off"), stub.model(), MODEL,
                   resume=session_id)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("/handoff\r")  # as the human types it in plain mode (ctrl+o there and in the app)
        await until(lambda: bool(wiring.session.conversation.seams) and not wiring.agent.busy, within=60)
        pipe.send_text("what next?\r")
        await until(lambda: len(stub.server.requests) == 4 and not wiring.agent.busy, within=60)
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 30) == 0
    (seam,) = [r for r in dumped(wiring.session.records) if r["kind"] == "seam"]
    assert seam["before"]["tool_use"] == len(in_view) + 1 and seam["after"]["tool_use"] == 1
    after = stub.bodies()[-1]
    names = [b["name"] for m in after["messages"] if isinstance(m["content"], list) for b in m["content"]
             if b["type"] == "tool_use"]
    assert names == ["micro_handoff"]
    assert len(json.dumps(after)) < len(json.dumps(first)) / 5
    hits = search(wiring.session.path, "value_123")
    assert hits and hits[0].tool == tool and "value_123" in hits[0].verbatim


def test_the_transcript_says_where_the_session_came_from_and_where_the_source_compacted(project: Path) -> None:
    from rhapsody.view.render import record_lines

    records = imported(project, CLAUDE)
    lines = [line.text for _, line in record_lines(parsed(records), project, records[0]["session"],
                                                   Conversation.from_records(records))]
    assert any(t.startswith(f"· imported claude-code session {CLAUDE.stem} from ") for t in lines)
    compacted = next(i for i, t in enumerate(lines) if t.startswith("· the source compacted its context here, manual"))
    assert "This session is being continued" in " ".join(lines[compacted + 1:compacted + 3])


def test_a_parent_link_into_another_file_keeps_the_messages_written_before_it(project: Path, tmp_path: Path) -> None:
    lines = claude_session(3)
    lines[4]["parentUuid"] = "uuid-of-a-record-in-an-earlier-file"  # Claude Code links a resumed session back
    records = imported(project, dump(lines, tmp_path / "linked.jsonl"))
    assert sum(1 for m in kinds(records, "message") for b in m["content"] if b["type"] == "tool_use") == 3
    assert not [r for r in kinds(records, "aside") if r["what"] == "branch"]


def test_an_empty_file_in_a_folder_is_skipped_and_the_others_imported(project: Path, tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    shutil.copytree(FIXTURES / "claude", folder)
    (folder / "empty.jsonl").write_text("")
    result = rhapsody("import", str(folder), cwd=project)
    assert result.returncode == 0 and f"{folder / 'empty.jsonl'}: empty; nothing imported" in result.stdout
    assert " imported as " in result.stdout


def test_a_codex_rollout_of_the_older_form_imports_too(project: Path, tmp_path: Path) -> None:
    """Rollouts written before `session_meta`: a bare header line, then bare response items and state lines."""
    wrapped = codex_rollout(3)
    legacy = [{"id": "0197-legacy", "timestamp": wrapped[0]["timestamp"], "instructions": None},
              *[w["payload"] for w in wrapped if w["type"] == "response_item"], {"record_type": "state"}]
    records = imported(project, dump(legacy, tmp_path / "rollout-old.jsonl"))
    assert records[1]["format"] == "codex" and records[1]["source_session"] == "0197-legacy"
    assert sum(1 for m in kinds(records, "message") for b in m["content"] if b["type"] == "tool_use") == 3


def test_credentials_in_imported_tool_results_are_masked(project: Path, tmp_path: Path) -> None:
    lines = claude_session(2)
    key = "sk-ant-api03-" + "Q" * 40
    result = next(r for r in lines if r["type"] == "user" and isinstance(r["message"]["content"], list))
    result["message"]["content"][0]["content"] = f"ANTHROPIC_API_KEY={key}\nDEPLOY=ghost-value-123456"
    written = rhapsody("import", str(dump(lines, tmp_path / "leaky.jsonl")), cwd=project,
                       env={"DEPLOY_TOKEN": "ghost-value-123456"})
    assert written.returncode == 0, written.stderr
    history = next((project / ".rhapsody" / "history").glob("*.jsonl")).read_text()
    assert key not in history and "ghost-value-123456" not in history and history.count("[masked secret]") == 2


@pytest.mark.parametrize("source", [CLAUDE, CODEX])
def test_every_shape_resumes_with_a_request_the_api_accepts(stub: Stub, project: Path, source: Path) -> None:
    records = imported(project, source)
    stub.script(say("Going on."))
    resumed = rhapsody("-p", "go on", "--resume", records[0]["session"], "--cwd", str(project), "--model", MODEL,
                       cwd=project, env={"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url})
    assert resumed.returncode == 0, resumed.stderr
    (body,) = stub.bodies()
    validate(body)
    first = body["messages"][0]["content"]
    assert "previous conversation" in json.dumps(first) or "Summary:" in json.dumps(first)  # the view starts at the compaction
    assert body["messages"][-1]["content"][-1]["text"] == "go on"


def test_imported_thinking_would_be_refused_so_it_leaves_the_view(project: Path) -> None:
    from rhapsody.core.session.context import build_request, spec_from_record
    from rhapsody.loopback.validate import InvalidRequest

    records = imported(project, CLAUDE)
    spec = spec_from_record(parse(records[0]))
    uncut = Conversation.from_records([r for r in records if r["kind"] not in ("thinking_cut", "compaction")])
    messages = uncut.active() + [Message(role="user", content=[{"type": "text", "text": "go on"}])]
    with pytest.raises(InvalidRequest, match="signature"):  # its signature binds it to Claude Code's own prompt and tools
        validate(build_request(spec, messages))
    cut = Conversation.from_records([r for r in records if r["kind"] != "compaction"])
    validate(build_request(spec, cut.active() + messages[-1:]))


async def test_the_resume_picker_shows_an_imported_sessions_branch_and_never_a_compaction_summary(
        project: Path) -> None:
    from rhapsody.frontends.app.picker import SessionPicker

    imported(project, CLAUDE)
    picker = SessionPicker(project)
    async with picker.run_test(size=(140, 24)):
        listing = picker.query_one("OptionList")
        line = str(listing.get_option_at_index(0).prompt)
    assert "  main  " in line  # the source's git branch
    assert "This session is being continued" not in line  # the source's compaction summary is not a typed message
