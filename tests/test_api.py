"""The Python API as a script uses it: `from rhapsody import Agent`, the CLI's settings and assembly, the real
anthropic client against the loopback server (reached through ANTHROPIC_BASE_URL, as the CLI reaches it)."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rhapsody import Agent, Answer
from rhapsody import api
from rhapsody.api import PlanDecision, PlanReviewAsked
from rhapsody.core.agent import observers
from rhapsody.core import events as ev
from rhapsody.core.session.history import read_history
from rhapsody.loopback.script import call, say

from tests import launch
from tests.conftest import GATE, MODEL, SANDBOX, Stub, until
from tests.core.agent.test_plan_mode import EDITED, PLAN, REASON, proposal
from tests.core.session.test_handoff_e2e import handoff_turn, step

STEP = "I will append a line to log.txt so each executed run of this tool call is visible on disk."


@pytest.fixture
def wired(stub: Stub, monkeypatch: pytest.MonkeyPatch) -> Stub:
    """The stub, reached the CLI's way: the anthropic client reads these two variables."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key")
    return stub


def open_agent(project: Path, **flags: Any) -> Agent:
    flags.setdefault("sandbox", SANDBOX)
    return Agent.open(project, model=MODEL, **flags)


async def collect(events: AsyncIterator[ev.Event]) -> list[ev.Event]:
    return [event async for event in events]


async def test_a_turn_with_a_tool_call_streams_typed_events_and_reads_figures(wired: Stub, project: Path) -> None:
    wired.script(call(STEP, "bash", command="echo run >> log.txt"), say("Logged one run."))
    async with open_agent(project, permission_mode="yolo") as agent:
        seen = await collect(agent.send("log a run"))
        figures = agent.figures()
    finished = [e for e in seen if isinstance(e, ev.ToolFinished)]
    assert [(e.call.name, e.is_error) for e in finished] == [("bash", False)]
    assert (project / "log.txt").read_text() == "run\n"
    assert isinstance(seen[-1], ev.Idle) and any(isinstance(e, ev.TurnEnded) for e in seen)
    assert figures.requests == 2 and figures.tool_calls == 1 and figures.input_tokens > 0
    assert figures.cost_usd > 0 and 0 < figures.context_share < 1 and figures.context_window >= 200_000


@pytest.mark.parametrize("answer", [Answer.allow(), Answer.deny("write to notes.txt instead")])
async def test_an_approval_is_answered_by_the_callback(wired: Stub, project: Path, answer: Answer) -> None:
    wired.script(call(STEP, "bash", command="echo run >> log.txt"), say("Understood."))
    asked: list[ev.ApprovalAsked] = []

    def on_approval(question: ev.ApprovalAsked) -> Answer:
        asked.append(question)
        return answer

    async with open_agent(project, on_approval=on_approval) as agent:  # no mode given: `ask`, as the CLI
        await collect(agent.send("log a run"))
    assert [q.tool for q in asked] == ["bash"] and "log.txt" in asked[0].argument
    assert (project / "log.txt").exists() == (answer.decision == "once")
    last_user = json.dumps(wired.bodies()[1]["messages"][-1]["content"])
    assert ("write to notes.txt instead" in last_user) == (answer.decision == "deny")


async def test_an_async_callback_answers_too(wired: Stub, project: Path) -> None:
    wired.script(call(STEP, "bash", command="echo run >> log.txt"), say("Done."))

    async def on_approval(question: ev.ApprovalAsked) -> Answer:
        return Answer.allow()

    async with open_agent(project, on_approval=on_approval) as agent:
        await collect(agent.send("log a run"))
    assert (project / "log.txt").read_text() == "run\n"


async def test_a_hint_sent_during_a_tool_call_reaches_the_model_after_its_result(wired: Stub, project: Path) -> None:
    wired.script(call(STEP, "bash", command=f"{GATE}; echo run >> log.txt"), say("Adjusted to the hint."))
    ids: list[str] = []
    async with open_agent(project, permission_mode="yolo") as agent:
        async for event in agent.send("start"):
            if isinstance(event, ev.ToolStarted):
                ids.append(agent.hint("use tabs, not spaces"))
                (project / "go").touch()
            if isinstance(event, ev.HintDelivered):
                assert event.hint_ids == (ids[0],)
    last_user = wired.bodies()[1]["messages"][-1]["content"]
    assert ids == ["h1"] and [b["type"] for b in last_user] == ["tool_result", "text"]
    assert last_user[1]["text"] == "use tabs, not spaces"


