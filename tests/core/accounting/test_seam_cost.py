"""A seam that would not pay says so before it is made: the estimate, the question in each front end,
and the status bar's figure."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import asyncio
from pathlib import Path


from rhapsody.commands.slash import ANYWAY, run_command
from rhapsody.core.agent import ops
from rhapsody.core.session.context import measure_messages
from rhapsody.core.session.handoff_state import Phase
from rhapsody.core.accounting.seam_cost import DEFAULT_NOTE_TOKENS, of_session
from rhapsody.core.session.session_figures import figures
from rhapsody.loopback.script import call, say
from rhapsody.frontends.app.status import status_line

from tests.conftest import SANDBOX, Stub, collect, plain_mode, until
from tests.test_cli import rhapsody
from tests.core.session.test_handoff_e2e import handoff_turn, step
from tests.core.test_window import big

SHORT = "I will print a short marker to see that the shell works before anything else."


async def test_a_short_session_would_not_pay_and_handoff_shows_the_figures_and_asks(stub: Stub, project: Path) -> None:
    stub.script(step(1), say("Printed."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("print a marker"))
    session = wiring.session
    worth = of_session(session)
    conv = session.conversation
    by_hand = (measure_messages(session.spec, conv.active())[1]
               - measure_messages(session.spec, conv.view(len(conv.messages)))[1])
    assert worth.takes == by_hand > 0 and worth.adds == DEFAULT_NOTE_TOKENS and not worth.pays
    outcome = run_command(wiring.agent, "/handoff")
    assert outcome.confirm == "hand off anyway?" and outcome.then == ANYWAY and outcome.op is None
    assert f"the strip would take ~{worth.takes:,} tokens and the handoff add ~{DEFAULT_NOTE_TOKENS:,}" in outcome.text
    assert "no note yet: the default" in outcome.text and session.handoff.phase == Phase.IDLE
    assert isinstance(run_command(wiring.agent, ANYWAY).op, ops.RequestHandoff)
    assert session.handoff.phase == Phase.IDLE  # the front end submits the op: the command asks for nothing itself
    status = status_line(figures(session.records), session, "main", "idle", 200)
    assert f"seam ~+{worth.change / 1000:.1f}k" in status


async def test_a_seam_that_pays_is_asked_for_at_once_and_the_bar_shows_what_it_takes(stub: Stub, project: Path) -> None:
    stub.script(big(1), say("Read it."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("read a block"))
    worth = of_session(wiring.session)
    assert worth.pays and worth.takes > worth.adds + 1000
    assert f"seam ~−{-worth.change / 1000:.1f}k" in status_line(figures(wiring.session.records), wiring.session,
                                                                 "main", "idle", 200)
    outcome = run_command(wiring.agent, "/handoff")
    assert not outcome.confirm and isinstance(outcome.op, ops.RequestHandoff)
    wiring.agent.request_handoff()  # what the op's receipt does first (core/agent/inbox.py)
    assert wiring.session.handoff.phase == Phase.WANTED


async def test_the_note_cost_comes_from_this_sessions_notes_then_the_projects(stub: Stub, project: Path) -> None:
    stub.script(step(1), say("Printed."), handoff_turn(), say("Noted."), step(2), say("Printed again."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("print a marker"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    seam = next(r for r in dumped(wiring.session.records) if r["kind"] == "seam")
    await collect(wiring.agent.run("another"))
    worth = of_session(wiring.session)
    assert worth.adds == seam["before"]["est_tokens"] - seam["asked_est_tokens"]  # what the divider said it added
    assert worth.basis == "1 note of this session"
    stub.script(step(3), say("Printed."))
    other = stub.wire(project)
    await collect(other.agent.run("print a marker"))
    assert of_session(other.session).adds == worth.adds and of_session(other.session).basis == "1 note of this project"


def test_headless_handoff_that_would_not_pay_is_refused_with_a_line(stub: Stub, project: Path) -> None:
    stub.script(call(SHORT, "bash", command="echo ok"), say("Printed."), handoff_turn(), say("Noted."))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url, "RHAPSODY_SANDBOX": SANDBOX}
    first = rhapsody("-p", "print ok", "--cwd", str(project), "--permission-mode", "yolo", env=env)
    assert first.returncode == 0, first.stderr
    refused = rhapsody("-p", "/handoff", "--continue", "--cwd", str(project), env=env)
    assert refused.returncode == 4 and len(stub.bodies()) == 2
    line = refused.stderr.strip()
    assert line.startswith("rhapsody: a seam would not pay now: the strip would take ~") and "\n" not in line
    assert "headless asks no one" in line and "Traceback" not in line
    forced = rhapsody("-p", "/handoff anyway", "--continue", "--cwd", str(project), env=env)
    assert forced.returncode == 0, forced.stderr
    assert "seam 1:" in forced.stdout and len(stub.bodies()) == 4


async def test_plain_mode_asks_y_n_and_no_leaves_the_context_as_it_is(stub: Stub, project: Path) -> None:
    stub.script(call(SHORT, "bash", command="echo ok"), say("Printed."))
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("print ok\r")
        await until(lambda: "Printed." in out.getvalue() and not wiring.agent.busy)
        pipe.send_text("/handoff\r")
        await until(lambda: "a seam would not pay now" in out.getvalue())
        pipe.send_text("n\r")
        await until(lambda: "not handed off" in out.getvalue())
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    assert wiring.session.handoff.phase == Phase.IDLE and len(stub.bodies()) == 2
    assert not any(r["kind"] == "seam" for r in dumped(wiring.session.records))
