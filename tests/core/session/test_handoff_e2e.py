"""Micro-handoff end to end: field note, seam, stripped requests, recall, undo, thinking."""

from __future__ import annotations

from rhapsody.core.session.records import dump, dumped, parse
import json
from contextlib import aclosing
from pathlib import Path
from typing import Any

from rhapsody.core.events import HandoffAsked, HandoffFailed, SeamCommitted, ToolFinished, ToolStarted, TurnEnded
from rhapsody.core.session.handoff import undo_seam
from rhapsody.core.session.history import read_history
from rhapsody.core.session.strip import authored_texts
from rhapsody.core.session.messages import Message
from rhapsody.loopback.script import call, say
from rhapsody.tools.handoff import recall_text

from tests.conftest import Stub, collect

NOTE = {
    "done": ["fixed add() in app.py [measured: tests pass]"],
    "open": ["add a test for negative numbers"],
    "went_wrong": ["first edit matched twice"],
    "working_directory": "project root; it is the git repository",
    "tool_quirks": ["bash output is capped at 30000 chars"],
    "recipes": ["python -c 'import app; print(app.add(2, 3))'"],
}


def handoff_turn(thinking: bool = False) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": "time to write the note"}] if thinking else []
    blocks += [{"type": "text", "text": "Writing my field note now, facts first, as the harness asked me to."},
               {"type": "tool_use", "name": "micro_handoff", "input": NOTE}]
    return {"content": blocks}


def step(n: int, thinking: bool = False) -> dict[str, Any]:
    turn = call(f"Step {n}: I will print a unique marker so this run can be recalled later by its output.",
                "bash", command=f"echo marker-{n}-$((6*7))")
    if thinking:
        turn["content"].insert(0, {"type": "thinking", "thinking": f"thinking about step {n}"})
    return turn


def texts_of(body: dict[str, Any]) -> list[str]:
    return authored_texts(Message.from_api(m) for m in body["messages"])


