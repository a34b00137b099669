"""The app's side of plan mode and the todo list: the proposed plan opens editable, the human's edit is the
plan the model gets, Esc with a reason rejects; the todo list sits in a panel beside the transcript, hidden
while empty, and fits 80x24."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input, Static, TextArea

from rhapsody.core.toolbox.approval import HumanApprover
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.plan_review import PlanScreen
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, no_grace, until
from tests.core.session.test_handoff_e2e import texts_of
from tests.frontends.test_app import wait_idle

PLAN = "1. Fix add in app.py.\n2. Run the tests."


def plan_call() -> dict[str, object]:
    return call("I have read app.py; here is my plan for you to approve.", "exit_plan", plan=PLAN)


def open_plan(app: RhapsodyApp) -> PlanScreen | None:
    """The plan screen once it is up and its text area has the focus."""
    screen = app.screen
    return screen if isinstance(screen, PlanScreen) and isinstance(screen.focused, TextArea) else None


async def test_the_plan_is_edited_in_the_app_and_approved_into_ask_mode(stub: Stub, project: Path) -> None:
    stub.script(plan_call(), say("Approved; starting."))
    approver = HumanApprover(grace=no_grace)
    wiring = stub.wire(project, approver=approver, permission_mode="plan")
    app = RhapsodyApp(wiring.agent, wiring.settings, approver)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("fix add")
        await until(lambda: open_plan(app) is not None, pause=pilot.pause)
        screen = open_plan(app)
        assert screen is not None
        area = screen.query_one("#plan-text", TextArea)
        assert area.text == PLAN
        area.text = PLAN + "\n3. Add a test for negatives."
        await pilot.press("ctrl+r")
        await wait_idle(pilot)
        assert wiring.agent.toolbox.permission_mode == "ask"
        said = [e.text for e in app.transcript.entries if e.kind == "user"]
        assert any("I approve this plan" in t and "3. Add a test for negatives." in t for t in said)  # live
        assert "plan (2 lines)" in " ".join(e.text for e in app.transcript.entries)  # the call's line
    assert any("3. Add a test for negatives." in t for t in texts_of(stub.bodies()[1]))


async def test_esc_rejects_the_plan_with_the_reason_typed(stub: Stub, project: Path) -> None:
    stub.script(plan_call(), say("I will look at the callers first."))
    approver = HumanApprover(grace=no_grace)
    wiring = stub.wire(project, approver=approver, permission_mode="plan")
    app = RhapsodyApp(wiring.agent, wiring.settings, approver)
    async with app.run_test(size=(80, 24)) as pilot:
        app.start_turn("fix add")
        await until(lambda: open_plan(app) is not None, pause=pilot.pause)
        screen = open_plan(app)
        assert screen is not None
        screen.query_one("#plan-reason", Input).value = "check the callers of add first"
        await pilot.press("escape")
        await wait_idle(pilot)
        assert wiring.agent.toolbox.permission_mode == "plan"
    assert "check the callers of add first" in texts_of(stub.bodies()[1])


async def test_the_todo_panel_shows_the_list_beside_the_transcript_at_80x24(stub: Stub, project: Path) -> None:
    items = [{"content": "Read app.py", "status": "done"}, {"content": "Fix the operator in add", "status": "in_progress"},
             {"content": "Run the tests", "status": "pending"}]
    stub.script(call("I will write my todo list for this task before starting.", "todo_write", todos=items),
                say("List written."))
    approver = HumanApprover(grace=no_grace)
    wiring = stub.wire(project, approver=approver)
    app = RhapsodyApp(wiring.agent, wiring.settings, approver)
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one("#todo", Static)
        assert "hidden" in panel.classes  # no list yet
        app.start_turn("fix add")
        await wait_idle(pilot)
        shown = " ".join(str(panel.render()).split())  # an item longer than the panel wraps under its mark
        assert "todo 1/3 done" in shown and "[>] Fix the operator in add" in shown and "[ ] Run the tests" in shown
        assert "hidden" not in panel.classes and panel.region.width > 0
        transcript = app.query_one("#transcript")
        assert transcript.region.right <= panel.region.x and panel.region.right <= 80  # beside it, on screen
        await app.surface.reload()  # a rebuild (a resume, a seam) draws the list from the session again
        assert "todo 1/3 done" in str(panel.render())
