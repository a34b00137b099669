"""Imported todo lists: Claude Code's TodoWrite calls and Codex's update_plan calls become rhapsody's
todo list, so a resumed imported session shows and re-states the list the source left."""

from __future__ import annotations

import json
from pathlib import Path

from rhapsody.core.session.session import Session

from tests.importer.test_import import imported, kinds
from tests.transcripts import _Claude, _Codex, dump


def claude_with_todos() -> list[dict[str, object]]:
    c = _Claude(11)
    c.user("Fix the parser and add a test.")
    for i, todos in enumerate(([{"content": "Fix the parser", "status": "in_progress", "activeForm": "Fixing"},
                                {"content": "Add a test", "status": "pending", "activeForm": "Adding"}],
                               [{"content": "Fix the parser", "status": "completed", "activeForm": "Fixing"},
                                {"content": "Add a test", "status": "in_progress", "activeForm": "Adding"}])):
        call = c.call(i, "TodoWrite", todos=todos)
        c.assistant([{"type": "text", "text": "Updating the list."}, call])
        c.result(call, "Todos have been modified successfully.")
    c.assistant([{"type": "text", "text": "Parser fixed; the test is next."}], stop="end_turn")
    return c.lines


def codex_with_plan() -> list[dict[str, object]]:
    c = _Codex(3)
    c.open()
    c.user("Fix the parser.")
    plan = {"explanation": "two steps", "plan": [{"step": "Read the parser", "status": "completed"},
                                                  {"step": "Fix the bug", "status": "in_progress"}]}
    c.add("response_item", {"type": "function_call", "name": "update_plan", "arguments": json.dumps(plan),
                            "call_id": "call_plan1"})
    c.tokens()
    c.output("call_plan1", "Plan updated")
    c.add("response_item", {"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": "Fixing now."}]})
    c.tokens()
    return c.lines


def test_claude_code_todowrite_calls_become_the_todo_list(project: Path, tmp_path: Path) -> None:
    records = imported(project, dump(claude_with_todos(), tmp_path / "todo.jsonl"))
    lists = [[(i["content"], i["status"]) for i in r["items"]] for r in kinds(records, "todo")]
    assert lists == [[("Fix the parser", "in_progress"), ("Add a test", "pending")],
                     [("Fix the parser", "done"), ("Add a test", "in_progress")]]
    path = project / ".rhapsody" / "history" / f"{records[0]['session']}.jsonl"
    resumed = Session.resume(project, path)
    assert [(i.content, i.status) for i in resumed.todos.items()] == lists[-1]


def test_codex_update_plan_calls_become_the_todo_list(project: Path, tmp_path: Path) -> None:
    records = imported(project, dump(codex_with_plan(), tmp_path / "rollout-2026-01-01T00-00-00-plan.jsonl"))
    (todo,) = kinds(records, "todo")
    assert [(i["content"], i["status"]) for i in todo["items"]] == [("Read the parser", "done"),
                                                                     ("Fix the bug", "in_progress")]
