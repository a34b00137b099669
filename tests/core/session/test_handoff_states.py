"""The handoff survives kill -9 in every state: a real process is killed, the session resumes.

Each state has its own child process (tests/handoff_child.py), forked from the run's worker
server (tests/killed_child.py), all started together; each test kills its child with SIGKILL
once it holds the state, then resumes the history in this process and shows the next step
happens from that state.
"""

from __future__ import annotations

from rhapsody.core.session.records import dump
from collections.abc import Iterator
from pathlib import Path

import pytest

from rhapsody.config.settings import Settings
from rhapsody.core.events import HandoffAsked, HandoffFailed, SeamCommitted
from rhapsody.core.session.handoff_state import Phase
from rhapsody.loopback.script import say
from rhapsody.wiring import Wiring, build

from tests.conftest import Stub, collect
from tests.killed_child import Child
from tests.killed_child import children as started
from tests.core.session.test_handoff_e2e import handoff_turn

STATES = ["wanted", "asked", "reminded", "noted", "committed", "failed", "undone"]

pytestmark = pytest.mark.xdist_group("handoff_states")  # one worker starts the module's children, once


@pytest.fixture(scope="module")
def children(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Child]]:
    yield from started(tmp_path_factory, "tests.handoff_child", STATES)


def resumed(stub: Stub, child: Child) -> Wiring:
    path, phase = child.kill_when_ready()
    assert phase == child.step
    history = Path(path)
    # by id: the "wanted" child is killed before its first turn, and --continue takes only sessions with one
    wiring = build(child.project, Settings(permission_mode="yolo"), stub.model(), None, resume=history.stem)
    assert wiring.session.path == history
    return wiring


async def test_killed_when_wanted_resumes_wanted_and_the_next_turn_asks(stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["wanted"])
    assert wiring.session.handoff.phase == Phase.WANTED
    stub.script(handoff_turn(), say("Note written."))
    events = await collect(wiring.agent.run())
    assert "Micro-handoff requested" in str(stub.bodies()[0]["messages"][-1]["content"])
    assert any(isinstance(e, SeamCommitted) for e in events) and wiring.session.handoff.phase == Phase.COMMITTED


async def test_killed_when_asked_resumes_asked_and_a_turn_without_a_note_is_reminded(stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["asked"])
    assert wiring.session.handoff.phase == Phase.ASKED and not wiring.session.handoff.interrupted_work
    stub.script(say("Later."), handoff_turn(), say("Noted."))
    events = await collect(wiring.agent.run("go on"))
    assert [e for e in events if isinstance(e, HandoffAsked)] == [HandoffAsked(reminder=True)]
    assert any(isinstance(e, SeamCommitted) for e in events) and wiring.session.handoff.phase == Phase.COMMITTED


async def test_killed_when_reminded_resumes_reminded_and_gives_up_at_the_next_end_of_turn(stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["reminded"])
    assert wiring.session.handoff.phase == Phase.REMINDED
    stub.script(say("No note from me."))
    events = await collect(wiring.agent.run("go on"))
    assert any(isinstance(e, HandoffFailed) for e in events) and not any(isinstance(e, HandoffAsked) for e in events)
    assert wiring.session.handoff.phase == Phase.FAILED and wiring.session.figures.seams == 0


async def test_killed_when_noted_resumes_noted_and_commits_the_seam_on_its_note(stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["noted"])
    state = wiring.session.handoff
    assert state.phase == Phase.NOTED and (wiring.session.root / state.note_path).is_file()
    stub.script(say("Done."))
    events = await collect(wiring.agent.run("go on"))
    seams = [e for e in events if isinstance(e, SeamCommitted)]
    assert len(seams) == 1 and dump(seams[0].record)["note_path"] == state.note_path
    assert wiring.session.handoff.phase == Phase.COMMITTED


async def test_killed_when_committed_resumes_at_rest_with_the_seam(stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["committed"])
    assert wiring.session.handoff.phase == Phase.COMMITTED and wiring.session.figures.seams == 1
    assert wiring.agent.request_handoff() and wiring.session.handoff.phase == Phase.WANTED


async def test_killed_when_failed_resumes_at_rest_with_nothing_stripped(stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["failed"])
    assert wiring.session.handoff.phase == Phase.FAILED and wiring.session.figures.seams == 0
    assert wiring.agent.request_handoff() and not wiring.agent.request_handoff()


async def test_killed_when_undone_resumes_undone_with_the_blocks_back(stub: Stub, children: dict[str, Child]) -> None:
    wiring = resumed(stub, children["undone"])
    assert wiring.session.handoff.phase == Phase.UNDONE
    assert wiring.session.conversation.seams == [] and len(wiring.session.conversation.undone) == 1
