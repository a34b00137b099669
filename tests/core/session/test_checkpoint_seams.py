"""The `checkpoint` seam policy, through the real loop on the loopback: a seam is asked at the first
natural boundary where it pays (tests passing after failures, a commit, the end of a turn, the human's
next message), never mid-task, and a boundary where it does not pay passes."""

from __future__ import annotations

from rhapsody.core.session.records import parse
from rhapsody.core.session.records import dump, dumped
import stat
from pathlib import Path
from typing import Any

import pytest

from rhapsody.core.events import SeamCommitted, TurnEnded
from rhapsody.core.accounting.natural_seam import GIT_COMMIT, TEST_RUNNER, Boundaries, Boundary, cold_share
from rhapsody.core.accounting.seam_cost import NOTE_OUTPUT_TOKENS, horizon, payoff
from rhapsody.core.session.strip import validity_problems
from rhapsody.loopback.script import call, say

from rhapsody.config.settings import Settings
from rhapsody.wiring import build

from tests.conftest import SANDBOX, Stub, collect
from tests.core.session.test_handoff_e2e import handoff_turn
from tests.core.test_window import big

RUNNER = "#!/bin/sh\nif [ -f fixed ]; then echo '3 passed'; else echo '1 failed: test_add'; exit 1; fi\n"


def runner(project: Path) -> Path:
    """A test runner named pytest in the project: it fails until a file named `fixed` exists."""
    path = project / "pytest"
    path.write_text(RUNNER)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return project


def suite_run(n: int) -> dict[str, Any]:
    return call(f"Run {n}: I will run the test suite to see whether test_add passes yet.", "bash", command="./pytest -q")


def wanted(records: list[Any]) -> list[dict[str, Any]]:
    dicts = [r if isinstance(r, dict) else dump(r) for r in records]
    return [r for r in dicts if r["kind"] == "handoff" and r.get("state") == "wanted"]


def asked_with(body: dict[str, Any]) -> list[str]:
    """The texts of the request's last message (where a handoff request rides with the results)."""
    return [b.get("text", "") for b in body["messages"][-1]["content"] if b.get("type") == "text"]


async def test_the_seam_is_asked_when_tests_pass_after_failures_not_at_the_long_reads_before(
        stub: Stub, project: Path) -> None:
    runner(project)
    fix = call("I will mark the fix as made so the runner sees it, as a stand-in for the edit.", "bash",
               command="touch fixed")
    stub.script(suite_run(1), *[big(n) for n in range(1, 12)], fix, suite_run(2), handoff_turn(), say("Noted."),
                say("All tests pass."))
    wiring = stub.wire(project, handoff_at_share="off")
    events = await collect(wiring.agent.run("make the tests pass"))
    records = dumped(wiring.session.records)
    [want] = wanted(records)
    assert want["at"] == "tests_pass" and want["saves"] > want["costs"] > 0
    runs = [r for r in records if r["kind"] == "tool_run" and r["name"] == "bash"]
    assert runs[-1]["command"] == "./pytest -q" and runs[-1]["exit_code"] == 0 and runs[0]["exit_code"] == 1
    assert records.index(want) > records.index(runs[-1])  # after the passing run, not at any of the reads before
    bodies = stub.bodies()
    ride = bodies[len(runs)]  # the request after the passing run carries its result and the ask
    assert "3 passed" in str(ride["messages"][-1]["content"][0]) and any("micro_handoff" in t for t in asked_with(ride))
    assert sum(isinstance(e, SeamCommitted) for e in events) == 1 and isinstance(events[-1], TurnEnded)
    assert validity_problems(wiring.session.messages()) == []


