"""Sub-agents through the real loop on the loopback server, one script playing parent and child in turn: its
traffic stays in its own history, a hint and a denial reach it, Esc and its budget stop it, and its history
resumes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from rhapsody.config.settings import Settings
from rhapsody.core.events import HintDelivered, Interrupted, SubagentEnded, SubagentStarted, SubagentStep, ToolFinished, ToolStarted
from rhapsody.core.session import records as rec
from rhapsody.core.session.history import read_history
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.approval import Approval
from rhapsody.loopback.script import call, say
from rhapsody.wiring import build

from tests.conftest import GATE, Stub, collect, until

TASK = "Find what add in app.py returns and say whether it is right."
FOUND = "add returns a minus b, so it subtracts: that is the bug."


def delegate(task: str = TASK, **more: Any) -> dict[str, Any]:
    return call("I will hand the reading to a sub-agent so its traffic stays out of my context.", "delegate",
                task=task, **more)


def child_read() -> dict[str, Any]:
    return call("I will read app.py to see what add returns, as the task asks.", "read_file", path="app.py")


def traffic(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every tool_use and tool_result block of a request."""
    return [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
            if b.get("type") in ("tool_use", "tool_result")]


def history(root: Path, session_id: str) -> list[dict[str, Any]]:
    return read_history(root / ".rhapsody" / "history" / f"{session_id}.jsonl").records


