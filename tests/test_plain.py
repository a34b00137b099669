"""The plain prompt-toolkit front end on the same loop, driven through a pipe."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from prompt_toolkit.application import create_app_session
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rhapsody.loopback.script import call, say
from rhapsody.core.approval import HumanApprover
from rhapsody.plain import run_plain

from .conftest import Stub

SLOW = "I will run a short command so there is a moment to type a hint while it runs."


async def test_plain_mode_runs_a_turn_takes_a_hint_and_slash_commands(stub: Stub, project: Path) -> None:
    stub.script(call(SLOW, "bash", command="sleep 0.6; echo ok"), say("Done, hint seen."))
    wiring = stub.wire(project)
    out = io.StringIO()
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        task = asyncio.create_task(run_plain(wiring.agent, wiring.settings, out=out))
        pipe.send_text("run it\r")
        while not wiring.agent.in_flight:
            await asyncio.sleep(0.01)
        pipe.send_text("shorter please\r")
        while wiring.agent.busy or len(stub.server.requests) < 2:
            await asyncio.sleep(0.02)
        pipe.send_text("/stats\r")
        await asyncio.sleep(0.2)
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    text = out.getvalue()
    assert "bash sleep 0.6; echo ok → exit 0" in text and "Done, hint seen." in text
    assert "h1 pending: next tool boundary" in text and "no seams yet" in text
    assert stub.bodies()[1]["messages"][-1]["content"][1]["text"] == "shorter please"


async def test_plain_mode_asks_and_a_line_that_is_no_answer_becomes_a_hint(stub: Stub, project: Path) -> None:
    stub.script(call(SLOW, "bash", command="touch approved.txt"), say("Done."))
    approver = HumanApprover()
    wiring = stub.wire(project, approver=approver, permission_mode="ask")
    out = io.StringIO()
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        task = asyncio.create_task(run_plain(wiring.agent, wiring.settings, approver, out=out))
        pipe.send_text("make the file\r")
        while "? bash wants to run" not in out.getvalue():
            await asyncio.sleep(0.02)
        pipe.send_text("hmm, is that safe?\r")
        await asyncio.sleep(0.2)
        pipe.send_text("y\r")
        while wiring.agent.busy or len(stub.server.requests) < 2:
            await asyncio.sleep(0.02)
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    assert (project / "approved.txt").exists()
    assert "answer the question first" in out.getvalue()
    assert stub.bodies()[1]["messages"][-1]["content"][1]["text"] == "hmm, is that safe?"
