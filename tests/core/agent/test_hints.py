"""Hints between tool calls, through the real SDK: a hint lands after the running call's result, a queued
message waits for the end of the turn."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

from rhapsody.core.events import HintDelivered, ToolStarted
from rhapsody.core.session.history import read_history
from rhapsody.loopback.script import call, say

from tests.conftest import Stub

STEP = "I will append a line to log.txt so each executed run of this tool call is visible on disk."


async def test_hint_sent_during_tool_run_reaches_next_request_after_tool_results(stub: Stub, project: Path) -> None:
    stub.script(call(STEP, "bash", command="echo run >> log.txt"), say("Adjusted to the hint."))
    wiring = stub.wire(project)
    delivered = []
    async with aclosing(wiring.agent.run("start")) as events:
        async for event in events:
            if isinstance(event, ToolStarted):
                wiring.session.hint("use tabs, not spaces")
            if isinstance(event, HintDelivered):
                delivered.append(event)
    last_user = stub.bodies()[1]["messages"][-1]["content"]
    assert [b["type"] for b in last_user] == ["tool_result", "text"]
    assert last_user[1]["text"] == "use tabs, not spaces"
    assert delivered and delivered[0].where == "after the bash result"
    kinds = [r["kind"] for r in read_history(wiring.session.path).records]
    assert kinds.index("hint") < kinds.index("hint_delivered")


async def test_queued_message_waits_for_end_of_turn_then_starts_next(stub: Stub, project: Path) -> None:
    stub.script(call(STEP, "bash", command="true"), say("First task done."), say("Second task done."))
    wiring = stub.wire(project)
    async with aclosing(wiring.agent.run("first")) as events:
        async for event in events:
            if isinstance(event, ToolStarted):
                wiring.session.hint("then do the second task", mode="queue")
    bodies = stub.bodies()
    assert len(bodies) == 3
    assert [b["type"] for b in bodies[1]["messages"][-1]["content"]] == ["tool_result"]
    assert bodies[2]["messages"][-1]["content"][0]["text"] == "then do the second task"
