"""Recall ids are ids: a hostile model's `recall` call never reaches a path outside the project's sessions,
and read-only mode writes no index anywhere (issue 18, item 5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rhapsody.core.session.recall import RecallIdError, fetch, history_of
from rhapsody.core.userstate import state_home
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, collect

NARRATION = "I will fetch that recall id in full so I can read the whole result of the call."


def tool_results(stub: Stub) -> list[dict[str, Any]]:
    """Every tool_result block the loopback server received, in order."""
    seen: dict[str, dict[str, Any]] = {}
    for body in stub.bodies():
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "tool_result":
                    seen[block["tool_use_id"]] = block
    return list(seen.values())


def text_of(block: dict[str, Any]) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def sqlite_files(*folders: Path) -> list[Path]:
    """Recall indexes under `folders` and in rhapsody's state folder (where indexes live)."""
    return [p for folder in (*folders, state_home()) for p in folder.rglob("*.recall.sqlite*")]


def outside_history(tmp_path: Path) -> Path:
    """A history file of another project: what a walked-out id would open and index."""
    other = tmp_path / "other" / ".rhapsody" / "history"
    other.mkdir(parents=True)
    victim = other / "20260101-000000-abcdef.jsonl"
    record = {"v": 1, "seq": 0, "ts": 0.0, "kind": "message", "role": "assistant",
              "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "cat secret"}}]}
    victim.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return victim


HOSTILE_IDS = ["../../other/.rhapsody/history/20260101-000000-abcdef:toolu_1",
               "../../../other/.rhapsody/history/20260101-000000-abcdef:toolu_1",
               "/tmp/x:toolu_1", "20260101-000000-abcdef/../../x:toolu_1", "note:../../../other.md",
               "20260101-000000-abcdef:toolu_1", "x", ":", "20260101-000000-ABCDEF:toolu_1"]


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
async def test_recall_id_that_is_not_a_session_of_this_project_is_an_error_and_opens_nothing(
        stub: Stub, project: Path, tmp_path: Path, hostile: str) -> None:
    victim = outside_history(tmp_path)
    stub.script(call(NARRATION, "recall", id=hostile), say("done"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("recall it"))
    [result] = tool_results(stub)
    assert result.get("is_error") is True
    assert "cat secret" not in text_of(result)
    assert sqlite_files(tmp_path) == [], "an index was written for a file the id walked to"
    assert victim.stat().st_size > 0


def test_history_of_finds_only_listed_sessions_and_never_joins_the_id(project: Path, tmp_path: Path) -> None:
    outside_history(tmp_path)
    history = project / ".rhapsody" / "history"
    history.mkdir(parents=True)
    mine = history / "20260102-030405-a1b2c3.jsonl"
    mine.write_text("", encoding="utf-8")
    assert history_of(project, "20260102-030405-a1b2c3:toolu_9") == mine
    for bad in ("20260101-000000-abcdef:toolu_1", "../../other/.rhapsody/history/20260101-000000-abcdef:t"):
        with pytest.raises(RecallIdError):
            fetch(project, bad)


async def test_read_only_mode_recall_writes_no_index_anywhere(stub: Stub, project: Path, tmp_path: Path) -> None:
    stub.script(call("First I print a unique marker so that there is a call to recall afterwards.", "bash",
                     command="echo marker-$((6*7))"), say("printed"))
    first = stub.wire(project)
    await collect(first.agent.run("print"))
    earlier = first.session.id
    assert sqlite_files(tmp_path) == []
    stub.script(call("I search every session for the marker printed earlier, read-only as I was asked.", "recall",
                     query="marker-42", all_sessions=True),
                call(NARRATION, "recall", id=f"{earlier}:{_first_call_id(first.session.path)}"), say("found"))
    second = stub.wire(project, permission_mode="read-only")
    await collect(second.agent.run("recall the marker"))
    search, fetched = tool_results(stub)[-2:]
    assert "marker-42" in text_of(search) and not search.get("is_error")
    assert "marker-42" in text_of(fetched) and not fetched.get("is_error")
    assert sqlite_files(tmp_path) == [], "read-only mode wrote a recall index"


def _first_call_id(history: Path) -> str:
    for line in history.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for block in record.get("content", []) if record.get("kind") == "message" else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                return str(block["id"])
    raise AssertionError("no tool call in the history")