async def test_two_seams_with_a_hint_strip_tool_traffic_and_keep_every_word(stub: Stub, project: Path) -> None:
    stub.script(
        step(1), step(2), say("Two markers printed."),
        handoff_turn(), say("Note written."),
        step(3), say("Third marker printed."),
        handoff_turn(), say("Second note written."),
        say("I still remember marker-1 and marker-2 from my narration."),
    )
    wiring = stub.wire(project)
    agent = wiring.agent
    async with aclosing(agent.run("print markers")) as events:
        async for event in events:
            if isinstance(event, ToolStarted) and "marker-2" in event.call.input["command"]:
                wiring.session.hint("also keep it short")
    agent.request_handoff()
    seams = [e for e in await collect(agent.run()) if isinstance(e, SeamCommitted)]
    assert len(seams) == 1
    await collect(agent.run("one more marker"))
    agent.request_handoff()
    seams += [e for e in await collect(agent.run()) if isinstance(e, SeamCommitted)]
    await collect(agent.run("what do you remember?"))

    bodies = stub.bodies()
    first_after = bodies[5]
    kinds = [b.get("type") for m in first_after["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert kinds.count("tool_use") == 1 and kinds.count("tool_result") == 1
    assert "also keep it short" in texts_of(first_after)
    final = bodies[-1]
    names = [b["name"] for m in final["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_use"]
    assert names == ["micro_handoff", "micro_handoff"]
    all_texts = [t for r in read_history(wiring.session.path).records if r["kind"] == "message"
                 for t in authored_texts([Message(role=r["role"], content=r["content"])])]
    assert texts_of(final) == all_texts[:-1]
    assert final["system"] == bodies[0]["system"] and final["tools"] == bodies[0]["tools"]
    record = dump(seams[0].record)
    assert record["after"]["request_bytes"] < record["before"]["request_bytes"]
    assert record["before"]["tool_use"] == 3 and record["after"]["tool_use"] == 1
    note = (project / record["note_path"]).read_text()
    assert "fixed add() in app.py" in note and "Harness facts" in note
    assert "`echo marker-2-$((6*7))` → exit 0" in note and "branch" in note
    handoff_result = bodies[4]["messages"][-1]["content"][0]["content"]
    assert ":toolu_" in handoff_result and "bash" in handoff_result


async def test_recall_finds_an_exact_command_output_that_was_stripped(stub: Stub, project: Path) -> None:
    stub.script(step(7), say("printed"), handoff_turn(), say("noted"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("go"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    found = recall_text(project, wiring.session, "marker-7-42", all_sessions=False)
    assert f"{wiring.session.id}:toolu_" in found and "[marker" in found
    call_id = found.split()[0]
    from rhapsody.core.session.recall import fetch

    full = fetch(project, call_id)
    assert full is not None and "marker-7-42" in full and "Step 7" in full


async def test_handoff_mid_run_rides_on_the_tool_results_and_work_resumes(stub: Stub, project: Path) -> None:
    stub.script(step(1), handoff_turn(), say("Noted."), say("Continuing from my note: done."))
    wiring = stub.wire(project)
    events = []
    async with aclosing(wiring.agent.run("go")) as stream:
        async for event in stream:
            events.append(event)
            if isinstance(event, ToolStarted) and event.call.name == "bash":
                wiring.agent.request_handoff()
    assert any(isinstance(e, SeamCommitted) for e in events) and isinstance(events[-1], TurnEnded)
    bodies = stub.bodies()
    after_tool = bodies[1]["messages"][-1]["content"]
    assert [b["type"] for b in after_tool] == ["tool_result", "text"] and "Micro-handoff requested" in after_tool[1]["text"]
    assert "Continue the work from your field note" in json.dumps(bodies[3]["messages"][-1])
    kinds = [b.get("type") for m in bodies[3]["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert kinds.count("tool_use") == 1


async def test_model_that_ignores_the_request_gets_one_reminder_then_no_strip(stub: Stub, project: Path) -> None:
    stub.script(step(1), say("done"), say("I'd rather not."), say("Still no."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("go"))
    wiring.agent.request_handoff()
    events = await collect(wiring.agent.run())
    assert [e for e in events if isinstance(e, HandoffAsked)] == [HandoffAsked(reminder=True)]
    reason = "the agent ended its turn twice without calling micro_handoff; nothing was stripped"
    assert [e for e in events if isinstance(e, HandoffFailed)] == [HandoffFailed(reason)]
    from rhapsody.view.render import event_lines, record_lines

    session = wiring.session
    resumed = [line.text for _, line in record_lines(session.records, session.root, session.id, session.conversation)]
    live = event_lines(HandoffFailed(reason))[0].text
    assert live == f"✗ handoff: {reason}" and resumed.count(live) == 1  # one wording, live and on resume
    old = {"kind": "handoff_failed", "reason": "the agent did not call micro_handoff"}  # an older history's words
    assert [line.text for _, line in record_lines([parse(old)], session.root, session.id, type(session.conversation)())] == [live]
    assert "Reminder" in json.dumps(stub.bodies()[-1]["messages"][-1])
    assert wiring.session.conversation.seams == []


async def test_ten_seams_with_thinking_pass_the_servers_binding_check(stub: Stub, project: Path) -> None:
    turns: list[dict[str, Any]] = []
    for n in range(10):
        turns += [step(n, thinking=True), say(f"marker {n} printed"), handoff_turn(thinking=True), say(f"note {n}")]
    turns.append(say("after ten seams I am still me"))
    stub.script(*turns)
    wiring = stub.wire(project, thinking=True)
    for n in range(10):
        await collect(wiring.agent.run(f"marker {n}"))
        wiring.agent.request_handoff()
        events = await collect(wiring.agent.run())
        assert any(isinstance(e, SeamCommitted) for e in events), n
    await collect(wiring.agent.run("still there?"))
    assert all(r.status == 200 for r in stub.server.requests)
    final = stub.bodies()[-1]
    assert wiring.session.messages()[-1].texts() == ["after ten seams I am still me"]
    kinds = [b.get("type") for m in final["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert kinds.count("tool_use") == 10 and kinds.count("tool_result") == 10 and "thinking" not in kinds


async def test_a_changed_prefix_under_thinking_is_rejected_by_the_server(stub: Stub, project: Path) -> None:
    stub.script(step(1, thinking=True), say("ok"))
    wiring = stub.wire(project, thinking=True)
    await collect(wiring.agent.run("go"))
    body = stub.bodies()[1]
    body["messages"][0]["content"][0]["text"] = "edited"
    import urllib.error
    import urllib.request

    req = urllib.request.Request(stub.server.url + "/v1/messages", data=json.dumps(body).encode(), method="POST")
    try:
        urllib.request.urlopen(req)
        raise AssertionError("expected a 400")
    except urllib.error.HTTPError as exc:
        assert exc.code == 400 and "Invalid 'signature'" in exc.read().decode()


async def test_unhandoff_puts_stripped_blocks_back_and_the_next_request_is_valid(stub: Stub, project: Path) -> None:
    stub.script(step(1, thinking=True), say("done"), handoff_turn(thinking=True), say("noted"), say("back"))
    wiring = stub.wire(project, thinking=True)
    await collect(wiring.agent.run("go"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    assert undo_seam(wiring.session) is not None
    await collect(wiring.agent.run("undo check"))
    last = stub.bodies()[-1]
    assert all(r.status == 200 for r in stub.server.requests)
    kinds = [b.get("type") for m in last["messages"] if isinstance(m["content"], list) for b in m["content"]]
    assert kinds.count("tool_use") == 2 and "thinking" not in kinds


async def test_exact_tokens_asks_count_tokens_on_both_sides_of_the_seam(stub: Stub, project: Path) -> None:
    stub.script(step(1), say("done"), handoff_turn(), say("noted"))
    wiring = stub.wire(project, exact_tokens=True)
    await collect(wiring.agent.run("go"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    counted = [r for r in stub.server.requests if r.path.endswith("/count_tokens")]
    assert len(counted) == 2
    record = [r for r in read_history(wiring.session.path).records if r["kind"] == "seam_tokens"][0]
    assert record["before"] > record["after"] > 0


async def test_token_threshold_triggers_a_handoff_mid_run(stub: Stub, project: Path) -> None:
    stub.script(step(1), step(2), handoff_turn(), say("noted"), say("continued after the seam"))
    wiring = stub.wire(project, handoff_at_tokens=1000)
    events = await collect(wiring.agent.run("go"))
    assert any(isinstance(e, SeamCommitted) for e in events)
    assert "Micro-handoff requested" in json.dumps(stub.bodies()[1]["messages"][-1])
    assert wiring.session.messages()[-1].texts() == ["continued after the seam"]


async def test_recall_index_is_rebuilt_when_missing_and_searches_earlier_sessions(stub: Stub, project: Path) -> None:
    from rhapsody.core.session.recall import index_path

    stub.script(step(5), say("printed"), step(6), say("printed again"))
    first = stub.wire(project)
    await collect(first.agent.run("go"))
    assert "no stripped tool call matches" in recall_text(project, first.session, "marker-5-42", all_sessions=False)
    index_path(first.session.path).write_bytes(b"not a database")
    second = stub.wire(project)
    await collect(second.agent.run("again"))
    found = recall_text(project, second.session, "marker-5-42", all_sessions=True)
    assert found.startswith(f"{first.session.id}:toolu_")


def test_audit_refuses_a_strip_that_loses_or_breaks_text() -> None:
    import pytest

    from rhapsody.core.session.handoff import AuditFailed, audit

    before = [Message.from_api({"role": "user", "content": "a"}), Message.from_api({"role": "assistant", "content": "b"})]
    with pytest.raises(AuditFailed, match="authored text changed"):
        audit(before, before[:1])
    with pytest.raises(AuditFailed, match="invalid"):
        audit(before, [before[0], Message.from_api({"role": "user", "content": "b"})])


async def test_a_field_note_nobody_asked_for_is_refused_and_strips_nothing(stub: Stub, project: Path) -> None:
    """A model that calls micro_handoff on its own (say, reading a request the human cancelled
    with Esc, which stays in its context) writes nothing and gets no seam."""
    stub.script(step(1), handoff_turn(), say("Carrying on without a note."))
    wiring = stub.wire(project)
    wiring.session.request_handoff()
    from rhapsody.core.session import handoff_state

    assert handoff_state.cancel(wiring.session)  # what Esc does to a request
    events = await collect(wiring.agent.run("print a marker"))
    assert not any(isinstance(e, SeamCommitted) for e in events)
    refused = [e for e in events if isinstance(e, ToolFinished) and e.call.name == "micro_handoff"]
    assert len(refused) == 1 and refused[0].is_error and "No micro-handoff is requested" in refused[0].output
    assert not (project / ".rhapsody" / "notes").exists() or not list((project / ".rhapsody" / "notes").iterdir())
    assert wiring.session.handoff.phase.value == "failed"  # the cancel, unchanged by the call
    assert not [r for r in dumped(wiring.session.records) if r["kind"] == "seam"]


async def test_nothing_to_hand_off_says_yet_before_any_seam_and_since_the_last_seam_after_one(
        stub: Stub, project: Path) -> None:
    from rhapsody.commands.slash import run_command

    stub.script(say("hello"), step(1), say("done"), handoff_turn(), say("noted"))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("hi"))
    assert run_command(wiring.agent, "/handoff").text == "nothing to hand off: no tool calls yet"
    await collect(wiring.agent.run("go"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    assert len(wiring.session.conversation.seams) == 1
    assert run_command(wiring.agent, "/handoff").text == "nothing to hand off: no tool calls since the last seam"
