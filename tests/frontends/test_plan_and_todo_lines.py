"""Plain mode and headless show plan mode and the todo list: the plan printed and answered from the typed
line, the list as lines; headless JSONL has the list as its `todo_list` event."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path


from rhapsody.core.toolbox.approval import HumanApprover
from rhapsody.frontends.headless import run_headless
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, plain_mode, until

PLAN = "1. Fix add in app.py.\n2. Run the tests."
TODOS = [{"content": "Fix add", "status": "in_progress"}, {"content": "Run the tests", "status": "pending"}]


async def test_plain_mode_prints_the_plan_and_a_line_rejects_it_with_those_words(stub: Stub, project: Path) -> None:
    stub.script(call("I have read app.py; here is my plan for you to approve.", "exit_plan", plan=PLAN),
                call("I will write the todo list from the revised plan.", "todo_write", todos=TODOS),
                say("I will check the callers first."))
    approver = HumanApprover()
    wiring = stub.wire(project, approver=approver, permission_mode="plan")
    async with plain_mode(wiring, approver) as (pipe, out, task):
        pipe.send_text("fix add\r")
        await until(lambda: "the agent proposes this plan" in out.getvalue())
        pipe.send_text("look at the callers first\r")
        await until(lambda: not wiring.agent.busy and len(stub.server.requests) >= 3)
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    text = out.getvalue()
    assert "│ 1. Fix add in app.py." in text and "y = approve, then auto-edit" in text
    assert "☰ todo 0/2 done" in text and "[>] Fix add" in text and "[ ] Run the tests" in text
    after = stub.bodies()[1]["messages"][-1]["content"]
    assert after[0]["is_error"] and after[1]["text"] == "look at the callers first"
    assert wiring.agent.toolbox.permission_mode == "plan"


async def test_headless_jsonl_has_the_todo_list_event(stub: Stub, project: Path) -> None:
    stub.script(call("I will write the todo list for this task first.", "todo_write", todos=TODOS), say("Listed."))
    wiring = stub.wire(project)
    out = io.StringIO()
    assert await run_headless(wiring.agent, "fix add", output="jsonl", out=out, err=io.StringIO()) == 0
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    (listed,) = [e for e in events if e["event"] == "todo_list"]
    assert listed["items"] == TODOS
