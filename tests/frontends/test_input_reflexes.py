"""The input as a Claude Code user types into it: `\\` Enter for a new line, ctrl+r through the input
history, /resume picking a session inside the app, /init writing a starting AGENTS.md."""

from __future__ import annotations

import asyncio
from pathlib import Path


from rhapsody.frontends.app.confirm import ConfirmScreen
from rhapsody.frontends.app.picker import PickerScreen
from rhapsody.frontends.app.widgets import PromptInput
from rhapsody.frontends.prompt_aids import InputHistory
from rhapsody.loopback.script import say

from tests.conftest import Stub, collect, plain_mode
from tests.conftest import type_text, until
from tests.frontends.test_app_keys import idle, plain_app, texts


def sent_texts(stub: Stub) -> list[str]:
    return [str(m["content"][0]["text"] if isinstance(m["content"], list) else m["content"])
            for m in stub.bodies()[-1]["messages"] if m["role"] == "user"]


async def test_backslash_then_enter_is_a_new_line_not_a_message(stub: Stub, project: Path) -> None:
    stub.script(say("Two lines."))
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        await type_text(pilot, "line one\\")
        await pilot.press("enter")
        prompt = app.query_one(PromptInput)
        assert prompt.text == "line one\n" and not stub.bodies()  # not sent
        await type_text(pilot, "line two")
        await pilot.press("enter")
        await idle(pilot)
    assert sent_texts(stub) == ["line one\nline two"]


async def test_ctrl_r_finds_earlier_inputs_newest_first_and_esc_brings_the_draft_back(stub: Stub, project: Path) -> None:
    history = InputHistory(project)
    for line in ("fix the parser test", "run the linter", "fix the cache bug"):
        history.add(line)
    stub.script(say("On it."))
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24)) as pilot:
        prompt = app.query_one(PromptInput)
        await type_text(pilot, "my draft")
        await pilot.press("ctrl+r")
        await type_text(pilot, "fix")
        assert prompt.text == "fix the cache bug" and "reverse-i-search `fix`" in str(prompt.border_title)
        await pilot.press("ctrl+r")
        assert prompt.text == "fix the parser test"
        await pilot.press("escape")
        assert prompt.text == "my draft" and not prompt.border_title
        await pilot.press("ctrl+r")
        await type_text(pilot, "lint")
        await pilot.press("enter")  # kept in the input to edit, not sent
        assert prompt.text == "run the linter" and not stub.bodies() and prompt.search is None
        await type_text(pilot, " again")
        await pilot.press("enter")
        await idle(pilot)
    assert sent_texts(stub) == ["run the linter again"]


async def test_plain_mode_ctrl_r_searches_the_projects_input_history(stub: Stub, project: Path) -> None:
    InputHistory(project).add("explain the cache")
    stub.script(say("It caches."))
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        await asyncio.sleep(0.1)
        pipe.send_text("\x12cache\r")  # ctrl+r, the query; Enter takes the match
        pipe.send_text("\r")
        await until(lambda: bool(stub.bodies()) and not wiring.agent.busy)
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    assert sent_texts(stub) == ["explain the cache"]


async def test_resume_inside_the_app_picks_another_session_and_goes_on_with_it(stub: Stub, project: Path) -> None:
    stub.script(say("Earlier answer."), say("Goes on."))
    earlier = stub.wire(project)
    await collect(earlier.agent.run("the earlier question"))
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_text(pilot, "/resume")
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, PickerScreen), pause=pilot.pause)
        assert list(app.screen.summaries) == [earlier.session.id]  # the open session is not offered
        await pilot.press("enter")
        await until(lambda: app.agent.session.id == earlier.session.id, pause=pilot.pause)
        await until(lambda: any("the earlier question" in t for t in texts(app)), pause=pilot.pause)
        await type_text(pilot, "and now?")
        await pilot.press("enter")
        await idle(pilot)
    assert sent_texts(stub) == ["the earlier question", "and now?"]
    assert "and now?" in earlier.session.path.read_text()


async def test_init_writes_agents_md_from_the_project_and_asks_before_replacing_one(stub: Stub, project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-q'\n")
    (project / "Makefile").write_text("test:\n\tpytest\n")
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_text(pilot, "/init")
        await pilot.press("enter")
        await until(lambda: (project / "AGENTS.md").exists(), pause=pilot.pause)
        written = (project / "AGENTS.md").read_text()
        assert "Python" in written and "`python -m pytest`" in written and "`make test`" in written
        assert "Git repository: the project root" in written
        (project / "AGENTS.md").write_text("# mine\n")
        await type_text(pilot, "/init")
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        await pilot.press("n")
        await until(lambda: any("AGENTS.md left as it was" in t for t in texts(app)), pause=pilot.pause)
        assert (project / "AGENTS.md").read_text() == "# mine\n"
        await type_text(pilot, "/init")
        await pilot.press("enter")
        await until(lambda: isinstance(app.screen, ConfirmScreen), pause=pilot.pause)
        await pilot.press("y")
        await until(lambda: "Python" in (project / "AGENTS.md").read_text(), pause=pilot.pause)
    assert not stub.bodies()  # no model call: it reads the disk only


async def test_init_never_writes_through_a_link(stub: Stub, project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "bashrc"
    outside.write_text("export SAFE=1\n")
    (project / "AGENTS.md").symlink_to(outside)
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_text(pilot, "/init")
        await pilot.press("enter")
        await until(lambda: any("not a regular file" in t for t in texts(app)), pause=pilot.pause)
        assert not isinstance(app.screen, ConfirmScreen)
    assert outside.read_text() == "export SAFE=1\n"
