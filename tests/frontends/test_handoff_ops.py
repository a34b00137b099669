"""`/handoff`, ctrl+o and `/unhandoff` take one path in every front end: the command decides and returns
`ops.RequestHandoff()` / `ops.UndoHandoff()`, the controller submits it and acts on the receipt. Driven
through the real app with Pilot and through plain mode's pipe, on the loopback server."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rhapsody.commands.slash import run_command
from rhapsody.core.agent import ops
from rhapsody.core.session.handoff_state import Phase
from rhapsody.core.session.records import dumped
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.loopback.script import say

from tests.conftest import Stub, collect, held, plain_mode, until
from tests.core.test_window import big
from tests.core.session.test_handoff_e2e import handoff_turn
from tests.frontends.test_app_keys import idle, records, send, texts


async def test_the_commands_return_their_op_and_change_nothing_themselves(stub: Stub, project: Path) -> None:
    stub.script(big(1), say("Listed."), handoff_turn(), say("Noted."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("list"))
    asked = run_command(wiring.agent, "/handoff")
    assert asked.op == ops.RequestHandoff() and wiring.session.handoff.phase == Phase.IDLE
    assert wiring.agent.submit(asked.op).started
    await wiring.agent.settled()
    undo = run_command(wiring.agent, "/unhandoff")
    assert undo.op == ops.UndoHandoff() and "unseam" not in [r["kind"] for r in dumped(wiring.session.records)]
    assert wiring.agent.submit(undo.op).reload
    assert [r["kind"] for r in dumped(wiring.session.records)].count("unseam") == 1


async def test_ctrl_o_then_unhandoff_in_the_app_go_through_the_ops(stub: Stub, project: Path) -> None:
    slow, go = held({"content": [{"type": "text", "text": "A long answer with no tool call at all. " * 40}]})
    stub.script(big(1), say("Listed."), handoff_turn(), say("Noted."), slow)
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, "list")
        await idle(pilot)
        await pilot.press("ctrl+o")  # the listing is big: the seam pays, so nothing is asked
        await idle(pilot)
        assert [r["kind"] for r in records(app)].count("seam") == 1
        await send(pilot, "/unhandoff")
        await until(lambda: any("seam 1 undone" in t for t in texts(app)), pause=pilot.pause)
        assert [r["kind"] for r in records(app)].count("unseam") == 1
        await send(pilot, "talk")
        await until(lambda: app.transcript.live is not None, pause=pilot.pause)
        await pilot.press("ctrl+o")
        await pilot.press("ctrl+o")  # the second finds the first under way: the receipt refuses it
        await until(lambda: any("a micro-handoff is already under way" in t for t in texts(app)), pause=pilot.pause)
        assert app.transcript.live is not None  # both landed while the reply streams
        await pilot.press("escape")
        await idle(pilot)
        go.set()
    said = [r for r in dumped(wiring.session.records) if r["kind"] == "notice"]
    assert any("micro-handoff requested: at the next tool boundary" in r["text"] for r in said)
    assert any(r.get("command") and r["text"] == "/unhandoff" for r in said)


async def test_plain_mode_unhandoff_is_the_op_and_says_what_came_back(stub: Stub, project: Path) -> None:
    stub.script(big(1), say("Listed."), handoff_turn(), say("Noted."))
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("list\r")
        await until(lambda: not wiring.agent.busy and "Listed." in out.getvalue())
        pipe.send_text("/handoff\r")
        await until(lambda: not wiring.agent.working and "Noted." in out.getvalue())
        pipe.send_text("/unhandoff\r")
        await until(lambda: "seam 1 undone" in out.getvalue())
        pipe.send_text("/unhandoff\r")
        await until(lambda: "no seam to undo" in out.getvalue())
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    kinds = [r["kind"] for r in dumped(wiring.session.records)]
    assert kinds.count("seam") == 1 and kinds.count("unseam") == 1
