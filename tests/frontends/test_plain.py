"""The plain prompt-toolkit front end on the same loop, driven through a pipe."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import asyncio
import io
import json
from pathlib import Path

from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rhapsody.loopback.script import call, say
from rhapsody.core.toolbox.approval import HumanApprover

from rhapsody.wiring import Wiring
from tests.conftest import GATE, Stub, plain_mode, until

SLOW = "I will run a short command so there is a moment to type a hint while it runs."


async def test_plain_mode_runs_a_turn_takes_a_hint_and_slash_commands(stub: Stub, project: Path) -> None:
    stub.script(call(SLOW, "bash", command=f"{GATE}; echo ok"), say("Done, hint seen."))
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("run it\r")
        await until(lambda: SLOW in out.getvalue())  # the call is narrated: it runs next
        pipe.send_text("shorter please\r")
        await until(lambda: "h1 pending" in out.getvalue())
        (project / "go").touch()
        await until(lambda: not wiring.agent.busy and len(stub.server.requests) >= 2)
        pipe.send_text("/stats\r")
        await until(lambda: "no seams yet" in out.getvalue())
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    text = out.getvalue()
    assert "; echo ok → exit 0" in text and "Done, hint seen." in text
    assert "h1 pending: next tool boundary" in text and "no seams yet" in text
    assert "✓ hint h1 delivered (" in text and "hints h1" not in text
    assert stub.bodies()[1]["messages"][-1]["content"][1]["text"] == "shorter please"
    from rhapsody.core.session.records import NoticeShown as Notice
    from rhapsody.view import render

    notices = [render.notice_line(Notice.model_validate(r)).text for r in dumped(wiring.session.records) if r["kind"] == "notice"]
    assert notices[0] == "› /stats" and "no seams yet" in notices[1]  # as the app records and redraws them


async def test_plain_mode_asks_and_free_text_denies_with_those_words(stub: Stub, project: Path) -> None:
    stub.script(call(SLOW, "bash", command="touch denied.txt"), call(SLOW, "bash", command="touch approved.txt"),
                say("Done."))
    over = asyncio.Event()  # the grace period ends when the test says so
    approver = HumanApprover(grace=over.wait)
    wiring = stub.wire(project, approver=approver, permission_mode="ask")
    async with plain_mode(wiring, approver) as (pipe, out, task):
        pipe.send_text("make the file\r")
        await until(lambda: out.getvalue().count("? bash wants to run") == 1)
        await end_grace(over)  # what is typed sooner is not an answer
        pipe.send_text("hmm, is that safe?\r")
        await until(lambda: out.getvalue().count("? bash wants to run") == 2)
        await end_grace(over)
        pipe.send_text("y\r")
        await until(lambda: not wiring.agent.busy and len(stub.server.requests) >= 3)
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    assert not (project / "denied.txt").exists() and (project / "approved.txt").exists()
    assert "answer the question first" not in out.getvalue()
    assert "denied by the human: hmm, is that safe?" in out.getvalue()
    assert out.getvalue().count("hmm, is that safe?") == 1, out.getvalue()  # on the tool line only, not twice
    assert stub.bodies()[1]["messages"][-1]["content"][1]["text"] == "hmm, is that safe?"


def plain_launch(stub: Stub, project: Path, keys: str) -> str:
    """Run `rhapsody --plain` through cli.launch with `keys` typed; returns what it printed."""
    import contextlib

    from rhapsody.cli import _parser, launch
    from rhapsody.config.settings import Settings

    from tests.conftest import MODEL, SANDBOX

    ns = _parser().parse_args(["--plain", "--model", MODEL])
    printed = io.StringIO()
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        pipe.send_text(keys)
        with contextlib.redirect_stdout(printed):
            assert launch(ns, project, Settings(permission_mode="yolo", sandbox=SANDBOX, model=MODEL), stub.model()) == 0
    return printed.getvalue()


def test_plain_ctrl_d_says_how_to_come_back_and_an_empty_session_leaves_nothing(stub: Stub, project: Path) -> None:
    stub.script(say("Hello."))
    printed = plain_launch(stub, project, "/stats\r\x04")  # a command, no turn, then ctrl+d
    assert "Come back to it" not in printed
    assert not list((project / ".rhapsody" / "history").glob("*.jsonl"))
    printed = plain_launch(stub, project, "hi\r\x04")
    files = list((project / ".rhapsody" / "history").glob("*.jsonl"))
    assert len(files) == 1 and f"session {files[0].stem} saved. Come back to it with: rhapsody --continue" in printed


async def end_grace(over: asyncio.Event) -> None:
    """End the grace period the test gave plain mode, and let its question open (a few loop turns, no clock)."""
    over.set()
    for _ in range(10):
        await asyncio.sleep(0)


async def plain_exchange(wiring: Wiring, line: str, answer: str) -> str:
    """Type `line` into plain mode, wait until `answer` is printed, quit; what plain mode printed."""
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text(line + "\r")
        await until(lambda: answer in out.getvalue())
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    return out.getvalue()


def last_user_text(stub: Stub) -> str:
    return str(stub.bodies()[-1]["messages"][-1]["content"][-1]["text"])


async def test_plain_mode_a_lone_y_entered_as_a_question_appears_never_approves(stub: Stub, project: Path) -> None:
    stub.script(call(SLOW, "bash", command="touch approved.txt"), say("Done."), say("Yes."))
    over = asyncio.Event()
    approver = HumanApprover(grace=over.wait)
    wiring = stub.wire(project, approver=approver, permission_mode="ask")
    async with plain_mode(wiring, approver) as (pipe, out, task):
        pipe.send_text("make the file\r")
        await until(lambda: "? bash wants to run" in out.getvalue())
        pipe.send_text("y\r")  # within the grace period: meant for the prompt, not the question
        await until(lambda: "so it is not the answer" in out.getvalue())
        assert not (project / "approved.txt").exists() and wiring.agent.busy
        await end_grace(over)
        pipe.send_text("n\r")
        await until(lambda: not wiring.agent.busy and len(stub.server.requests) >= 2)
        pipe.send_text("es please\r")  # the `y` set aside came back to the prompt
        await until(lambda: len(stub.server.requests) >= 3 and not wiring.agent.busy)
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    assert not (project / "approved.txt").exists() and last_user_text(stub) == "yes please"


async def test_plain_mode_a_line_being_typed_as_a_question_appears_is_set_aside_not_taken(
        stub: Stub, project: Path) -> None:
    stub.script(call(SLOW, "bash", command="touch approved.txt"), say("Done."), say("It is."))
    over = asyncio.Event()
    approver = HumanApprover(grace=over.wait)
    wiring = stub.wire(project, approver=approver, permission_mode="ask")
    async with plain_mode(wiring, approver) as (pipe, out, task):
        pipe.send_text("make the file\r")
        await until(lambda: wiring.agent.busy)
        pipe.send_text("hmm, is th")  # a hint half typed when the question appears
        await until(lambda: "? bash wants to run" in out.getvalue())
        await end_grace(over)  # with the line unfinished
        await until(lambda: "your unfinished line is set aside" in out.getvalue())
        pipe.send_text("y\r")  # typed after the grace period: the answer
        await until(lambda: not wiring.agent.busy and len(stub.server.requests) >= 2)
        assert (project / "approved.txt").exists()
        pipe.send_text("at safe?\r")  # the half-typed line is back in the prompt, finished and sent
        await until(lambda: len(stub.server.requests) >= 3 and not wiring.agent.busy)
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    assert "denied by the human" not in out.getvalue() and last_user_text(stub) == "hmm, is that safe?"


async def test_plain_mode_ctrl_o_requests_the_handoff_and_keeps_the_line_being_typed(stub: Stub, project: Path) -> None:
    from tests.core.session.test_handoff_e2e import handoff_turn

    stub.script(call(SLOW, "bash", command="echo ok"), say("Done."), handoff_turn(), say("Noted."))
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("run it\r")
        await until(lambda: not wiring.agent.busy and "Done." in out.getvalue())
        pipe.send_text("half typed\x0f")
        await until(lambda: "a seam would not pay now" in out.getvalue())  # the figures, then "hand off anyway? [y/N]"
        pipe.send_text("y\r")
        await until(lambda: any(r["kind"] == "seam" for r in dumped(wiring.session.records)))
        await until(lambda: not wiring.agent.busy and "Noted." in out.getvalue())
        pipe.send_text(" line\r")
        await until(lambda: len(stub.server.requests) >= 5)
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    sent = stub.bodies()[-1]["messages"][-1]["content"]
    assert "half typed line" in str(sent)
    assert "⚙ [rhapsody] Micro-handoff requested" in out.getvalue()  # what the harness told the model, as in the app
    commands = [r["text"] for r in dumped(wiring.session.records) if r["kind"] == "notice" and r.get("command")]
    assert commands == ["/quit"]  # ctrl+o is a key: no "› /handoff" echo on resume


async def test_plain_help_lists_plain_keys_and_ctrl_c_at_the_prompt_quits_only_twice(stub: Stub, project: Path) -> None:
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("/help\r")
        await until(lambda: "ctrl+d" in out.getvalue())
        pipe.send_text("\x03")
        await until(lambda: "press ctrl+c again to quit" in out.getvalue())
        assert not task.done()  # one ctrl+c at the prompt does not end the session
        pipe.send_text("\x03")
        assert await asyncio.wait_for(task, 10) == 0
    help_text = out.getvalue().split("press ctrl+c again")[0]
    assert ">> text" in help_text and "shift+tab" not in help_text and "ctrl+p" not in help_text


async def test_plain_ctrl_c_stops_a_working_turn_and_idle_clears_a_typed_line_before_quitting(
        stub: Stub, project: Path) -> None:
    stub.script(call(SLOW, "bash", command=f"{GATE}; echo ok"), say("never read"))
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("run it\r")
        await until(lambda: SLOW in out.getvalue())  # the call is narrated: it runs next
        pipe.send_text("\x03")  # while the agent works: stops it
        await until(lambda: "interrupted" in out.getvalue() and not wiring.agent.busy)
        assert not task.done()
        pipe.send_text("a half typed line\x03")  # idle, with text: clears it, no step toward quitting
        await asyncio.sleep(0.1)
        assert "press ctrl+c again" not in out.getvalue()
        pipe.send_text("\x03")
        await until(lambda: "press ctrl+c again to quit" in out.getvalue())
        pipe.send_text("\x03")
        assert await asyncio.wait_for(task, 10) == 0
    kinds = [r["kind"] for r in dumped(wiring.session.records)]
    assert "interrupted" in kinds and len(stub.server.requests) == 1
    assert not any("a half typed line" in json.dumps(r) for r in dumped(wiring.session.records))


async def test_plain_a_slash_command_or_ctrl_o_while_a_question_is_open_runs_and_never_denies(
        stub: Stub, project: Path) -> None:
    stub.script(call(SLOW, "bash", command="touch made.txt"), say("Done."))
    over = asyncio.Event()
    approver = HumanApprover(grace=over.wait)
    wiring = stub.wire(project, approver=approver, permission_mode="ask")
    async with plain_mode(wiring, approver) as (pipe, out, task):
        pipe.send_text("make the file\r")
        await until(lambda: "? bash wants to run" in out.getvalue())
        await end_grace(over)
        pipe.send_text("/stats\r")
        await until(lambda: "no seams yet" in out.getvalue() and "still open" in out.getvalue())
        pipe.send_text("\x0f")  # ctrl+o: /handoff, a command, not the answer
        await until(lambda: out.getvalue().count("still open") == 2)
        pipe.send_text("y\r")
        await until(lambda: "Done." in out.getvalue())
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    assert (project / "made.txt").exists()
    by = [(r["decision"], r["by"]) for r in dumped(wiring.session.records) if r["kind"] == "permission"]
    assert by == [("allow", "human")]


async def test_plain_resume_shows_where_the_session_was_left(stub: Stub, project: Path) -> None:
    from tests.conftest import collect

    stub.script(say("The total is computed in report.py."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("where is the total computed?"))
    async with plain_mode(wiring) as (pipe, out, task):
        await until(lambda: "resumed" in out.getvalue())
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    text = out.getvalue()
    assert "resumed; where it was left:\n  you: where is the total computed?\n  agent: The total is computed" in text


async def test_plain_bang_command_runs_and_its_output_is_queued_as_the_humans_words(stub: Stub, project: Path) -> None:
    stub.script(say("Seen."))
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("!echo from-the-human\r")
        await until(lambda: "queued: the agent reads it" in out.getvalue())
        pipe.send_text("what did I run?\r")
        await until(lambda: "Seen." in out.getvalue())
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    assert "! echo from-the-human → exit 0\nfrom-the-human" in out.getvalue()
    sent = [b.get("text", "") for b in stub.bodies()[0]["messages"][-1]["content"]]
    assert any("I ran `echo from-the-human` myself (exit 0)" in t and "from-the-human\n```" in t for t in sent)
