"""Plan mode through the real loop: reads only, a plan proposed through exit_plan, edited and approved (the
approved plan carried across a seam as the human's text), or rejected with a reason the model reads."""

from __future__ import annotations

from pathlib import Path

from rhapsody.core.events import ToolFinished
from rhapsody.core.session.history import read_history
from rhapsody.core.toolbox.protocol import PlanReview
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, collect
from tests.core.session.test_handoff_e2e import handoff_turn, texts_of

PLAN = "1. Fix `add` in app.py to return a + b.\n2. Run the tests."
EDITED = PLAN + "\n3. Add a test for negative numbers."
REASON = "Do not touch app.py before we agree on the API; look at how callers use add first."


def proposal() -> dict[str, object]:
    return call("I have read app.py; here is my plan for the fix, for you to approve.", "exit_plan", plan=PLAN)


async def test_writes_are_refused_in_plan_mode_and_the_refusal_reaches_the_model(stub: Stub, project: Path) -> None:
    stub.script(
        call("I will read app.py to see what add does before planning.", "read_file", path="app.py"),
        call("I will fix the subtraction by rewriting app.py right away.", "write_file", path="app.py",
             content="def add(a, b):\n    return a + b\n"),
        call("I will try a shell command that writes the file instead.", "bash",
             command="echo 'x = 1' > app.py"),
        say("Both writes were refused; I will plan instead."),
    )
    wiring = stub.wire(project, permission_mode="plan")
    events = await collect(wiring.agent.run("fix add"))
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [(f.call.name, f.is_error) for f in finished][0] == ("read_file", False)  # reading is allowed
    assert (project / "app.py").read_text(encoding="utf-8") == "def add(a, b):\n    return a - b\n"
    refused = stub.bodies()[2]["messages"][-1]["content"][0]
    assert refused["is_error"] and "plan mode: no writes" in refused["content"] and "exit_plan" in refused["content"]
    ran = stub.bodies()[3]["messages"][-1]["content"][0]
    assert ran["is_error"] and "Read-only file system" in str(ran["content"])  # the read-only sandbox held
    assert "## Plan mode" in stub.bodies()[0]["system"][0]["text"]


async def test_a_plan_edited_and_approved_switches_the_mode_and_survives_a_seam(stub: Stub, project: Path) -> None:
    stub.script(
        proposal(), say("Approved; I will start with step 1."),
        handoff_turn(), say("Noted."),
        say("The plan I follow has three steps."),
    )
    wiring = stub.wire(project, permission_mode="plan")
    shown: list[str] = []

    async def edit_and_approve(plan: str) -> PlanReview:
        shown.append(plan)
        return PlanReview(True, plan=EDITED, mode="auto-edit")

    wiring.agent.toolbox.reviewer = edit_and_approve
    await collect(wiring.agent.run("fix add"))
    assert shown == [PLAN] and wiring.agent.toolbox.permission_mode == "auto-edit"
    after = stub.bodies()[1]["messages"][-1]["content"]
    assert [b["type"] for b in after] == ["tool_result", "text"] and EDITED in after[1]["text"]
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    await collect(wiring.agent.run("how many steps?"))
    last = stub.bodies()[-1]
    calls = [b.get("name") for m in last["messages"] if isinstance(m["content"], list) for b in m["content"]
             if b.get("type") == "tool_use"]
    assert "exit_plan" not in calls and "micro_handoff" in calls  # the seam took exit_plan's call and result
    assert any(EDITED in t for t in texts_of(last))  # the approved plan, as the human's text, after the seam
    records = read_history(wiring.session.path).records
    assert [r["mode"] for r in records if r["kind"] == "permission_mode"] == ["auto-edit"]
    run = next(r for r in records if r["kind"] == "tool_run" and r["name"] == "exit_plan")
    assert run["plan_verdict"] == "approved" and run["plan_edited"] and run["plan"] == EDITED
    assert not [r for r in records if r["kind"] == "denial"]


async def test_a_rejected_plan_keeps_plan_mode_and_the_reason_reaches_the_model(stub: Stub, project: Path) -> None:
    stub.script(proposal(), say("Understood; I will look at the callers first."))
    wiring = stub.wire(project, permission_mode="plan")

    async def reject(plan: str) -> PlanReview:
        return PlanReview(False, reason=REASON)

    wiring.agent.toolbox.reviewer = reject
    await collect(wiring.agent.run("fix add"))
    after = stub.bodies()[1]["messages"][-1]["content"]
    assert after[0]["is_error"] and "rejected" in after[0]["content"]
    assert after[1]["type"] == "text" and after[1]["text"] == REASON
    assert wiring.agent.toolbox.permission_mode == "plan"


async def test_without_a_human_the_plan_is_not_approved(stub: Stub, project: Path) -> None:
    stub.script(proposal(), say("Here is the plan as my answer."))
    wiring = stub.wire(project, permission_mode="plan")
    await collect(wiring.agent.run("fix add"))
    result = stub.bodies()[1]["messages"][-1]["content"][0]
    assert result["is_error"] and "No human can approve" in result["content"]
    assert wiring.agent.toolbox.permission_mode == "plan"


async def test_a_session_switched_into_plan_mode_is_told_once_with_the_next_message(stub: Stub, project: Path) -> None:
    from rhapsody.commands.slash import run_command

    stub.script(say("Planning first."), say("Still planning."))
    wiring = stub.wire(project, permission_mode="ask")
    assert "## Plan mode" not in stub_system(wiring)
    run_command(wiring.agent, "/permissions plan")
    await collect(wiring.agent.run("fix add"))
    await collect(wiring.agent.run("and the tests?"))
    first, second = (b["messages"] for b in stub.bodies())
    opened = [b["text"] for b in first[0]["content"]]
    assert opened[0].startswith("[rhapsody] ## Plan mode") and opened[1] == "fix add"
    assert [b["text"] for b in second[-1]["content"]] == ["and the tests?"]  # once, not every turn


def stub_system(wiring: object) -> str:
    return str(wiring.session.spec.system)  # type: ignore[attr-defined]
