"""`ops.Rewind` through `Agent.submit`: the session bootstrap wires the checkpoint rewinder, so files, the
conversation or both go back after real turns on the loopback server, in a real shadow repository; files
changed outside rhapsody are a typed refusal naming them until the op is forced. The Python API's `rewind`
is the same op."""

from __future__ import annotations

from pathlib import Path

import pytest

from rhapsody.core.agent import ops
from rhapsody.core.session import records as rec
from rhapsody.core.session.history import read_history
from rhapsody.loopback.script import call, say

from tests.conftest import Stub
from tests.rewind.test_rewind import seed, tree, two_turns


def kinds(path: Path) -> list[str]:
    return [str(r["kind"]) for r in read_history(path).records]


@pytest.mark.parametrize("what", ["files", "conversation", "both"])
async def test_the_rewind_op_restores_files_the_conversation_or_both(stub: Stub, project: Path, what: str) -> None:
    seed(project)
    before = tree(project)
    wiring = await two_turns(stub, project)
    after, messages = tree(project), wiring.session.messages()
    done = wiring.agent.submit(ops.Rewind(point=1, what=what))  # type: ignore[arg-type]
    assert done.ok and done.reload, done.text
    files, conversation = what in ("files", "both"), what in ("conversation", "both")
    assert tree(project) == (before if files else after)
    assert ("files restored" in done.text) == files
    assert (wiring.session.messages() == []) == conversation and (wiring.session.messages() == messages) != conversation
    assert done.refill == ("make the files" if conversation else "")
    on_disk = kinds(wiring.session.path)
    assert on_disk.count("rewind") == int(conversation) and on_disk.count("restore") == 2 * int(files)


async def test_files_changed_outside_are_a_refusal_naming_them_until_the_op_is_forced(stub: Stub,
                                                                                      project: Path) -> None:
    wiring = await two_turns(stub, project)
    (project / "notes.txt").write_text("mine\n")  # the person edits after the turn ended
    refused = wiring.agent.submit(ops.Rewind(point=1, what="files"))
    assert not refused.ok and refused.outside == ("notes.txt",) and "notes.txt" in refused.text
    assert (project / "notes.txt").read_text() == "mine\n" and not refused.reload
    assert "restore" not in kinds(wiring.session.path)
    forced = wiring.agent.submit(ops.Rewind(point=1, what="files", force=True))
    assert forced.ok and forced.outside == () and not (project / "notes.txt").exists()


async def test_a_point_out_of_range_and_a_running_turn_are_refused(stub: Stub, project: Path) -> None:
    wiring = await two_turns(stub, project)
    assert not wiring.agent.submit(ops.Rewind(point=3)).ok
    assert not wiring.agent.submit(ops.Rewind(point=0)).ok
    assert rec.last(wiring.session.records, rec.ConversationRewind) is None
    stub.script(say("Fine."))
    assert wiring.agent.submit(ops.UserTurn(text="carry on")).started  # the turn's task is under way until settled
    busy = wiring.agent.submit(ops.Rewind(point=1))
    assert not busy.ok and "wait for the turn to end" in busy.text
    await wiring.agent.settled()
    assert wiring.agent.submit(ops.Rewind(point=1, what="conversation")).ok


async def test_checkpoints_off_leave_no_rewinder(stub: Stub, project: Path) -> None:
    stub.script(call("I will write notes.txt so the turn changes a file.", "write_file", path="notes.txt",
                     content="x\n"), say("Written."))
    wiring = stub.wire(project, checkpoints=False)
    assert wiring.agent.submit(ops.UserTurn(text="write")).started
    await wiring.agent.settled()
    refused = wiring.agent.submit(ops.Rewind(point=1))
    assert wiring.agent.rewinder is None and not refused.ok and "checkpoints are off" in refused.text
    assert (project / "notes.txt").exists()
