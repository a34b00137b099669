"""The typed way in: each operation submitted to the agent does, through the real loop on the loopback
server, what the front ends used to do by reaching into the session and the toolbox; every event, the
permission questions included, comes back on the agent's one queue."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from rhapsody.core.agent import ops
from rhapsody.core.toolbox.approval import HumanApprover
from rhapsody.core.events import (ApprovalAsked, Event, HintDelivered, Idle, Interrupted, SeamCommitted,
                                  ShellRan, ToolStarted)
from rhapsody.core.session import records as rec
from rhapsody.core.session.history import read_history
from rhapsody.core.agent.loop import Agent
from rhapsody.loopback.script import call, say

from tests.conftest import GATE, Stub, no_grace
from tests.core.session.test_handoff_e2e import handoff_turn, step

STEP = "I will append a line to log.txt so each executed run of this tool call is visible on disk."


async def until_idle(agent: Agent, on: Callable[[Event], None] = lambda e: None) -> list[Event]:
    """Read the agent's one queue until its work is over, calling `on` with each event."""
    seen: list[Event] = []
    async with asyncio.timeout(30):
        async for event in agent.events():
            seen.append(event)
            on(event)
            if isinstance(event, Idle):
                return seen
    raise AssertionError("the queue ended")


def kinds(agent: Agent) -> list[str]:
    return [r["kind"] for r in read_history(agent.session.path).records]


async def test_a_hint_submitted_during_a_tool_call_lands_after_its_result(stub: Stub, project: Path) -> None:
    stub.script(call(STEP, "bash", command=f"{GATE}; echo run >> log.txt"), say("Adjusted to the hint."))
    agent = stub.wire(project).agent
    receipts: list[ops.Receipt] = []

    def on(event: Event) -> None:
        if isinstance(event, ToolStarted):
            receipts.append(agent.submit(ops.AddHint(text="use tabs, not spaces")))
            (project / "go").touch()

    assert agent.submit(ops.UserTurn(text="start")).ok
    seen = await until_idle(agent, on)
    last_user = stub.bodies()[1]["messages"][-1]["content"]
    assert [b["type"] for b in last_user] == ["tool_result", "text"]
    assert last_user[1]["text"] == "use tabs, not spaces"
    assert receipts[0].id == "h1" and receipts[0].text == "[h1 pending: next tool boundary]"
    assert [e.where for e in seen if isinstance(e, HintDelivered)] == ["after the bash result"]


async def test_a_new_turn_while_one_runs_is_refused_and_a_queued_message_waits(stub: Stub, project: Path) -> None:
    stub.script(call(STEP, "bash", command=f"{GATE}; true"), say("First task done."), say("Second task done."))
    agent = stub.wire(project).agent
    refused: list[ops.Receipt] = []

    def on(event: Event) -> None:
        if isinstance(event, ToolStarted):
            refused.append(agent.submit(ops.UserTurn(text="another")))
            agent.submit(ops.QueueMessage(text="then do the second task"))
            (project / "go").touch()

    agent.submit(ops.UserTurn(text="first"))
    await until_idle(agent, on)
    assert not refused[0].ok and "hint" in refused[0].text
    bodies = stub.bodies()
    assert len(bodies) == 3
    assert bodies[2]["messages"][-1]["content"][0]["text"] == "then do the second task"


@pytest.mark.parametrize("decision", ["once", "deny"])
async def test_an_approval_goes_out_as_an_event_and_comes_back_as_an_op(stub: Stub, project: Path,
                                                                        decision: ops.Decision) -> None:
    stub.script(call(STEP, "bash", command="echo run >> log.txt"), say("Understood."))
    agent = stub.wire(project, approver=HumanApprover(grace=no_grace), permission_mode="ask").agent
    answered: list[bool] = []

    def on(event: Event) -> None:
        if isinstance(event, ApprovalAsked):
            assert event.tool == "bash" and "log.txt" in event.argument
            answer = ops.ApprovalAnswer(id=event.id, decision=decision, reason="use the other log")
            answered.append(agent.submit(answer).ok)
            answered.append(agent.submit(answer).ok)  # a second answer to the same question is refused

    agent.submit(ops.UserTurn(text="log a run"))
    await until_idle(agent, on)
    assert answered == [True, False]
    ran = (project / "log.txt").exists()
    last_user = str(stub.bodies()[1]["messages"][-1]["content"])
    assert ran == (decision == "once")
    assert ("use the other log" in last_user) == (decision == "deny")


async def test_interrupt_stops_the_turn_as_esc_did(stub: Stub, project: Path) -> None:
    stub.script(call(STEP, "bash", command=GATE), say("never sent"))
    agent = stub.wire(project).agent
    stopped: list[ops.Receipt] = []

    def on(event: Event) -> None:
        if isinstance(event, ToolStarted):
            stopped.append(agent.submit(ops.Interrupt()))

    agent.submit(ops.UserTurn(text="wait for the gate"))
    seen = await until_idle(agent, on)
    interrupted = [e for e in seen if isinstance(e, Interrupted)]
    assert stopped[0].ok and len(interrupted) == 1 and interrupted[0].during == "tools"
    assert "interrupted" in kinds(agent) and len(stub.bodies()) == 1
    assert not agent.working and not agent.submit(ops.Interrupt()).ok


async def test_set_mode_switches_the_toolbox_on_record(stub: Stub, project: Path) -> None:
    agent = stub.wire(project).agent
    assert agent.submit(ops.SetMode(mode="read-only")).ok
    assert agent.toolbox.permission_mode == "read-only"
    last = read_history(agent.session.path).records[-1]
    assert (last["kind"], last["mode"]) == ("permission_mode", "read-only")


