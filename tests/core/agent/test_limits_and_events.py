"""Turn limits, the Interrupted event, and observers, through the real loop and loopback server."""

from __future__ import annotations

import asyncio
import io
import re
import threading
from contextlib import aclosing
from pathlib import Path

import pytest

from rhapsody.core.events import (
    Event,
    HintDelivered,
    Interrupted,
    LimitsExceeded,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnEnded,
)
from rhapsody.core.session.history import read_history
from rhapsody.core.agent.loop import Agent
from rhapsody.core.session.session import Session
from rhapsody.frontends.headless import run_headless
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, collect, held

NARRATE = "I will print a marker with echo so each step of this turn leaves a visible trace."
WITHIN = 10.0


def steps(n: int) -> list[dict[str, object]]:
    return [call(NARRATE, "bash", command=f"echo step-{i}") for i in range(1, n + 1)]


async def test_max_steps_per_turn_ends_the_turn_before_the_next_request(stub: Stub, project: Path) -> None:
    stub.script(*steps(3), say("all three done"))
    wiring = stub.wire(project, max_steps_per_turn=2)
    events = await collect(wiring.agent.run("print three markers"))
    assert [e.call.input["command"] for e in events if isinstance(e, ToolFinished)] == ["echo step-1", "echo step-2"]
    assert events[-2:] == [LimitsExceeded("max_steps_per_turn", 2, 2), TurnEnded("limit")]
    assert len(stub.bodies()) == 2
    limits = [r for r in read_history(wiring.session.path).records if r["kind"] == "limit"]
    assert [(r["limit"], r["value"], r["maximum"]) for r in limits] == [("max_steps_per_turn", 2, 2)]
    more = await collect(wiring.agent.run("go on"))  # a new turn has its own steps
    assert [e.call.input["command"] for e in more if isinstance(e, ToolFinished)] == ["echo step-3"]
    assert more[-1] == TurnEnded("end_turn")


async def test_max_cost_usd_stops_before_a_request_once_spent_and_headless_says_so(stub: Stub, project: Path) -> None:
    stub.script(*steps(2), say("done"))
    wiring = stub.wire(project, max_cost_usd=0.0001)
    out, err = io.StringIO(), io.StringIO()
    status = await run_headless(wiring.agent, "print markers", out=out, err=err)
    assert status == 3 and len(stub.bodies()) == 1
    spent = wiring.session.figures.usage
    assert spent["input_tokens"] + spent["cache_creation_input_tokens"] > 0
    assert re.search(r"limit reached: \$0\.\d{4} spent of max_cost_usd \$0\.0001; the turn stopped", err.getvalue())
    assert "limit reached" not in out.getvalue() and "bash echo step-1 → exit 0" in out.getvalue()  # said once
    again = await collect(wiring.agent.run("and now?"))
    assert isinstance(again[-2], LimitsExceeded) and again[-2].limit == "max_cost_usd" and len(stub.bodies()) == 1


async def consume_until_cancelled(agent: Agent, text: str, seen: type[Event]) -> list[Event]:
    """Drive a turn in a task, cancel it once an event of type `seen` arrived; the events."""
    events: list[Event] = []
    arrived = asyncio.Event()

    async def consume() -> None:
        async with aclosing(agent.run(text)) as stream:
            async for event in stream:
                events.append(event)
                if isinstance(event, seen):
                    arrived.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(arrived.wait(), WITHIN)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WITHIN)
    return events


async def test_a_cancelled_stream_ends_with_interrupted_holding_what_streamed(stub: Stub, project: Path) -> None:
    words = "Streaming slowly so I can be interrupted. " * 40
    talk, go = held({"content": [{"type": "text", "text": words}]})
    stub.script(talk)
    wiring = stub.wire(project)
    events = await consume_until_cancelled(wiring.agent, "talk", TextDelta)
    go.set()
    last = events[-1]
    assert isinstance(last, Interrupted) and last.during == "stream" and last.open_calls == ()
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert last.partial_text.startswith(streamed) and streamed.startswith("Streaming slowly")
    assert len(last.partial_text) < len(words)  # cancelled mid-reply
    assert not wiring.agent.busy


async def test_a_cancelled_tool_call_ends_with_interrupted_naming_the_open_call(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="sleep 30"), say("never reached"))
    wiring = stub.wire(project)
    events = await consume_until_cancelled(wiring.agent, "wait", ToolStarted)
    started = [e for e in events if isinstance(e, ToolStarted)][0]
    assert events[-1] == Interrupted("", during="tools", open_calls=(started.call.id,))


async def test_observers_see_every_event_in_order_off_the_event_loop(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="echo seen"), say("done"))
    wiring = stub.wire(project)
    wiring.session.hint("a hint typed before the turn", mode="queue")
    seen: list[tuple[str, Event]] = []
    loop_thread = threading.get_ident()
    threads: set[int] = set()

    def observer(session: Session, event: Event) -> None:
        threads.add(threading.get_ident())
        seen.append((session.id, event))

    agent = Agent(wiring.session, wiring.agent.model, wiring.agent.toolbox, wiring.agent.policy, observers=[observer])
    events = await collect(agent.run("go"))
    assert [e for _, e in seen] == events  # complete once the turn is over: the loop drains them
    assert isinstance(events[0], HintDelivered) and events[0].where == "start of turn"
    assert {s for s, _ in seen} == {wiring.session.id} and loop_thread not in threads


async def test_an_observer_that_raises_is_recorded_and_the_turn_goes_on(stub: Stub, project: Path) -> None:
    stub.script(say("fine"))
    wiring = stub.wire(project)

    def broken(session: Session, event: Event) -> None:
        if isinstance(event, TurnEnded):
            raise OSError("disk full")

    agent = Agent(wiring.session, wiring.agent.model, wiring.agent.toolbox, wiring.agent.policy, observers=[broken])
    events = await collect(agent.run("hello"))
    assert events[-1] == TurnEnded("end_turn")
    errors = [r["message"] for r in read_history(wiring.session.path).records if r["kind"] == "error"]
    assert errors == ["observer: function failed on TurnEnded: OSError: disk full"]
