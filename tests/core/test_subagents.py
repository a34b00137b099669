"""Sub-agents through the real loop on the loopback server, one script playing parent and child in turn: its
traffic stays in its own history, a hint and a denial reach it, Esc and its budget stop it, and its history
resumes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from rhapsody.core.events import HintDelivered, SubagentEnded, SubagentStarted, SubagentStep, ToolFinished, ToolStarted
from rhapsody.core.history import read_history
from rhapsody.core.session import Session
from rhapsody.core.tools import Approval
from rhapsody.loopback.script import call, say

from tests.conftest import GATE, Stub, collect, until

TASK = "Find what add in app.py returns and say whether it is right."
FOUND = "add returns a minus b, so it subtracts: that is the bug."


def delegate(task: str = TASK, **more: Any) -> dict[str, Any]:
    return call("I will hand the reading to a sub-agent so its traffic stays out of my context.", "delegate",
                task=task, **more)


def child_read() -> dict[str, Any]:
    return call("I will read app.py to see what add returns, as the task asks.", "read_file", path="app.py")


def traffic(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool_use and tool_result block of a request."""
    return [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
            if b.get("type") in ("tool_use", "tool_result")]


def history(root: Path, session_id: str) -> list[dict[str, Any]]:
    return read_history(root / ".rhapsody" / "history" / f"{session_id}.jsonl").records


async def test_the_parent_gets_the_final_text_and_what_it_touched_never_the_traffic(stub: Stub, project: Path) -> None:
    stub.script(delegate(), child_read(), say(FOUND), say("The sub-agent found the bug."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("is add right?"))
    parent_first, child_first, child_second, parent_next = stub.bodies()
    assert child_first["messages"][0]["content"][0]["text"] == TASK  # its own context: the task alone
    assert "## You are a sub-agent" in json.dumps(child_first["system"])
    assert "def add(a, b)" in json.dumps(traffic(child_second))  # the child read the file
    sent = traffic(parent_next)
    assert [b["type"] for b in sent] == ["tool_use", "tool_result"] and sent[0]["name"] == "delegate"
    result = sent[1]["content"]
    assert FOUND in result and "Files read: app.py" in result and "Files changed: none" in result
    assert "def add(a, b)" not in json.dumps(parent_next) and "read_file" not in json.dumps(parent_next["messages"])
    started = next(e for e in events if isinstance(e, SubagentStarted))
    steps = [e.event for e in events if isinstance(e, SubagentStep) and e.id == started.id]
    assert [type(s).__name__ for s in steps if isinstance(s, (ToolStarted, ToolFinished))] == ["ToolStarted",
                                                                                                "ToolFinished"]
    assert [(e.status) for e in events if isinstance(e, SubagentEnded)] == ["done"]
    child = history(project, started.session)
    assert child[0]["parent"] == {"session": wiring.session.id, "tool_use_id": sent[0]["id"], "subagent": "sa1"}
    links = [r for r in wiring.session.records if r["kind"] == "subagent"]
    assert [r["state"] for r in links] == ["started", "done"] and links[1]["session"] == started.session
    assert links[1]["tool_calls"] == 1 and links[1]["kept_out_tokens"] > 0 and links[1]["usage"]["output_tokens"] > 0

