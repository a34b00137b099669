"""The agent loop end to end: real SDK client, loopback server, real tools, real git repo."""

from __future__ import annotations

from pathlib import Path

from rhapsody.core.events import NarrationViolation, ToolFinished, TurnEnded
from rhapsody.core.session.history import read_history
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, collect

NARRATE = "I will read app.py to see how add is implemented, expecting a subtraction bug."


async def test_multi_turn_tool_session_runs_tools_and_sends_results(stub: Stub, project: Path) -> None:
    stub.script(
        call(NARRATE, "read_file", path="app.py"),
        call("The function subtracts instead of adding; I will fix the operator with an exact edit now.",
             "edit_file", path="app.py", old="a - b", new="a + b"),
        say("Fixed: add now returns a + b [measured: file edited]."),
    )
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("fix add"))
    assert (project / "app.py").read_text() == "def add(a, b):\n    return a + b\n"
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [e.call.name for e in finished] == ["read_file", "edit_file"]
    assert isinstance(events[-1], TurnEnded)
    bodies = stub.bodies()
    assert len(bodies) == 3
    last = bodies[-1]["messages"]
    assert last[-1]["content"][0]["type"] == "tool_result"
    assert "edited app.py" in last[-1]["content"][0]["content"]
    assert bodies[0]["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}


async def test_call_without_narration_is_not_run_and_error_is_sent(stub: Stub, project: Path) -> None:
    stub.script(
        call("ok", "write_file", path="x.txt", content="nope"),
        say("Understood."),
    )
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("go"))
    assert not (project / "x.txt").exists()
    violations = [e for e in events if isinstance(e, NarrationViolation)]
    assert len(violations) == 1 and violations[0].words == 1
    result = stub.bodies()[1]["messages"][-1]["content"][0]
    assert result["is_error"] is True and "narration rule" in result["content"]
    kinds = [r["kind"] for r in read_history(wiring.session.path).records]
    assert "violation" in kinds and "tool_run" not in kinds
    assert wiring.session.figures.violations == 1


async def test_parallel_calls_share_one_narration_when_allowed(stub: Stub, project: Path) -> None:
    batch = {"content": [
        {"type": "text", "text": "I will read both files at once, since neither read depends on the other."},
        {"type": "tool_use", "name": "read_file", "input": {"path": "app.py"}},
        {"type": "tool_use", "name": "find_files", "input": {"pattern": "*.py"}},
    ]}
    stub.script(batch, say("Both read."), batch, say("Second call refused."))
    parallel = stub.wire(project, parallel_tools=True)
    events = await collect(parallel.agent.run("read"))
    assert len([e for e in events if isinstance(e, ToolFinished)]) == 2
    assert stub.bodies()[0]["tool_choice"]["disable_parallel_tool_use"] is False
    serial = stub.wire(project)
    events = await collect(serial.agent.run("read"))
    assert [type(e).__name__ for e in events if isinstance(e, (ToolFinished, NarrationViolation))] == [
        "ToolFinished", "NarrationViolation"]


async def test_a_consumer_that_stops_mid_stream_or_mid_tools_leaves_a_valid_history(stub: Stub, project: Path) -> None:
    from contextlib import aclosing

    from rhapsody.core.events import TextDelta, ToolStarted
    from rhapsody.core.session.strip import validity_problems

    stub.script({"content": [{"type": "text", "text": "partial words " * 50}]},
                call(NARRATE, "read_file", path="app.py"), say("after"))
    wiring = stub.wire(project)
    async with aclosing(wiring.agent.run("one")) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                break
    async with aclosing(wiring.agent.run("two")) as events:
        async for event in events:
            if isinstance(event, ToolStarted):
                break
    records = read_history(wiring.session.path).records
    assert [r["during"] for r in records if r["kind"] == "interrupted"] == ["stream", "tools"]
    assert validity_problems(wiring.session.messages()) == []
    await collect(wiring.agent.run("three"))
    assert wiring.session.messages()[-1].texts() == ["after"]


async def test_closing_right_after_a_tool_finished_answers_it_once(stub: Stub, project: Path) -> None:
    from contextlib import aclosing

    from rhapsody.core.session.strip import validity_problems

    stub.script(call(NARRATE, "read_file", path="app.py"), say("after"))
    wiring = stub.wire(project)
    async with aclosing(wiring.agent.run("one")) as events:
        async for event in events:
            if isinstance(event, ToolFinished):
                break
    results = [b for m in wiring.session.messages() for b in m.content if b.type == "tool_result"]
    assert len(results) == 1 and not results[0].is_error
    assert validity_problems(wiring.session.messages()) == []
