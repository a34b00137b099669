"""A sub-agent at work in the line-based front ends: plain mode prints its steps as indented lines under the
call, headless JSONL has its events carrying its id."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rhapsody.core.session import records as rec
from rhapsody.frontends.headless import run_headless
from rhapsody.view.render import SUBAGENT_INDENT

from tests.conftest import Stub
from tests.core.agent.test_subagents import FOUND, TASK, child_read, delegate
from tests.frontends.test_plain import plain_exchange
from rhapsody.loopback.script import say


async def test_plain_mode_prints_its_steps_indented_under_the_call(stub: Stub, project: Path) -> None:
    stub.script(delegate(), child_read(), say(FOUND), say("The sub-agent found it."))
    wiring = stub.wire(project)
    text = await plain_exchange(wiring, "is add right?", "The sub-agent found it.")
    lines = text.splitlines()
    started = next(i for i, line in enumerate(lines) if "⤷ sub-agent sa1 (" in line)
    ended = next(i for i, line in enumerate(lines) if "⤶ sub-agent sa1 done" in line)
    steps = lines[started + 1:ended]
    assert any(line.startswith(f"  {SUBAGENT_INDENT}⏺ read_file app.py") for line in steps)
    assert any(line.startswith(f"  {SUBAGENT_INDENT}{FOUND}") for line in steps)
    assert "I will read app.py" not in "\n".join(lines[:started])  # its words are its steps, not the parent's text
    assert f"⏺ delegate read-only: {TASK} → ok" in text


async def test_headless_jsonl_carries_its_events_with_its_id(stub: Stub, project: Path) -> None:
    stub.script(delegate(), child_read(), say(FOUND), say("Done."))
    wiring = stub.wire(project)
    out = io.StringIO()
    assert await run_headless(wiring.agent, "is add right?", output="jsonl", out=out, err=io.StringIO()) == 0
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    (started,) = [e for e in events if e["event"] == "subagent_started"]
    steps = [e for e in events if e["event"] == "subagent_step"]
    assert started["id"] == "sa1" and started["mode"] == "read-only" and started["session"]
    assert {s["id"] for s in steps} == {"sa1"}
    finished = [s["step"] for s in steps if s["step"]["event"] == "tool_finished"]
    assert [f["call"]["name"] for f in finished] == ["read_file"]
    assert [e["status"] for e in events if e["event"] == "subagent_ended"] == ["done"]


async def test_the_app_shows_it_as_one_live_folded_line_that_unfolds_to_its_steps(stub: Stub, project: Path) -> None:
    from rhapsody.core.toolbox.approval import HumanApprover
    from rhapsody.frontends.app.app import RhapsodyApp
    from rhapsody.frontends.app.widgets import Foldable

    from tests.conftest import no_grace, until
    from tests.frontends.test_app import wait_idle

    stub.script(delegate(), child_read(), say(FOUND), say("The sub-agent found it."))
    approver = HumanApprover(grace=no_grace)
    wiring = stub.wire(project, approver=approver)
    app = RhapsodyApp(wiring.agent, wiring.settings, approver)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("is add right?")
        await wait_idle(pilot)
        (entry,) = [e for e in app.transcript.entries if e.kind == "subagent"]
        assert entry.text.startswith("⤶ sub-agent sa1 done")
        assert "⏺ read_file app.py" in entry.body and FOUND in entry.body
        assert not [e for e in app.transcript.entries if e.kind == "tool" and "read_file" in e.text]  # folded in it
        widget = app.transcript.widgets[entry]
        assert isinstance(widget, Foldable) and not widget.expanded
        widget.focus()
        await pilot.press("enter")
        await until(lambda: widget.expanded, pause=pilot.pause)
        assert FOUND in str(widget.render())


async def test_the_picker_lists_it_under_its_parent_and_continue_picks_the_parent(stub: Stub, project: Path) -> None:
    from rhapsody.core.session.history import find_session
    from rhapsody.frontends.app.picker import SessionPicker

    from tests.conftest import collect

    stub.script(delegate(), child_read(), say(FOUND), say("Found."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("is add right?"))
    child = next(r.session for r in rec.of(wiring.session.records, rec.Subagent))
    assert find_session(project, None).stem == wiring.session.id  # never the child's, however the names sort
    picker = SessionPicker(project)
    async with picker.run_test(size=(120, 24)):
        listing = picker.query_one("OptionList")
        shown = [(listing.get_option_at_index(i).id, str(listing.get_option_at_index(i).prompt))
                 for i in range(listing.option_count)]
    assert [stem for stem, _ in shown] == [wiring.session.id, child]
    assert shown[1][1].startswith("    ⤷ sa1 ") and "Find what add" in shown[1][1]


async def test_esc_in_the_app_marks_the_running_sub_agent_interrupted(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.app import RhapsodyApp

    from tests.conftest import until
    from tests.core.agent.test_subagents import child_waits
    from tests.frontends.test_app import wait_idle

    stub.script(delegate(), child_waits(), say("never sent"))
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("is add right?")
        await until(lambda: bool(wiring.session.delegated) and any(
            isinstance(r, rec.MessageAdded) and r.role == "assistant" for r in wiring.session.delegated[0].records),
            pause=pilot.pause)  # the sub-agent's call is under way
        app.action_interrupt()
        await wait_idle(pilot)
        (entry,) = [e for e in app.transcript.entries if e.kind == "subagent"]
        assert entry.text.startswith("⤶ sub-agent sa1 interrupted") and entry.state == "error"
