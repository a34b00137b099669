"""Both sides of a seam audited: the stripped tool traffic's SHA-256 is recorded, and recall
and /unhandoff check what they return against it."""

from __future__ import annotations

from rhapsody.core.session.records import parse
import json
from pathlib import Path

from rhapsody.commands.slash import run_command
from rhapsody.core.agent import ops
from rhapsody.core.session import records as rec
from rhapsody.core.session.history import read_history
from rhapsody.core.session.recall import fetch
from rhapsody.core.session.traffic_digest import cuts
from rhapsody.loopback.script import say
from rhapsody.tools.handoff import recall_text
from rhapsody.view.render import undo_text

from tests.conftest import Stub, collect
from tests.core.session.test_handoff_e2e import handoff_turn, step


async def _seamed(stub: Stub, project: Path):  # type: ignore[no-untyped-def]
    stub.script(step(1), step(2), say("printed"), handoff_turn(), say("noted"), say("back"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("go"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    return wiring


async def test_seam_records_the_hash_of_what_left_and_recall_verifies_it(stub: Stub, project: Path) -> None:
    wiring = await _seamed(stub, project)
    records = read_history(wiring.session.path).records
    seam = next(r for r in records if r["kind"] == "seam")
    assert seam["stripped_calls"] == 2 and len(seam["stripped_sha256"]) == 64
    [cut] = cuts([parse(r) for r in records])
    assert cut.verified and set(cut.calls) == {u["id"] for m in records if m["kind"] == "message" and m["role"] == "assistant"
                                                 for u in m["content"] if u.get("name") == "bash"}
    call_id = recall_text(project, wiring.session, "marker-2-42", all_sessions=False).split()[0]
    full = fetch(project, call_id)
    assert full is not None and full.startswith("verified: the 2 calls seam 1 stripped hash to the SHA-256 it recorded")
    assert "marker-2-42" in full


async def test_a_history_edited_after_the_seam_fails_the_check(stub: Stub, project: Path) -> None:
    wiring = await _seamed(stub, project)
    call_id = recall_text(project, wiring.session, "marker-1-42", all_sessions=False).split()[0]
    path = wiring.session.path
    text = path.read_text()
    path.write_text(text.replace("marker-1-42", "marker-1-43"))  # same size: the recall index is not rebuilt
    same_size = fetch(project, call_id)
    assert same_size is not None and same_size.startswith("NOT VERIFIED: the recall index differs from the history")
    path.write_text(text.replace("marker-1-42", "marker-1-4242"))  # the index is rebuilt from the edited history
    rebuilt = fetch(project, call_id)
    assert rebuilt is not None and rebuilt.startswith("NOT VERIFIED: seam 1 recorded")


async def test_unhandoff_says_the_calls_put_back_are_exactly_what_left(stub: Stub, project: Path) -> None:
    wiring = await _seamed(stub, project)
    op = run_command(wiring.agent, "/unhandoff").op
    assert isinstance(op, ops.UndoHandoff)
    undone = wiring.agent.submit(op)
    assert isinstance(undone.record, rec.Unseam) and undone.reload
    text = undo_text(undone.record)
    assert "seam 1 undone" in text and "verified: the 2 calls put back hash to the SHA-256 the seam recorded" in text
    unseam = [r for r in read_history(wiring.session.path).records if r["kind"] == "unseam"][0]
    assert unseam["verified"] is True and unseam["returned_calls"] == 2
    await collect(wiring.agent.run("still valid?"))
    assert all(r.status == 200 for r in stub.server.requests)
    assert json.dumps(stub.bodies()[-1]).count('"tool_use"') == 3


def test_a_history_from_before_the_hash_says_it_cannot_verify() -> None:
    records = read_history(Path(__file__).parents[3] / "history" / "review-20261129-142658-95fc0b.jsonl").records
    [cut] = cuts([parse(r) for r in records])
    assert cut.recorded is None and len(cut.calls) == 152
    assert cut.verdict().startswith("not verified: seam 1 recorded no hash")
