"""A first run as a newcomer meets it: the demo's welcome whole at 80x24, notices that never cover the status
bar or pile up, a palette without stray colons, and a README whose install command installs only what runs."""

from __future__ import annotations

import re
from pathlib import Path

from textual.content import Content
from textual.widgets import Static
from textual.widgets._toast import Toast

from rhapsody.demo import DEMO_TASK, WELCOME
from rhapsody.frontends.app.app import RhapsodyApp

from tests.conftest import Stub
from tests.frontends.test_app_keys import idle, plain_app
from tests.conftest import until

README = Path(__file__).parents[2] / "README.md"
CI = Path(__file__).parents[2] / ".ci" / "run"


async def test_the_demos_welcome_fits_80x24_with_its_title(stub: Stub, project: Path) -> None:
    wiring = stub.wire(project, permission_mode="ask")
    app = RhapsodyApp(wiring.agent, wiring.settings, initial=DEMO_TASK, welcome=WELCOME)
    async with app.run_test(size=(80, 24)) as pilot:
        await idle(pilot)
        rows = [strip.text for strip in app.screen._compositor.render_strips()]
        shown = "\n".join(rows)
        assert "rhapsody: a coding agent that narrates each step" in shown  # the title, not scrolled off
        assert "Then ctrl+o." in shown and DEMO_TASK in shown and "idle" in rows[-2]


async def test_a_notice_sits_above_the_status_bar_and_replaces_the_one_before(stub: Stub, project: Path) -> None:
    app = plain_app(stub, project)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await idle(pilot)
        for _ in range(3):
            await pilot.press("shift+tab")
        await until(lambda: bool(app.screen.query(Toast)), pause=pilot.pause)
        await pilot.pause()
        toasts = list(app.screen.query(Toast))
        status = app.query_one("#status", Static).region
        assert len(toasts) == 1 and "permissions: read-only" in str(toasts[0].render())  # the third, alone
        assert toasts[0].region.bottom <= app.query_one("#prompt").region.y <= status.y  # above the input and the bar


async def test_the_palette_shows_a_commands_optional_argument_without_a_stray_colon(stub: Stub, project: Path) -> None:
    app = plain_app(stub, project)
    async with app.run_test(size=(100, 30)):
        shown = {c.title: Content.from_markup(c.help).plain for c in app.get_system_commands(app.screen)}
    assert shown["/handoff"].startswith("[anyway] write a field note")
    assert shown["/export"].startswith("[--md] [FILE] this session")
    assert not any(text.startswith(":") or " : " in text for text in shown.values())


def test_the_readme_installs_what_running_needs_and_says_how_to_put_rhapsody_on_path() -> None:
    readme = README.read_text()
    run = next(line.strip() for line in readme.splitlines() if line.strip().endswith("rhapsody --demo"))
    assert "pip install -e ." in run and "[test]" not in run
    assert "PATH" in readme.split("Run the tests:")[0] and "pipx install" in readme
    tests = re.search(r"Run the tests:\n\n\s+(.+)\n", readme)
    assert tests is not None and "'.[test]'" in tests.group(1)
    assert tests.group(1).strip() in CI.read_text()  # CI runs the README's test command exactly
