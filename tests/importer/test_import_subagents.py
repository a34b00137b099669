"""Imported Claude Code `Task` sub-agents keep their link: each agent's sidechain becomes a history of its own
naming the parent session and the `Task` call, and the parent gets the `subagent` records a native
`delegate` call writes, which stats count."""

from __future__ import annotations

import json
from pathlib import Path

from rhapsody.core.session.history import read_history
from rhapsody.core.session.records import parsed
from rhapsody.core.accounting.subagent_figures import spent

from tests.importer.test_import import CLAUDE, imported, kinds


def test_task_sub_agents_become_linked_sessions_and_subagent_records(project: Path) -> None:
    records = imported(project, CLAUDE)
    calls = {b["input"]["prompt"]: b["id"] for m in kinds(records, "message") for b in m["content"]
             if b.get("type") == "tool_use" and b.get("name") == "Task"}
    links = kinds(records, "subagent")
    assert [(r["id"], r["state"]) for r in links] == [("sa1", "started"), ("sa1", "done"), ("sa2", "started"),
                                                      ("sa2", "done")]
    tasks = {r["id"]: r for r in links if r["state"] == "started"}
    assert tasks["sa1"]["task"] == "Find every caller of parse()"
    assert tasks["sa1"]["tool_use_id"] == calls["Find every caller of parse()"]
    assert tasks["sa2"]["task"] == "List the test files" and tasks["sa2"]["tool_use_id"] == ""  # no Task call names it
    run = next(i for i, r in enumerate(records) if r["kind"] == "tool_run"
               and r["tool_use_id"] == tasks["sa1"]["tool_use_id"])
    assert [r["kind"] for r in records[run - 2:run]] == ["subagent", "subagent"]  # as a native call's stand
    for sid, link in tasks.items():
        child = read_history(project / ".rhapsody" / "history" / f"{link['session']}.jsonl").records
        assert child[0]["parent"] == {"session": records[0]["session"], "tool_use_id": link["tool_use_id"],
                                      "subagent": sid}
        first = next(r for r in child if r["kind"] == "message")
        assert first["role"] == "user" and link["task"] in json.dumps(first["content"])
    assert spent(parsed(records)).subagents == 2
