"""Plan review as an event and an op, through the real loop on the loopback server: exit_plan's plan goes out
on the agent's one queue as `PlanReviewAsked`, a `PlanAnswer` with its id comes back by `submit`; an
interrupted plan is dropped; where no one reviews plans (the Python API, headless) exit_plan says so."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from rhapsody.core.agent import ops
from rhapsody.core.agent.loop import Agent
from rhapsody.core.events import Event, Idle, Interrupted, PlanReviewAsked
from rhapsody.core.session.history import read_history
from rhapsody.core.toolbox.approval import HumanApprover
from rhapsody.loopback.script import say

from rhapsody.config.settings import Settings
from rhapsody.wiring import build

from tests.conftest import MODEL, SANDBOX, Stub, no_grace
from tests.core.agent.test_plan_mode import EDITED, PLAN, REASON, proposal
from tests.core.session.test_handoff_e2e import texts_of


async def until_idle(agent: Agent, on: Callable[[Event], None]) -> list[Event]:
    """Read the agent's one queue until its work is over, calling `on` with each event."""
    seen: list[Event] = []
    async with asyncio.timeout(30):
        async for event in agent.events():
            seen.append(event)
            on(event)
            if isinstance(event, Idle):
                return seen
    raise AssertionError("the queue ended")


def planning(stub: Stub, project: Path) -> Agent:
    return stub.wire(project, approver=HumanApprover(grace=no_grace), permission_mode="plan").agent


async def test_a_plan_goes_out_as_an_event_and_an_edited_approval_comes_back_as_an_op(stub: Stub,
                                                                                    project: Path) -> None:
    stub.script(proposal(), say("Approved; I will start with step 1."))
    agent = planning(stub, project)
    answered: list[bool] = []

    def on(event: Event) -> None:
        if isinstance(event, PlanReviewAsked):
            assert event.plan == PLAN and event.json_name == "plan_review_asked"
            answer = ops.PlanAnswer(id=event.id, decision="approve", plan=EDITED, mode="ask")
            answered.extend([agent.submit(answer).ok, agent.submit(answer).ok])  # the second is refused

    assert agent.submit(ops.UserTurn(text="fix add")).started
    await until_idle(agent, on)
    assert answered == [True, False] and agent.permission_mode == "ask"
    assert any(EDITED in t for t in texts_of(stub.bodies()[1]))
    run = next(r for r in read_history(agent.session.path).records if r.get("name") == "exit_plan"
               and r["kind"] == "tool_run")
    assert run["plan_verdict"] == "approved" and run["plan_edited"]


async def test_a_rejection_with_feedback_keeps_plan_mode_and_the_words_reach_the_model(stub: Stub,
                                                                                      project: Path) -> None:
    stub.script(proposal(), say("Understood; I will look at the callers first."))
    agent = planning(stub, project)

    def on(event: Event) -> None:
        if isinstance(event, PlanReviewAsked):
            agent.submit(ops.PlanAnswer(id=event.id, decision="reject", feedback=REASON))

    agent.submit(ops.UserTurn(text="fix add"))
    seen = await until_idle(agent, on)
    assert [e.plan for e in seen if isinstance(e, PlanReviewAsked)] == [PLAN]
    after = stub.bodies()[1]["messages"][-1]["content"]
    assert after[0]["is_error"] and "rejected" in after[0]["content"] and after[1]["text"] == REASON
    assert agent.permission_mode == "plan"


async def test_an_interrupted_plan_is_dropped_and_its_answer_refused(stub: Stub, project: Path) -> None:
    stub.script(proposal(), say("never sent"))
    agent = planning(stub, project)
    asked: list[PlanReviewAsked] = []

    def on(event: Event) -> None:
        if isinstance(event, PlanReviewAsked):
            asked.append(event)
            agent.submit(ops.Interrupt())

    agent.submit(ops.UserTurn(text="fix add"))
    seen = await until_idle(agent, on)
    assert len(asked) == 1 and any(isinstance(e, Interrupted) for e in seen)
    assert not agent.submit(ops.PlanAnswer(id=asked[0].id, decision="approve")).ok
    assert agent.permission_mode == "plan" and len(stub.bodies()) == 1


async def test_without_a_reviewer_the_answer_is_refused_and_exit_plan_says_no_human(stub: Stub,
                                                                                   project: Path) -> None:
    stub.script(proposal(), say("Here is the plan as my answer."))
    settings = Settings(permission_mode="plan", sandbox=SANDBOX)
    agent = build(project, settings, stub.model(3), MODEL, approver=HumanApprover(grace=no_grace),
                  reviews_plans=False).agent  # as the Python API builds it
    agent.submit(ops.UserTurn(text="fix add"))
    seen = await until_idle(agent, lambda e: None)
    assert not [e for e in seen if isinstance(e, PlanReviewAsked)]
    result = stub.bodies()[1]["messages"][-1]["content"][0]
    assert result["is_error"] and "No human can approve" in result["content"]
    assert not agent.submit(ops.PlanAnswer(id="p1", decision="approve")).ok