async def test_a_commit_that_does_not_pay_yet_passes_and_the_turn_end_after_more_work_seams(
        stub: Stub, project: Path) -> None:
    commit = call("I will commit the work so far so the history has a point to come back to.", "bash",
                  command="echo one > step.txt && git add -A && git commit -qm 'first step'")
    stub.script(big(1), commit, *[big(n) for n in range(2, 13)], say("Read every block."), handoff_turn(),
                say("Noted."))
    wiring = stub.wire(project, handoff_at_share="off")
    await collect(wiring.agent.run("read the blocks, committing as you go"))
    records = dumped(wiring.session.records)
    committed = next(r for r in records if r["kind"] == "tool_run" and "git commit" in str(r.get("command")))
    assert committed["exit_code"] == 0
    [want] = wanted(records)
    assert want["at"] == "turn_end"  # the commit came too early to pay; the end of the turn, 11 reads later, does
    seams = [r for r in records if r["kind"] == "seam"]
    assert len(seams) == 1 and seams[0]["before"]["tool_use"] >= 13


async def test_a_short_session_never_seams_at_its_boundaries(stub: Stub, project: Path) -> None:
    stub.script(call("I will print a marker to see that the shell works here.", "bash", command="echo hi"),
                say("Printed."), say("Hello again."))
    wiring = stub.wire(project, handoff_at_share="off")
    await collect(wiring.agent.run("print a marker"))
    await collect(wiring.agent.run("and again"))
    assert wanted(wiring.session.records) == [] and len(stub.bodies()) == 3
    assert any(r["kind"] == "tool_run" for r in dumped(wiring.session.records))  # there was traffic to strip


async def test_the_human_message_is_a_boundary_when_the_turn_end_was_not_judged(stub: Stub, project: Path) -> None:
    stub.script(*[big(n) for n in range(1, 13)], say("Read them."))
    wiring = stub.wire(project, handoff_at_share="off", seam_policy="threshold")
    await collect(wiring.agent.run("read twelve blocks"))
    assert wanted(wiring.session.records) == []  # the threshold policy places no seam at pauses
    stub.script(handoff_turn(), say("Noted."), say("Here is the summary."))
    settings = Settings(permission_mode="yolo", sandbox=SANDBOX, handoff_at_share="off")  # checkpoint: the default
    resumed = build(project, settings, stub.model(), None, resume=wiring.session.id)
    events = await collect(resumed.agent.run("summarise what you read"))
    [want] = wanted(resumed.session.records)
    assert want["at"] == "human"
    seam = next(e.record for e in events if isinstance(e, SeamCommitted))
    human = next(i for i, m in enumerate(resumed.session.conversation.messages)
                 if any(getattr(b, "text", "") == "summarise what you read" for b in m.content))
    assert seam.boundary <= human  # the seam came before the human's words, which go out over the stripped context
    last = stub.bodies()[-1]
    assert last["messages"][-1]["content"][-1]["text"] == "summarise what you read"
    assert not any(b.get("type") == "tool_use" and b["name"] == "bash" for m in last["messages"]
                   if isinstance(m["content"], list) for b in m["content"])


@pytest.mark.parametrize("command, matches", [
    ("git commit -qm fix", True), ("git add -A && git commit -m 'x'", True), ("git -C sub commit -am x", True),
    ("git log --grep commit", False), ("echo git commit", False), ("cd sub && git commit -qm x", True), ("git status", False),
])
def test_which_commands_are_commits(command: str, matches: bool) -> None:
    assert bool(GIT_COMMIT.search(command)) == matches


@pytest.mark.parametrize("command, matches", [
    ("pytest -q", True), (".venv/bin/python -m pytest -n 0 tests/x.py", True), ("npm test", True),
    ("cargo test --lib", True), ("go test ./...", True), ("make check", True), ("cat pytest.ini", False),
    ("grep -r pytest .", False), ("ls tests", False), ("cd app && timeout 60 pytest", True),
])
def test_which_commands_are_test_runs(command: str, matches: bool) -> None:
    assert bool(TEST_RUNNER.search(command)) == matches