async def test_a_handoff_then_resume_by_id(wired: Stub, project: Path) -> None:
    wired.script(step(1), say("Marker printed."), handoff_turn(), say("Note written."), say("Resumed."))
    async with open_agent(project, permission_mode="yolo") as agent:
        await collect(agent.send("print a marker"))
        seen = await collect(agent.handoff())
        seams = agent.figures().seams
        session_id = agent.session_id
    assert [e for e in seen if isinstance(e, ev.SeamCommitted)] and seams == 1
    async with Agent.open(project, resume=session_id, sandbox=SANDBOX, permission_mode="yolo") as again:
        assert again.session_id == session_id and again.figures().seams == 1
        await collect(again.send("go on"))
    sent = json.dumps(wired.bodies()[-1]["messages"])
    assert "go on" in sent and "print a marker" in sent  # the resumed context holds the first turn's words


async def test_a_handoff_asked_during_a_turn_comes_through_send(wired: Stub, project: Path) -> None:
    wired.script(call(STEP, "bash", command=f"{GATE}; echo run >> log.txt"), handoff_turn(), say("Going on."),
                 say("Done."))
    during: list[list[ev.Event]] = []
    seen: list[ev.Event] = []
    async with open_agent(project, permission_mode="yolo") as agent:
        async for event in agent.send("log a run"):
            seen.append(event)
            if isinstance(event, ev.ToolStarted) and not during:
                during.append(await collect(agent.handoff()))  # nothing of its own: the turn carries it
                (project / "go").touch()
        seams = agent.figures().seams
    assert during == [[]] and seams == 1
    assert [e for e in seen if isinstance(e, ev.SeamCommitted)] and (project / "log.txt").exists()


async def test_a_refused_operation_says_why(wired: Stub, project: Path) -> None:
    wired.script(call(STEP, "bash", command=f"{GATE}; true"), say("Done."))
    async with open_agent(project, permission_mode="yolo") as agent:
        async for event in agent.send("start"):
            if isinstance(event, ev.ToolStarted):
                with pytest.raises(RuntimeError, match="hint"):
                    await collect(agent.send("another"))
                (project / "go").touch()


async def test_a_failing_callback_denies_the_call_and_its_error_comes_out(wired: Stub, project: Path) -> None:
    wired.script(call(STEP, "bash", command="echo run >> log.txt"), say("Understood."))

    def on_approval(question: ev.ApprovalAsked) -> Answer:
        raise LookupError("no policy for bash")

    agent = open_agent(project, on_approval=on_approval)
    with pytest.raises(LookupError):
        await collect(agent.send("log a run"))
    await agent.close()  # the turn, denied, is stopped or over: close does not wait on an open question
    assert not agent.working and not (project / "log.txt").exists()
    assert len(wired.bodies()) >= 1


def test_bad_input_is_one_line_and_writes_nothing(wired: Stub, tmp_path: Path, project: Path) -> None:
    from rhapsody.core.errors import RhapsodyError

    with pytest.raises(RhapsodyError, match="is not a directory"):
        Agent.open(tmp_path / "missing", model=MODEL)
    assert not (tmp_path / "missing").exists()
    with pytest.raises(RhapsodyError, match="permission_mode"):
        Agent.open(project, model=MODEL, permission_mode="root")
    with pytest.raises(RhapsodyError, match="no sessions"):
        Agent.open(project, resume="nope")


