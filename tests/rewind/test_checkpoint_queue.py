"""A checkpoint still being taken (the first of a large tree, or another rhapsody's) holds up no turn that
only reads, and every call that may write waits for it: the rewind point is the tree before the write.

The checkpoint lock is held by the test itself, as another rhapsody process taking a checkpoint holds it."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import asyncio
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rhapsody.core.session.checkpoints import FIRST_WAIT, settle
from rhapsody.core.userstate import project_state
from rhapsody.loopback.script import call, say
from rhapsody.rewind.shadow import Shadow

from tests.conftest import Stub


@contextmanager
def lock_held(root: Path) -> Iterator[None]:
    fd = os.open(project_state(root) / "checkpoints.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


async def run_turn(agent: object, text: str) -> list[object]:
    return [event async for event in agent.run(text)]  # type: ignore[attr-defined]


async def test_a_reading_turn_ends_while_the_checkpoint_lock_is_held_and_is_recorded_after(
        stub: Stub, project: Path) -> None:
    stub.script(say("Nothing to change."))
    wiring = stub.wire(project)
    with lock_held(project):
        await asyncio.wait_for(run_turn(wiring.agent, "look only"), timeout=30)
        kinds = [r["kind"] for r in dumped(wiring.agent.session.records)]
        assert "message" in kinds and "checkpoint" not in kinds  # the turn ran and ended, its checkpoint waits
    await asyncio.to_thread(settle, wiring.agent.session)
    taken = [r for r in dumped(wiring.agent.session.records) if r["kind"] == "checkpoint"]
    assert [r["at"] for r in taken] == ["turn", "end"]
    assert taken[0]["message"] == 0  # tied to the human's message, as when it is taken at once
    assert FIRST_WAIT < 1


async def test_a_writing_call_waits_for_the_checkpoint_so_the_point_is_the_tree_before_the_write(
        stub: Stub, project: Path) -> None:
    stub.script(call("I will write the notes file, expecting it to be created.", "write_file",
                     path="notes.txt", content="one\n"), say("Written."))
    wiring = stub.wire(project)
    with lock_held(project):
        turn = asyncio.create_task(run_turn(wiring.agent, "write notes"))
        while not stub.server.requests:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        assert not turn.done() and not (project / "notes.txt").exists()
    await asyncio.wait_for(turn, timeout=60)
    records = dumped(wiring.agent.session.records)
    tool = next(r for r in records if r["kind"] == "checkpoint" and r["at"] == "tool")
    turn_point = next(r for r in records if r["kind"] == "checkpoint" and r["at"] == "turn")
    assert turn_point["seq"] < tool["seq"]  # in the order they were asked for
    shadow = Shadow(project)
    assert "notes.txt" not in {c.path for c in shadow.changes("", tool["commit"])}
    assert (project / "notes.txt").read_text() == "one\n"