def test_a_todo_list_with_one_more_item_completed_is_a_boundary() -> None:
    fold = Boundaries()
    todos = [{"content": "a", "status": "completed"}, {"content": "b", "status": "in_progress"}]
    fold.see(parse({"kind": "message", "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "TodoWrite", "input": {"todos": todos}}]}))
    assert fold.see(parse({"kind": "tool_run", "tool_use_id": "t1", "name": "TodoWrite"})) == Boundary.TODO_DONE
    fold.see(parse({"kind": "message", "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t2", "name": "TodoWrite", "input": {"todos": todos}}]}))
    assert fold.see(parse({"kind": "tool_run", "tool_use_id": "t2", "name": "TodoWrite"})) is None  # nothing newly done
    assert fold.see(parse({"kind": "tool_run", "tool_use_id": "t3", "name": "todo", "todo_completed": True})) == Boundary.TODO_DONE


def test_the_payoff_counts_the_requests_ahead_and_the_cold_restarts() -> None:
    warm = payoff(60_000, 50_000, 2_500, ahead=30, cold=0.0, read=0.1, write=1.25, output_ratio=5)
    assert warm.saves == pytest.approx(30 * 47_500 * 0.1)
    assert warm.costs == pytest.approx(60_000 * 0.1 + 12_500 * 1.25 + NOTE_OUTPUT_TOKENS * 5)
    soon = payoff(60_000, 50_000, 2_500, ahead=3, cold=0.0, read=0.1, write=1.25, output_ratio=5)
    assert warm.pays and not soon.pays
    paused = payoff(60_000, 50_000, 2_500, ahead=3, cold=0.5, read=0.1, write=1.25, output_ratio=5)
    assert paused.pays  # a human who pauses past the TTL makes each of the few requests ahead a re-write
    assert cold_share([0, 10, 400, 410, 2000], 300) == 0.5


def test_the_horizon_is_what_the_traffic_since_the_last_seam_has_already_been_carried() -> None:
    """Rent-or-buy: steady growth over k requests counts k / 2; a large result a request ago counts 1 however
    many requests came before it (the old guess counted them all); one right after the last seam counts for
    every request since (the old guess: as many requests ahead as came since, the same here)."""
    assert horizon([10_000 + 1_000 * k for k in range(11)]) == pytest.approx(5.5)
    late = [10_000.0] * 60 + [50_000.0]
    assert horizon(late) == pytest.approx(1.0)
    early = [10_000.0, 50_000.0, 50_100.0, 50_200.0]
    assert horizon(early) == pytest.approx((40_000 + 40_100 + 40_200) / 40_200)
    assert horizon([10_000.0]) == 0.0 and horizon([10_000.0, 9_000.0]) == 0.0
    context, takes, adds = 50_000, 40_000, 1_950
    later = payoff(context, takes, adds, horizon(late), 0.0, 0.1, 1.25, 5)
    old = payoff(context, takes, adds, len(late) - 1, 0.0, 0.1, 1.25, 5)
    assert old.pays and not later.pays  # the old guess seamed for 60 requests it could not know would come


async def test_in_the_app_the_seam_before_the_humans_message_shows_before_it(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.app import RhapsodyApp
    from tests.frontends.test_app import wait_idle

    stub.script(*[big(n) for n in range(1, 13)], say("Read them."))
    first = stub.wire(project, handoff_at_share="off", seam_policy="threshold")
    await collect(first.agent.run("read twelve blocks"))
    stub.script(handoff_turn(), say("Noted."), say("Here is the summary."))
    wiring = build(project, Settings(permission_mode="yolo", sandbox=SANDBOX, handoff_at_share="off"), stub.model(),
                   None, resume=first.session.id)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("summarise what you read")
        await wait_idle(pilot)
        kinds = [(e.kind, e.text) for e in app.transcript.entries]
    seam_at = next(i for i, (kind, _) in enumerate(kinds) if kind == "seam")
    answer_at = next(i for i, (_, text) in enumerate(kinds) if text == "Here is the summary.")
    assert seam_at < answer_at and kinds[seam_at + 1] == ("user", "› summarise what you read")  # after the seam
    last = stub.bodies()[-1]["messages"]
    assert last[-1]["content"][-1]["text"] == "summarise what you read"  # and sent after the seam
    assert not any(b.get("type") == "tool_use" and b["name"] == "bash" for m in last if isinstance(m["content"], list)
                   for b in m["content"])
