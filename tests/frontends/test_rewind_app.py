"""Rewind in the app (Esc Esc, /rewind, Pilot keys) and in plain mode (/rewind through a pipe), after
real turns that wrote with write_file, edited with edit_file and changed files with sandboxed bash."""

from __future__ import annotations

import asyncio
from pathlib import Path


from rhapsody.core.session.history import read_history
from rhapsody.loopback.script import say
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.rewind import OverwriteScreen, RewindScreen
from rhapsody.frontends.app.prompt import Completions
from rhapsody.frontends.app.widgets import PromptInput

from tests.conftest import Stub, plain_mode, until
from tests.rewind.test_rewind import first_turn, git_hashes, second_turn, seed, tree
from tests.frontends.test_app import type_and_send, wait_idle


async def two_app_turns(pilot, app: RhapsodyApp) -> None:  # type: ignore[no-untyped-def]
    await type_and_send(pilot, "make the files")
    await wait_idle(pilot)
    await type_and_send(pilot, "add a third line")
    await wait_idle(pilot)


async def test_escape_twice_on_an_empty_prompt_rewinds_both_and_fills_the_prompt(stub: Stub, project: Path) -> None:
    seed(project)
    before, git_before = tree(project), git_hashes(project)
    stub.script(*first_turn(), *second_turn())
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await two_app_turns(pilot, app)
        assert (project / "gen" / "out.txt").exists()
        await pilot.press("escape", "escape")
        await until(lambda: isinstance(app.screen, RewindScreen), pause=pilot.pause)
        await pilot.press("up", "b")  # the newest is highlighted; up: the first message
        await until(lambda: app.query_one(PromptInput).text == "make the files", pause=pilot.pause)
        assert tree(project) == before and git_hashes(project) == git_before
        assert wiring.session.messages() == []
        entries = app.transcript.entries
        assert any(e.kind == "rewound" and "make the files" in e.text for e in entries)
        assert any("conversation rewound to before › make the files" in e.text for e in entries)
    kinds = [r["kind"] for r in read_history(wiring.session.path).records]
    assert kinds.count("rewind") == 1 and kinds.count("restore") == 2


async def test_slash_rewind_conversation_only_keeps_files_and_the_next_request_leaves_the_branch_out(
        stub: Stub, project: Path) -> None:
    seed(project)
    stub.script(*first_turn(), *second_turn(), say("Fine."))
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await two_app_turns(pilot, app)
        notes = (project / "notes.txt").read_text()
        await type_and_send(pilot, "/rewind")
        await until(lambda: isinstance(app.screen, RewindScreen), pause=pilot.pause)
        await pilot.press("c")
        await until(lambda: app.query_one(PromptInput).text == "add a third line", pause=pilot.pause)
        assert (project / "notes.txt").read_text() == notes == "one\ntwo\nthree\n"
        app.query_one(PromptInput).text = "add a fourth line instead"
        await pilot.press("enter")
        await wait_idle(pilot)
    sent = str(stub.bodies()[-1]["messages"])
    assert "add a fourth line instead" in sent and "make the files" in sent and "add a third line" not in sent


async def test_files_changed_outside_are_asked_about_in_the_app(stub: Stub, project: Path) -> None:
    seed(project)
    stub.script(*first_turn(), *second_turn())
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await two_app_turns(pilot, app)
        (project / "app.py").write_text("mine\n")
        for answer, kept in (("n", True), ("y", False)):
            await type_and_send(pilot, "/rewind")
            await until(lambda: isinstance(app.screen, RewindScreen), pause=pilot.pause)
            await pilot.press("up", "f")
            await until(lambda: isinstance(app.screen, OverwriteScreen), pause=pilot.pause)
            await pilot.press(answer)
            await until(lambda: not isinstance(app.screen, OverwriteScreen), pause=pilot.pause)
            await pilot.pause()
            assert ((project / "app.py").read_text() == "mine\n") == kept
        assert "a - b" in (project / "app.py").read_text() and not (project / "notes.txt").exists()


async def test_plain_mode_lists_and_rewinds_and_puts_the_message_back_in_the_prompt(stub: Stub, project: Path) -> None:
    seed(project)
    before = tree(project)
    stub.script(*first_turn(), *second_turn())
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("make the files\r")
        await until(lambda: len(stub.server.requests) >= 4 and not wiring.agent.busy)
        pipe.send_text("add a third line\r")
        await until(lambda: len(stub.server.requests) >= 6 and not wiring.agent.busy)
        pipe.send_text("/rewind\r")
        await until(lambda: "/rewind N" in out.getvalue())
        assert "  1  make the files  (5 files +4 -2)" in out.getvalue()
        pipe.send_text("/rewind 1 both\r")
        await until(lambda: "files restored" in out.getvalue())
        assert tree(project) == before and wiring.session.messages() == []
        pipe.send_text("\r")  # the prompt holds the rewound message: Enter sends it again
        await until(lambda: len(stub.server.requests) >= 7)
        pipe.send_text("/quit\r")
        await asyncio.wait_for(task, 10)
    assert stub.bodies()[-1]["messages"][0]["content"][0]["text"] == "make the files"


async def test_the_picker_ends_in_the_rewind_op_and_an_overwrite_is_the_op_forced(stub: Stub, project: Path) -> None:
    seed(project)
    before = tree(project)
    stub.script(*first_turn(), *second_turn())
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await two_app_turns(pilot, app)
        wiring.agent.toolbox.checkpointer = None  # the app reaches the checkpoints only through the agent's rewinder
        (project / "app.py").write_text("mine\n")
        await type_and_send(pilot, "/rewind")
        await until(lambda: isinstance(app.screen, RewindScreen), pause=pilot.pause)
        await pilot.press("up", "b")
        await until(lambda: isinstance(app.screen, OverwriteScreen), pause=pilot.pause)
        assert app.screen.paths == ("app.py",) and (project / "app.py").read_text() == "mine\n"
        await pilot.press("y")
        await until(lambda: app.query_one(PromptInput).text == "make the files", pause=pilot.pause)
        assert tree(project) == before and wiring.session.messages() == []
    records = read_history(wiring.session.path).records
    assert [r["kind"] for r in records].count("rewind") == 1
    assert [r["state"] for r in records if r["kind"] == "restore"] == ["started", "done"]



async def test_a_prompt_change_once_the_completions_are_gone_does_not_end_the_app(stub: Stub, project: Path) -> None:
    """As the app closes its widgets go, and the prompt's last change (the picker's refill, a key) can be handled
    after the completions line went: that change must not end the app with NoMatches (seen once under load, as
    this file's picker test ended)."""
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        prompt = app.prompt
        prompt.text = "/hel"
        await until(lambda: "/help" in str(app.query_one(Completions).render()), pause=pilot.pause)
        await app.query_one(Completions).remove()  # the state the closing app is in
        prompt.text = "/he"
        await pilot.pause()
        assert app.is_running and app._exception is None and prompt.text == "/he"
