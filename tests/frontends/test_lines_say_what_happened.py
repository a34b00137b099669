"""Words that tell the truth: each line says what happened, not something near it."""

from __future__ import annotations

import io
import json
from pathlib import Path

from rhapsody.frontends.headless import run_headless
from rhapsody.loopback.script import call, say

from tests.conftest import Stub

NARRATE = "I will write the greeting into a file with a redirect so the result is kept on disk."


async def test_headless_refusal_suggests_only_a_rule_that_could_allow_the_call(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="echo hi > out.txt"), call(NARRATE, "bash", command="touch made.txt"), say("ok"))
    wiring = stub.wire(project, permission_mode="ask")
    out = io.StringIO()
    await run_headless(wiring.agent, "greet", "jsonl", out, io.StringIO())
    result = json.loads(out.getvalue().splitlines()[-1])
    redirect, listing = (d["reason"] for d in result["permission_denials"])
    assert "bash:echo" not in redirect and "no allow rule can allow this call (it redirects output to a file)" in redirect
    assert 'allow = ["bash:touch *"]' in listing
    assert not (project / "out.txt").exists()


async def test_a_narration_refusal_counts_as_a_refused_call_and_every_event_is_snake_case(
        stub: Stub, project: Path) -> None:
    stub.script(call("ok", "bash", command="ls"), say("I will narrate next time."))
    wiring = stub.wire(project, permission_mode="yolo")
    out = io.StringIO()
    await run_headless(wiring.agent, "list", "jsonl", out, io.StringIO())
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    result = lines[-1]
    assert result["refused_calls"] == 1 and result["narration_refusals"] == 1 and result["permission_denials"] == []
    names = [x["event"] for x in lines]
    assert "narration_violation" in names and names[0] == "session" and names[-1] == "result"
    assert not any(any(c.isupper() for c in n) for n in names)


async def test_on_resume_a_call_the_narration_rule_refused_says_so_never_interrupted(stub: Stub, project: Path) -> None:
    from rhapsody.view import render

    from tests.conftest import collect

    stub.script(call("ok", "bash", command="ls"), say("I will narrate next time."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("list"))
    session = wiring.session
    lines = [line for _, line in render.record_lines(session.records, project, session.id, session.conversation)]
    assert not any("interrupted" in x.text for x in lines)
    assert [x.kind for x in lines] == ["user", "assistant", "violation", "assistant"]  # as the app showed it live


async def test_a_hint_after_a_refused_call_says_it_landed_after_the_refusal_not_a_result(
        stub: Stub, project: Path) -> None:
    from rhapsody.core.events import HintDelivered
    from rhapsody.core.toolbox.approval import Approval

    from tests.conftest import collect

    stub.script(call(NARRATE, "bash", command="rm -rf build"), say("ok"))
    wiring = stub.wire(project, permission_mode="ask")

    async def deny(*_: object, **__: object) -> Approval:
        wiring.session.hint("keep build/", "steer")  # typed while the question was open
        return Approval(False)

    wiring.agent.toolbox.approver = deny
    events = await collect(wiring.agent.run("clean"))
    where = [e.where for e in events if isinstance(e, HintDelivered)]
    assert where == ["after the refused bash call"]


def test_the_status_says_thinking_only_when_thinking_streams() -> None:
    from rhapsody.frontends.app.status import MODEL_WAIT, Liveness

    live = Liveness()
    live.start(MODEL_WAIT)
    assert "waiting for the model" in live.text() and "thinking" not in live.text()
    live.writing()
    assert " writing " in live.text()
    live.start(MODEL_WAIT)
    live.thinking()
    live.streamed(40)
    assert " thinking " in live.text() and "~10 tokens" in live.text()
    live.start("bash")
    live.thinking()  # a stray call while a tool runs changes nothing
    assert " bash " in live.text()


async def test_the_recap_says_the_last_exchange_files_changed_seams_and_cost(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.recap import recap_text

    from tests.conftest import collect

    stub.script(call(NARRATE, "write_file", path="notes.txt", content="hi\n"), say("Wrote notes.txt with a greeting."))
    wiring = stub.wire(project)
    assert recap_text(wiring.session.records, wiring.session.id) == ""  # nothing said: nothing to recap
    await collect(wiring.agent.run("write a greeting"))
    text = recap_text(wiring.session.records, wiring.session.id)
    lines = text.splitlines()
    assert lines[0] == f"rhapsody session {wiring.session.id}:"
    assert lines[1] == "  you: write a greeting" and lines[2] == "  agent: Wrote notes.txt with a greeting."
    assert lines[3] == "  files changed: notes.txt"
    assert lines[4].startswith("  2 requests, 1 tool call, seams 0, cost $")