def test_the_headless_json_lines_are_the_apis_events(wired: Stub, project: Path) -> None:
    """One serialiser: `rhapsody -p --output-format jsonl` prints what `as_json` gives for the same turn."""
    wired.script(call(STEP, "bash", command="echo run >> log.txt"), say("Logged."),
                 call(STEP, "bash", command="echo run >> log.txt"), say("Logged."))
    _, seen = api.run("log a run", project, model=MODEL, sandbox=SANDBOX, permission_mode="yolo")
    ours = [api.as_json(e)["event"] for e in seen if not isinstance(e, ev.Idle)]
    done = launch.run(["-p", "log a run", "--output-format", "jsonl", "--model", MODEL, "--permission-mode", "yolo"],
                      cwd=project, timeout=50, env={**_env(), "RHAPSODY_SANDBOX": SANDBOX})
    lines = [json.loads(line)["event"] for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr
    assert lines[0] == "session" and lines[-1] == "result" and lines[1:-1] == ours
    assert "tool_finished" in ours


def test_the_example_runs_offline(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "api_demo.py"
    done = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=50,
                          env={**_env(), "XDG_STATE_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "hint h1 sent" in done.stdout and "hint_delivered" in done.stdout
    assert "handoff: ['seam_committed']" in done.stdout and "1 seam" in done.stdout
    assert "Resumed: log.txt still holds one run." in done.stdout


def test_import_rhapsody_stays_light_until_the_api_is_asked_for() -> None:
    code = ("import sys, rhapsody; light = 'rhapsody.api' not in sys.modules and 'anthropic' not in sys.modules; "
            "rhapsody.Agent; print(light, 'rhapsody.api' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.stdout.split() == ["True", "True"], done.stderr


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


async def test_rewind_from_a_script_is_the_op_with_its_refusal_typed(wired: Stub, project: Path) -> None:
    wired.script(call("I will write notes.txt with one line, expecting it to be created.", "write_file",
                      path="notes.txt", content="one\n"), say("Written."))
    async with open_agent(project, permission_mode="yolo") as agent:
        await collect(agent.send("write the notes"))
        assert [line.split()[:4] for line in agent.rewind_points()] == [["1", "write", "the", "notes"]]
        (project / "notes.txt").write_text("mine\n")
        refused = agent.rewind(1, "files")
        assert not refused.ok and refused.outside == ("notes.txt",)
        assert (project / "notes.txt").read_text() == "mine\n"
        done = agent.rewind(1, force=True)
        assert done.ok and done.prompt == "write the notes" and not (project / "notes.txt").exists()
        kinds = [json.loads(line)["kind"] for line in agent.history_path.read_text().splitlines()]
    assert kinds.count("rewind") == 1 and kinds.count("restore") == 2


async def test_a_plan_goes_to_the_callback_and_an_edited_approval_switches_the_mode(wired: Stub, project: Path) -> None:
    wired.script(proposal(), say("Approved; I start with step 1."))
    plans: list[PlanReviewAsked] = []

    def on_plan(plan: PlanReviewAsked) -> PlanDecision:
        plans.append(plan)
        return PlanDecision.approve(mode="auto-edit", plan=EDITED)

    async with open_agent(project, on_plan=on_plan, permission_mode="plan") as agent:
        seen = await collect(agent.send("fix add"))
    assert [p.plan for p in plans] == [PLAN] and any(isinstance(e, PlanReviewAsked) for e in seen)
    result, *words = wired.bodies()[1]["messages"][-1]["content"]
    assert "approved" in result["content"] and not result.get("is_error") and EDITED in words[0]["text"]
    run = next(r for r in read_history(agent.history_path).records if r.get("name") == "exit_plan")
    assert run["plan_verdict"] == "approved" and run["plan_edited"]
    modes = [r["mode"] for r in read_history(agent.history_path).records if r["kind"] == "permission_mode"]
    assert modes[-1] == "auto-edit"


async def test_a_rejected_plan_keeps_plan_mode_and_without_a_callback_no_one_approves(wired: Stub,
                                                                                     project: Path) -> None:
    wired.script(proposal(), say("I will look at the callers first."), proposal(), say("Understood."))

    async def on_plan(plan: PlanReviewAsked) -> PlanDecision:
        return PlanDecision.reject(REASON)

    async with open_agent(project, on_plan=on_plan, permission_mode="plan") as agent:
        await collect(agent.send("fix add"))
    after = wired.bodies()[1]["messages"][-1]["content"]
    assert after[0]["is_error"] and "rejected" in after[0]["content"] and after[1]["text"] == REASON
    async with open_agent(project, permission_mode="plan") as agent:  # no on_plan: the tool says no one can approve
        seen = await collect(agent.send("fix add"))
    assert not any(isinstance(e, PlanReviewAsked) for e in seen)
    said = json.dumps(wired.bodies()[3]["messages"][-1]["content"])
    assert "no human" in said.lower() or "cannot be approved" in said.lower(), said


async def test_a_failing_plan_callback_rejects_the_plan_and_its_error_comes_out(wired: Stub, project: Path) -> None:
    wired.script(proposal(), say("Understood."))

    def on_plan(plan: PlanReviewAsked) -> PlanDecision:
        raise LookupError("no reviewer today")

    agent = open_agent(project, on_plan=on_plan, permission_mode="plan")
    with pytest.raises(LookupError):
        await collect(agent.send("fix add"))
    await agent.close()
    assert not agent.working
    records = read_history(agent.history_path).records
    assert [r["kind"] for r in records if r["kind"] in ("message", "interrupted")][-1] == "interrupted"
    assert not any(r.get("plan_verdict") == "approved" for r in records) and agent._loop.permission_mode == "plan"


async def test_a_process_that_opens_session_after_session_lets_each_finished_one_go(
        wired: Stub, project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A script, the editor protocol's server or a service opens many sessions in one process: once one is
    closed, no thread is left holding it. The memory log's observer thread waited forever, one per session,
    each holding the last session it saw (its records, the history file's handle)."""
    monkeypatch.setattr(observers, "LINGER", 0.05)

    def observer_threads() -> int:
        return sum(thread.name == "rhapsody-observers" for thread in threading.enumerate())

    await until(lambda: observer_threads() == 0)  # none left by an earlier test on this worker
    sessions = []
    for n in range(3):
        wired.script(say(f"reply {n}"))
        async with open_agent(project, permission_mode="yolo") as agent:
            assert agent._wiring.agent.observers.observers  # the memory log sees every event
            seen = await collect(agent.send(f"hello {n}"))
            assert any(isinstance(e, ev.TurnEnded) for e in seen)
            sessions.append(weakref.ref(agent._wiring.session))
        del agent
    await until(lambda: observer_threads() == 0)
    gc.collect()
    assert [ref() for ref in sessions] == [None, None, None]
