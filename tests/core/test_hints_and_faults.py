"""Hints between tool calls, and the faults a stream can suffer, through the real SDK."""

from __future__ import annotations

from contextlib import aclosing
from pathlib import Path

import pytest

from rhapsody.core.events import Failed, HintDelivered, Retrying, ToolFinished, ToolStarted, TurnEnded
from rhapsody.core.history import read_history
from rhapsody.loopback.script import call, say
from rhapsody.loopback.server import Fault

from tests.conftest import Stub, collect

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


@pytest.mark.parametrize("fault", [
    Fault("status", status=429, retry_after=0),
    Fault("status", status=529, retry_after=0),
    Fault("status", status=500, retry_after=None),
    Fault("sse_error", after_events=3),
    Fault("drop", after_events=3),
    Fault("truncate", after_events=3),
])
async def test_each_fault_is_survived_and_no_tool_runs_twice(stub: Stub, project: Path, fault: Fault) -> None:
    stub.script(call(STEP, "bash", command="echo run >> log.txt"), say("Done."))
    stub.server.inject(fault)
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("go"))
    assert isinstance(events[-1], TurnEnded)
    assert any(isinstance(e, Retrying) for e in events)
    assert (project / "log.txt").read_text() == "run\n"
    assert len([e for e in events if isinstance(e, ToolFinished)]) == 1
    messages = [r for r in read_history(wiring.session.path).records if r["kind"] == "message"]
    assert not any("lost to an injected fault" in str(m["content"]) for m in messages)


async def test_retries_exhausted_gives_a_clear_failure(stub: Stub, project: Path) -> None:
    stub.script(say("never"))
    stub.server.inject(*[Fault("status", status=529, retry_after=0)] * 3)
    wiring = stub.wire(project, retries=2)
    events = await collect(wiring.agent.run("go"))
    assert isinstance(events[-1], Failed)
    assert "failed 3 times" in events[-1].message and "529" in events[-1].message


async def test_slow_server_past_timeout_is_retried(stub: Stub, project: Path) -> None:
    import anthropic

    from rhapsody.providers.anthropic import AnthropicModel
    from rhapsody.config.settings import Settings
    from rhapsody.wiring import build

    stub.script(say("Done after a slow start."))
    stub.server.inject(Fault("slow", seconds=1.0))
    client = anthropic.AsyncAnthropic(base_url=stub.server.url, api_key="k", max_retries=0, timeout=0.3)
    wiring = build(project, Settings(), AnthropicModel(client, retries=2, base_delay=0), "claude-sonnet-5-5")
    events = await collect(wiring.agent.run("go"))
    assert isinstance(events[-1], TurnEnded)
    assert any(isinstance(e, Retrying) and "Timeout" in e.reason for e in events)
    assert wiring.session.messages()[-1].texts() == ["Done after a slow start."]
