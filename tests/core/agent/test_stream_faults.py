"""The faults a stream can suffer, through the real SDK: each is retried with its reason, no tool runs twice,
and retries that run out end in one clear failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from rhapsody.core.events import Failed, Retrying, ToolFinished, TurnEnded
from rhapsody.core.session.history import read_history
from rhapsody.loopback.script import call, say
from rhapsody.loopback.server import Fault

from tests.conftest import Stub, collect

STEP = "I will append a line to log.txt so each executed run of this tool call is visible on disk."


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
