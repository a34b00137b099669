"""One cancellation path: wherever Esc lands in a turn, the turn ends the same way.

Cancelled while the answer streams, while a call runs, while a call waits for the human's
approval, or after the model ended its turn (observers still seeing it): the last event is
`Interrupted`, an `interrupted` record saying the same ends what the turn wrote, the
conversation stays valid, and the next turn's request is accepted by the loopback server,
which enforces the Messages API's rules.
"""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import asyncio
import threading
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rhapsody.core.toolbox.approval import HumanApprover
from rhapsody.core.agent import ops
from rhapsody.core.events import ApprovalAsked, Event, Interrupted, TextDelta, ToolStarted, TurnEnded
from rhapsody.core.agent.loop import Agent
from rhapsody.core.agent.round import INTERRUPTED
from rhapsody.core.session.session import Session
from rhapsody.core.session.strip import validity_problems
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, collect, held, until

NARRATE = "I will write a marker file with echo so the turn leaves a trace on disk."
WORDS = {"content": [{"type": "text", "text": "Streaming slowly so I can be interrupted. " * 40}]}


@dataclass
class Point:
    """Where in a turn the cancellation lands: the script, the settings, and when the turn is there."""

    during: str
    script: list[dict[str, Any]]
    settings: dict[str, Any] = field(default_factory=dict)
    approver: HumanApprover | None = None
    gate: threading.Event | None = None
    """Set, an observer holds the turn's end until released: the cancellation lands after the model ended."""
    stream: threading.Event | None = None
    """Set, the reply is held mid-stream (`held`) until the cancellation has landed."""

    def reached(self, events: list[Event]) -> bool:
        if self.approver is not None:
            return bool(self.approver.asked)  # the question is out (as an `ApprovalAsked` on the agent's queue)
        if self.gate is not None:
            return any(isinstance(e, TurnEnded) for e in events)
        wanted = TextDelta if self.during == "stream" else ToolStarted
        return any(isinstance(e, wanted) for e in events)


def streaming() -> Point:
    words, go = held(WORDS)
    return Point("stream", [words], stream=go)


def points() -> dict[str, Callable[[], Point]]:
    marker = call(NARRATE, "bash", command="echo ran > marker.txt; sleep 30")
    return {
        "streaming": streaming,
        "tool call": lambda: Point("tools", [marker]),
        "approval": lambda: Point("tools", [marker], {"permission_mode": "ask"}, approver=HumanApprover()),
        "after the model ended": lambda: Point("turn", [say("All done.")], gate=threading.Event()),
    }


def holding(gate: threading.Event) -> Callable[[Session, Event], None]:
    """An observer that holds the turn's end (the loop awaits its observers) until `gate` is set."""

    def observe(session: Session, event: Event) -> None:
        if isinstance(event, TurnEnded):
            gate.wait(10)

    return observe


async def cancel_at(agent: Agent, point: Point) -> list[Event]:
    """Drive a turn in a task and cancel it once it reached `point`; the events it yielded."""
    events: list[Event] = []

    async def consume() -> None:
        async with aclosing(agent.run("go")) as stream:
            async for event in stream:
                events.append(event)

    task = asyncio.create_task(consume())
    await until(lambda: point.reached(events))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
    for release in (point.gate, point.stream):
        if release is not None:
            release.set()
    return events


@pytest.mark.parametrize("where", list(points()))
async def test_a_turn_cancelled_anywhere_ends_with_interrupted_and_a_valid_history(
        stub: Stub, project: Path, where: str) -> None:
    point = points()[where]()
    stub.script(*point.script, say("Going on."))
    wiring = stub.wire(project, approver=point.approver, **point.settings)
    observers = [holding(point.gate)] if point.gate is not None else []
    agent = Agent(wiring.session, wiring.agent.model, wiring.agent.toolbox, wiring.agent.policy, observers=observers)
    events = await cancel_at(agent, point)

    last = events[-1]
    assert isinstance(last, Interrupted) and last.during == point.during and not agent.busy
    written = [r for r in dumped(wiring.session.records) if r["kind"] not in ("checkpoint", "checkpoint_failed")]
    assert written[-1]["kind"] == "interrupted" and written[-1]["during"] == point.during
    assert written[-1].get("open", []) == list(last.open_calls) and written[-1]["partial_text"] == last.partial_text
    assert [r["kind"] for r in written].count("interrupted") == 1
    messages = wiring.session.messages()
    assert validity_problems(messages) == []
    if point.during == "tools":  # the open call is answered, and it did not run past the cancellation
        result = messages[-1].content[0]
        assert result.type == "tool_result" and result.is_error and result.text() == INTERRUPTED
        assert last.open_calls == (result.tool_use_id,)
    if point.during == "stream":
        assert messages[-1].role == "assistant" and messages[-1].texts() == [last.partial_text]
        assert 0 < len(last.partial_text) < len(WORDS["content"][0]["text"])  # cut mid-reply
    if point.approver is not None:  # the question went out, is dropped unanswered, and nothing ran
        assert not (project / "marker.txt").exists()
        [question] = [e for e in agent.outbox.ready() if isinstance(e, ApprovalAsked)]
        assert not point.approver.asked and not agent.submit(ops.ApprovalAnswer(id=question.id, decision="once")).ok

    again = await collect(agent.run("go on"))
    assert again[-1] == TurnEnded("end_turn") and wiring.session.messages()[-1].texts() == ["Going on."]