async def test_a_handoff_requested_when_idle_runs_its_turn_and_undo_puts_it_back(stub: Stub, project: Path) -> None:
    stub.script(step(1), say("Marker printed."), handoff_turn(), say("Note written."))
    agent = stub.wire(project).agent
    agent.submit(ops.UserTurn(text="print a marker"))
    await until_idle(agent)
    asked = agent.submit(ops.RequestHandoff())
    seen = await until_idle(agent)
    assert asked.ok and asked.text == "micro-handoff requested"
    assert [e for e in seen if isinstance(e, SeamCommitted)]
    undone = agent.submit(ops.UndoHandoff())
    assert undone.ok and undone.reload and isinstance(undone.record, rec.Unseam)
    assert kinds(agent)[-1] == "unseam"
    assert not agent.submit(ops.UndoHandoff()).ok  # nothing more to undo


async def test_a_notice_is_kept_in_the_history(stub: Stub, project: Path) -> None:
    agent = stub.wire(project).agent
    agent.submit(ops.AddNotice(text="/stats", command=True))
    agent.submit(ops.AddNotice(text="unknown command /nope", error=True))
    notices = [r for r in read_history(agent.session.path).records if r["kind"] == "notice"]
    assert [(n["text"], n.get("command"), n.get("error")) for n in notices] == [
        ("/stats", True, None), ("unknown command /nope", None, True)]


async def test_a_shell_command_runs_sandboxed_and_is_queued_as_the_humans_words(stub: Stub, project: Path) -> None:
    agent = stub.wire(project).agent
    agent.submit(ops.ShellCommand(command="echo hello-from-the-human"))
    seen = await until_idle(agent)
    ran = [e for e in seen if isinstance(e, ShellRan)]
    assert ran and ran[0].exit_code == 0 and "hello-from-the-human" in ran[0].output
    assert [h.id for h in agent.session.pending_hints(("queue",))] == [ran[0].hint_id]
    assert not ran[0].in_turn and ran[0].read_when.endswith("with your next message")  # no turn ran to read it


async def test_a_shell_command_that_ends_beside_a_turn_is_read_by_that_turn_and_says_so(stub: Stub,
                                                                                       project: Path) -> None:
    stub.script(call(STEP, "bash", command=GATE), say("I see what you ran."))
    agent = stub.wire(project).agent
    agent.submit(ops.UserTurn(text="wait for the gate"))

    def on(event: Event) -> None:
        if isinstance(event, ToolStarted):  # the turn's command holds the gate: the human's runs beside it
            agent.submit(ops.ShellCommand(command="echo hello-beside-the-turn"))
        elif isinstance(event, ShellRan):
            (project / "go").touch()

    seen = await until_idle(agent, on)
    [ran] = [e for e in seen if isinstance(e, ShellRan)]
    assert ran.in_turn and ran.read_when == "the agent reads it before this turn ends"
    assert "hello-beside-the-turn" in json.dumps(stub.bodies()[-1]["messages"][-1])  # and that turn read it
    assert not agent.session.pending_hints()


def test_an_op_parses_from_json_by_its_kind_and_refuses_what_it_does_not_know() -> None:
    assert ops.parse({"kind": "hint", "text": "tabs", "mode": "queue"}) == ops.AddHint(text="tabs", mode="queue")
    assert ops.parse({"kind": "approval_answer", "id": "q1", "decision": "deny", "reason": "no"}).kind == \
        "approval_answer"
    for bad in ({"kind": "hint"}, {"kind": "set_mode", "mode": "root"}, {"kind": "launch"},
                {"kind": "interrupt", "now": True}):
        with pytest.raises(ValidationError):
            ops.parse(bad)


async def test_a_question_no_agent_could_put_out_is_denied_unasked() -> None:
    from rhapsody.core.toolbox.approval import UNASKED

    approver = HumanApprover(grace=no_grace)
    answer = await approver("bash", "rm -rf build", "writes outside the sandbox", {"command": "rm -rf build"})
    assert not answer.allow and answer.reason == UNASKED and not approver.asked


async def test_a_line_typed_as_the_turn_closes_is_not_stranded_as_a_hint(stub: Stub, project: Path) -> None:
    """A line entered after the end of the turn looked for hints, but before the work was over (here while a
    Stop hook runs), is a hint, because the agent still works; with no boundary left, it opens a turn of its
    own rather than waiting for the human's next message."""
    from tests.core.toolbox.test_hooks import hook

    stopping, go = project.parent / "stopping", project / "go"
    gate = GATE.replace("[ -e go ]", f"[ -e {go} ]")
    stub.script(say("Reply number 0."), say("Reply number 1."))
    agent = stub.wire(project, hooks=hook("Stop", f"[ -e {stopping} ] || {{ touch {stopping}; {gate}; }}")).agent
    working: list[bool] = []

    async def type_as_it_closes() -> None:
        while not stopping.exists():
            await asyncio.sleep(0.01)
        working.append(agent.working)  # what the controller asks before it calls a line a hint
        agent.submit(ops.AddHint(text="message 1"))
        go.touch()

    agent.submit(ops.UserTurn(text="message 0"))
    typist = asyncio.create_task(type_as_it_closes())
    seen = await until_idle(agent)
    await typist
    assert working == [True]
    bodies = stub.bodies()
    assert len(bodies) == 2
    assert [(b["type"], b["text"]) for b in bodies[1]["messages"][-1]["content"]] == [("text", "message 1")]
    assert [e.where for e in seen if isinstance(e, HintDelivered)] == ["start of turn"]
    assert not agent.session.pending_hints() and not agent.working
