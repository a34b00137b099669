"""The safety net at the window survives kill -9 at each step: a real process is killed, the session resumes.

Each step has its own child process (tests/window_child.py), forked from the run's worker server
(tests/killed_child.py), all started together; each test kills its child with SIGKILL once it
holds the step, then resumes the history in this process and shows the next step happens from
there, with the history valid throughout. (A kill between the strip and the ask, two appends
with no await between them, is tested by cutting the history there: tests/core/test_window.py.)
"""

from __future__ import annotations

from rhapsody.core.session.records import dump
from rhapsody.core.session.records import dumped
from collections.abc import Iterator
from pathlib import Path

import pytest

from rhapsody.config.settings import Settings
from rhapsody.core.events import SeamCommitted, TurnEnded
from rhapsody.core.session.handoff_state import Phase
from rhapsody.core.session.strip import validity_problems
from rhapsody.loopback.script import say
from rhapsody.wiring import Wiring, build

from tests.conftest import SANDBOX, Stub, collect
from tests.core.session.test_handoff_e2e import handoff_turn
from tests.killed_child import Child
from tests.killed_child import children as started

STEPS = ["room_asked", "room_noted", "room_committed", "asked", "noted", "attached"]

pytestmark = pytest.mark.xdist_group("window_states")  # one worker starts the module's children, once


@pytest.fixture(scope="module")
def children(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Child]]:
    yield from started(tmp_path_factory, "tests.window_child", STEPS)


def resumed(stub: Stub, child: Child) -> Wiring:
    history = Path(child.kill_when_ready())
    room = child.step.startswith("room_")
    settings = Settings(permission_mode="yolo", sandbox=SANDBOX, handoff_at_share="off", thinking=not room)
    wiring = build(child.project, settings, stub.model(), None, resume=history.stem)
    assert validity_problems(wiring.session.messages()) == []
    records = dumped(wiring.session.records)
    if room:  # the room was made before the kill: the oldest calls are out, the latest still in
        assert [r["kind"] for r in records].count("prune") == 1
        still = any(b.type == "tool_result" and "4444\n4444\n" in str(b.content) for m in wiring.session.messages()
                    for b in m.content)
        assert still == (child.step != "room_committed")  # the seam after the note strips the rest
    else:
        seams = [r for r in records if r["kind"] == "seam"]
        assert len(seams) == 1 and seams[0]["window"]  # the strip was made before the kill
    return wiring


async def test_killed_when_the_note_was_asked_over_the_room_made_resumes_asking_and_the_seam_strips_the_rest(
        stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["room_asked"])
    assert wiring.session.handoff.phase == Phase.ASKED and not wiring.session.handoff.after_strip
    note = handoff_turn()
    note["content"][-1]["id"] = "toolu_note_after_resume"  # this server's ids would start again at the pruned ones'
    stub.script(note, say("Note written."), say("Going on."))
    events = await collect(wiring.agent.run("go on"))
    seams = [dump(e.record) for e in events if isinstance(e, SeamCommitted)]
    assert len(seams) == 1 and seams[0]["note_path"] and seams[0]["after"]["tool_use"] == 1  # the note call stays
    assert isinstance(events[-1], TurnEnded) and validity_problems(wiring.session.messages()) == []


async def test_killed_when_the_note_was_written_over_the_room_made_resumes_noted_and_strips_the_rest(
        stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["room_noted"])
    state = wiring.session.handoff
    assert state.phase == Phase.NOTED and (wiring.session.root / state.note_path).is_file()
    stub.script(say("Noted; going on."), say("Going on."))
    events = await collect(wiring.agent.run("go on"))
    assert sum(isinstance(e, SeamCommitted) for e in events) == 1 and isinstance(events[-1], TurnEnded)
    assert wiring.session.figures.seams == 1


async def test_killed_after_the_seam_over_the_room_made_resumes_at_rest_and_goes_on(
        stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["room_committed"])
    assert wiring.session.handoff.phase == Phase.COMMITTED and wiring.session.figures.seams == 1
    stub.script(say("Going on from my note."))
    events = await collect(wiring.agent.run("go on"))
    assert isinstance(events[-1], TurnEnded) and stub.bodies()[-1]["messages"][-1]["role"] == "user"


def notes_attached(wiring: Wiring) -> list[int]:
    return [r["seam"] for r in dumped(wiring.session.records) if r["kind"] == "seam_note"]


async def test_killed_when_the_note_was_asked_resumes_asking_and_the_note_attaches_to_the_strip(
        stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["asked"])
    assert wiring.session.handoff.phase == Phase.ASKED and wiring.session.handoff.after_strip == 1
    stub.script(handoff_turn(), say("Note written."), say("Going on."))
    events = await collect(wiring.agent.run("go on"))
    assert not any(isinstance(e, SeamCommitted) for e in events) and isinstance(events[-1], TurnEnded)
    assert notes_attached(wiring) == [1] and wiring.session.handoff.phase == Phase.COMMITTED
    assert validity_problems(wiring.session.messages()) == []


async def test_killed_when_the_note_was_written_resumes_noted_and_attaches_it_without_a_second_strip(
        stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["noted"])
    state = wiring.session.handoff
    assert state.phase == Phase.NOTED and (wiring.session.root / state.note_path).is_file()
    stub.script(say("Noted; going on."), say("Going on."))
    events = await collect(wiring.agent.run("go on"))
    assert not any(isinstance(e, SeamCommitted) for e in events) and isinstance(events[-1], TurnEnded)
    assert notes_attached(wiring) == [1] and wiring.session.figures.seams == 1


async def test_killed_after_the_note_attached_resumes_at_rest_and_goes_on(stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["attached"])
    assert wiring.session.handoff.phase == Phase.COMMITTED and notes_attached(wiring) == [1]
    stub.script(say("Going on from my note."))
    events = await collect(wiring.agent.run("go on"))
    assert isinstance(events[-1], TurnEnded) and stub.bodies()[-1]["messages"][-1]["role"] == "user"