async def test_the_parent_gets_the_final_text_and_what_it_touched_never_the_traffic(stub: Stub, project: Path) -> None:
    stub.script(delegate(), child_read(), say(FOUND), say("The sub-agent found the bug."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("is add right?"))
    parent_first, child_first, child_second, parent_next = stub.bodies()
    assert child_first["messages"][0]["content"][0]["text"] == TASK  # its own context: the task alone
    assert "## You are a sub-agent" in json.dumps(child_first["system"])
    assert "def add(a, b)" in json.dumps(traffic(child_second))  # the child read the file
    sent = traffic(parent_next)
    assert [b["type"] for b in sent] == ["tool_use", "tool_result"] and sent[0]["name"] == "delegate"
    result = sent[1]["content"]
    assert FOUND in result and "Files read: app.py" in result and "Files changed: none" in result
    assert "def add(a, b)" not in json.dumps(parent_next) and "read_file" not in json.dumps(parent_next["messages"])
    started = next(e for e in events if isinstance(e, SubagentStarted))
    steps = [e.step for e in events if isinstance(e, SubagentStep) and e.id == started.id]
    assert [type(s).__name__ for s in steps if isinstance(s, (ToolStarted, ToolFinished))] == ["ToolStarted",
                                                                                                "ToolFinished"]
    assert [(e.status) for e in events if isinstance(e, SubagentEnded)] == ["done"]
    child = history(project, started.session)
    assert child[0]["parent"] == {"session": wiring.session.id, "tool_use_id": sent[0]["id"], "subagent": "sa1"}
    links = list(rec.of(wiring.session.records, rec.Subagent))
    assert [r.state for r in links] == ["started", "done"] and links[1].session == started.session
    assert links[1].tool_calls == 1 and links[1].kept_out_tokens > 0 and links[1].usage["output_tokens"] > 0



def child_waits() -> dict[str, Any]:
    """The child's call that runs until the test creates `go` (conftest.GATE): the test acts while it runs."""
    return call("I will wait on the gate command so the human can act while I work.", "bash", command=GATE)


def delegating(stub: Stub, project: Path, **settings: Any) -> tuple[Any, list[Any], asyncio.Task[None]]:
    """A wired agent whose turn runs in a task, its events gathered as they come."""
    wiring = stub.wire(project, **settings)
    events: list[Any] = []

    async def consume() -> None:
        async for event in wiring.agent.run("is add right?"):
            events.append(event)

    return wiring, events, asyncio.ensure_future(consume())


def running_call(events: list[Any]) -> bool:
    """The sub-agent's gated bash call has started."""
    return any(isinstance(e, SubagentStep) and isinstance(e.step, ToolStarted) and e.step.call.name == "bash"
               for e in events)


async def test_a_hint_typed_while_it_runs_reaches_the_sub_agent_not_the_parent(stub: Stub, project: Path) -> None:
    hint = "Check the tests folder too before you answer."
    stub.script(delegate(), child_waits(), say(FOUND), say("Done."))
    wiring, events, task = delegating(stub, project)
    await until(lambda: running_call(events))
    typed = wiring.session.hint(hint)
    (project / "go").write_text("", encoding="utf-8")
    await asyncio.wait_for(task, 30)
    child_next, parent_next = stub.bodies()[2], stub.bodies()[3]
    assert child_next["messages"][-1]["content"][-1]["text"] == hint
    assert hint not in json.dumps(parent_next)
    receipt = next(e for e in events if isinstance(e, HintDelivered))
    assert receipt.hint_ids == (typed.id,) and receipt.where.startswith("to sub-agent sa1")
    assert not list(rec.of(wiring.session.records, rec.Hint))  # it is the sub-agent's, in its history


async def test_esc_stops_the_sub_agent_and_the_parent_result_says_so(stub: Stub, project: Path) -> None:
    stub.script(delegate(), child_waits(), say("never sent"))
    wiring, events, task = delegating(stub, project)
    await until(lambda: running_call(events))
    task.cancel()
    await asyncio.wait({task}, timeout=30)
    assert task.cancelled()
    started = next(e for e in events if isinstance(e, SubagentStarted))
    ended = [e for e in events if isinstance(e, SubagentEnded)]
    assert [(e.id, e.status) for e in ended] == [("sa1", "interrupted")]  # the stream says so, not only the history
    assert events.index(ended[0]) < next(i for i, e in enumerate(events) if isinstance(e, Interrupted))
    child = history(project, started.session)
    assert [r["during"] for r in child if r["kind"] == "interrupted"] == ["tools"]
    parent = read_history(wiring.session.path).records
    result = [m for m in parent if m["kind"] == "message"][-1]["content"][0]
    assert result["is_error"] and "sub-agent sa1 was stopped" in result["content"]
    assert [r["state"] for r in parent if r["kind"] == "subagent"] == ["started", "interrupted"]
    assert len(stub.bodies()) == 2  # neither went on after Esc


async def test_a_denial_and_its_words_reach_the_sub_agent_through_the_parents_approver(stub: Stub,
                                                                                        project: Path) -> None:
    asked: list[str] = []
    words = "Not app.py: write your findings to notes.md instead."

    async def deny(tool: str, argument: str, why: str, args: dict[str, Any], rules: tuple[str, ...] = ()) -> Approval:
        asked.append(why)
        return Approval(False, words=words)

    stub.script(delegate(mode="ask"),
                call("I will fix add by writing the corrected app.py now.", "write_file", path="app.py",
                     content="def add(a, b):\n    return a + b\n"),
                say("The write was denied; I will report instead."), say("Done."))
    wiring = stub.wire(project, permission_mode="ask", approver=deny)
    await collect(wiring.agent.run("is add right?"))
    assert len(asked) == 1 and asked[0].startswith("sub-agent sa1 asks:")
    assert (project / "app.py").read_text(encoding="utf-8").endswith("a - b\n")
    child_next = stub.bodies()[2]["messages"][-1]["content"]
    assert child_next[0]["is_error"] and child_next[1]["text"] == words


async def test_a_wider_mode_than_the_parents_is_refused(stub: Stub, project: Path) -> None:
    stub.script(delegate(mode="yolo"), say("Understood."))
    wiring = stub.wire(project, permission_mode="read-only")
    await collect(wiring.agent.run("is add right?"))
    result = stub.bodies()[1]["messages"][-1]["content"][0]
    assert result["is_error"] and "more permission than its parent (read-only)" in result["content"]
    assert len(stub.bodies()) == 2 and not list(rec.of(wiring.session.records, rec.Subagent))


async def test_its_budget_stops_it_with_a_clear_note(stub: Stub, project: Path) -> None:
    stub.script(delegate(max_tool_calls=1), child_read(), say("Stopped early."))
    wiring = stub.wire(project, subagent_max_tool_calls=5)
    events = await collect(wiring.agent.run("is add right?"))
    result = traffic(stub.bodies()[2])[-1]["content"]
    assert "stopped at its budget: max_tool_calls reached (1 of 1)" in result
    assert "I will read app.py" in result  # what it said last is its final text
    assert [e.status for e in events if isinstance(e, SubagentEnded)] == ["limit"]
    child = history(project, next(e for e in events if isinstance(e, SubagentStarted)).session)
    assert [(r["limit"], r["value"]) for r in child if r["kind"] == "limit"] == [("max_tool_calls", 1)]


async def test_its_history_resumes_with_its_own_traffic_and_the_parents_without_it(stub: Stub, project: Path) -> None:
    stub.script(delegate(model="claude-haiku-4-5"), child_read(), say(FOUND), say("Done."),
                say("It was app.py."), say("Still app.py."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("is add right?"))
    sid = next(e for e in events if isinstance(e, SubagentStarted)).session
    assert stub.bodies()[1]["model"] == "claude-haiku-4-5" and stub.bodies()[0]["model"] != "claude-haiku-4-5"
    child = Session.resume(project, project / ".rhapsody" / "history" / f"{sid}.jsonl")
    assert child.spec.model == "claude-haiku-4-5"
    again = build(project, Settings(permission_mode="yolo"), stub.model(), None, resume=sid)
    await collect(again.agent.run("which file was it?"))
    assert "def add(a, b)" in json.dumps(traffic(stub.bodies()[4]))  # its own context, its traffic in it
    parent = build(project, Settings(permission_mode="yolo"), stub.model(), None, resume=wiring.session.id)
    await collect(parent.agent.run("which file was it?"))
    assert "def add(a, b)" not in json.dumps(stub.bodies()[5])
    assert [r.state for r in rec.of(parent.session.records, rec.Subagent)] == ["started", "done"]


async def test_read_only_sub_agents_called_together_run_at_the_same_time(stub: Stub, project: Path) -> None:
    both = {"content": [
        {"type": "text", "text": "I will hand two separate readings to two sub-agents at once."},
        {"type": "tool_use", "name": "delegate", "input": {"task": "Read app.py."}},
        {"type": "tool_use", "name": "delegate", "input": {"task": "Read the git log."}}]}
    stub.script(both, child_waits(), child_waits(), say("One found it."), say("One found it."), say("Both done."))
    wiring, events, task = delegating(stub, project, parallel_tools=True)

    def waiting() -> set[str]:
        return {e.id for e in events if isinstance(e, SubagentStep) and isinstance(e.step, ToolStarted)}

    await until(lambda: len(waiting()) == 2)  # in turn, the second would start only after `go`
    (project / "go").write_text("", encoding="utf-8")
    await asyncio.wait_for(task, 30)
    assert waiting() == {"sa1", "sa2"}
    results = [b for b in traffic(stub.bodies()[-1]) if b["type"] == "tool_result"]
    calls = [b["id"] for b in traffic(stub.bodies()[-1]) if b["type"] == "tool_use"]
    assert [r["tool_use_id"] for r in results] == calls and all("Sub-agent sa" in r["content"] for r in results)
    assert [r.state for r in rec.of(wiring.session.records, rec.Subagent)] == ["started", "started", "done", "done"]


async def test_recall_finds_its_traffic_from_the_parent(stub: Stub, project: Path) -> None:
    stub.script(delegate(), child_read(), say(FOUND),
                call("I will recall what the sub-agent read, to quote the line exactly.", "recall", query="return"),
                say("Quoted."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("is add right?"))
    child = next(e for e in events if isinstance(e, SubagentStarted)).session
    found = traffic(stub.bodies()[-1])[-1]["content"]
    assert f"{child}:toolu_" in found and "[return] a - b" in found


async def test_a_token_or_dollar_budget_stops_it_before_its_next_request(stub: Stub, project: Path) -> None:
    for limit, asked in (("max_tokens_spent", {"max_tokens": 100}), ("max_cost_usd", {"max_cost_usd": 0.000001})):
        stub.script(delegate(**asked), child_read(), say("never sent"), say("Stopped early."))
        wiring = stub.wire(project)
        events = await collect(wiring.agent.run("is add right?"))
        assert len(stub.bodies()) == 3  # the parent, the child's first request, the parent again
        assert f"stopped at its budget: {limit} reached" in traffic(stub.bodies()[2])[-1]["content"]
        assert [e.status for e in events if isinstance(e, SubagentEnded)] == ["limit"]
        stub.server.requests.clear()


async def test_the_parents_cost_limit_counts_what_its_sub_agents_spent(stub: Stub, project: Path) -> None:
    import dataclasses

    from rhapsody.core.events import LimitsExceeded
    from rhapsody.frontends.app.status import status_line

    stub.script(delegate(), child_read(), say(FOUND), say("Found."), say("never sent"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("is add right?"))
    own, delegated = wiring.session.figures.cost, wiring.session.figures.delegated_cost
    assert delegated > 0
    shown = status_line(wiring.session.figures, wiring.session, "", "idle", 200)
    assert f"${own + delegated:.2f} (sub-agents ${delegated:.2f})" in shown  # the status bar counts it too
    wiring.agent.policy = dataclasses.replace(wiring.agent.policy, max_cost_usd=own + delegated / 2)
    events = await collect(wiring.agent.run("and now?"))
    assert [e.limit for e in events if isinstance(e, LimitsExceeded)] == ["max_cost_usd"] and len(stub.bodies()) == 4


async def test_the_field_note_names_the_sub_agents_and_what_they_changed(stub: Stub, project: Path) -> None:
    from tests.core.session.test_handoff_e2e import handoff_turn

    stub.script(delegate(mode="auto-edit"),
                call("I will fix add in app.py by writing the corrected file.", "write_file", path="app.py",
                     content="def add(a, b):\n    return a + b\n"),
                say("Fixed add."), say("The sub-agent fixed it."), handoff_turn(), say("Noted."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("fix add"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    child = next(r.session for r in rec.of(wiring.session.records, rec.Subagent))
    note = traffic(stub.bodies()[-1])[-1]["content"]
    assert f"- sub-agents (1): sa1 done (session {child}; changed app.py)" in note
    assert "- files written (0): none" in note  # the parent wrote nothing itself
