"""Layout snapshots of the app's states at 80x24 and 160x48 (pytest-textual-snapshot; `--snapshot-update`).

Every varying part is pinned: the project lives in tmp_path under a name padded to a path
of one fixed length (so byte counts repeat) and shows as `~/proj---…` (HOME is tmp_path),
the session id, system prompt and tool list are fixed, the git status is read before the
shot, the cursor does not blink and the focus is set, tool durations come from a fixed
clock and the spinner's from a frozen one, and the loopback server plays the same turns
every run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import git
import pytest

from rhapsody.config.settings import Settings
from rhapsody.core.toolbox.approval import HumanApprover
from rhapsody.core.session.context import RequestSpec
from rhapsody.core.session.history import HistoryWriter, history_dir
from rhapsody.core.agent.loop import Agent
from rhapsody.core.access.permissions import Rules
from rhapsody.core.session.session import Session
from rhapsody.loopback.script import call, say
from rhapsody.core.toolbox.orchestrator import Toolbox
from rhapsody.tools import default_tools
from rhapsody.tools.shell import parse
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.status import Liveness
from rhapsody.frontends.app.widgets import Foldable, PromptInput
from rhapsody.wiring import policy
from rhapsody.core.session import records as rec

from tests.conftest import GATE, SANDBOX, Stub, no_grace, type_text, until
from tests.frontends.test_app_keys import asking, panel
from tests.core.session.test_handoff_e2e import handoff_turn

SLOW = "I will run the slow test suite now, because the fix must hold; I expect three passes."
SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


PATH_LENGTH = 200
"""Characters of the project path in every shot (tmp_path is shorter, and varies)."""


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git project in tmp_path whose path is always PATH_LENGTH characters long."""
    # The padding folder is HOME, so the screen shows `~/proj` wherever tmp_path is (a pytest
    # worker's tmp_path is longer), while the full path, which byte counts include, keeps its length.
    pad = PATH_LENGTH - len(str(tmp_path)) - len("/proj") - 1
    assert 0 < pad < 250, f"tmp_path {tmp_path} does not fit in {PATH_LENGTH} characters"
    home = tmp_path / ("h" + "-" * (pad - 1))
    monkeypatch.setenv("HOME", str(home))
    project = home / "proj"
    project.mkdir(parents=True)
    repo = git.Repo.init(project, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@localhost")
    (project / "app.py").write_text("def add(a, b):\n    return a - b\n")
    repo.index.add(["app.py"])
    repo.index.commit("initial")
    return project


def fixed_app(stub: Stub, root: Path, mode: str = "yolo") -> RhapsodyApp:
    approver = HumanApprover(grace=no_grace)
    toolbox = Toolbox(default_tools(SANDBOX), mode, Rules(parse=parse), clock=lambda: 0.0, approver=approver)
    spec = RequestSpec(model="claude-sonnet-5-5", system="You are a test agent.", tools=toolbox.specs())
    session = Session(root, HistoryWriter(history_dir(root) / "snapshot.jsonl"), spec, "snapshot")
    session.append(rec.SessionStarted(session="snapshot", cwd=str(root), version="0", model=spec.model,
                   system=spec.system, tools=spec.tools, max_tokens=spec.max_tokens, parallel_tools=False, thinking=None))
    agent = Agent(session, stub.model(), toolbox, policy(Settings()))
    return RhapsodyApp(agent, Settings(sandbox="off"), approver)  # the welcome names the sandbox: pin it


class FrozenClock(Liveness):
    """The spinner at a fixed frame and time."""

    def text(self, now: float | None = None) -> str:
        return "⠹ bash 2.0 s" if self.active else ""


async def settle(pilot: Any) -> None:
    app = pilot.app
    await pilot.pause()
    if app.screen is app.screen_stack[0] and not isinstance(app.focused, Foldable):
        prompt = app.query_one(PromptInput)
        prompt.blur()  # the focus is part of the picture, and a focused prompt's cursor races the shot: pin it
        await until(lambda: not prompt.has_focus, pause=pilot.pause)
    await pilot.pause()
    for area in app.screen.query("PromptInput, TextArea, Input"):
        area.cursor_blink = False
        area._cursor_visible = area.has_focus  # shown steadily when focused, whatever the blink phase was
        area.refresh()
    await pilot.pause()
    for area in app.screen.query("PromptInput, TextArea, Input"):
        area._cursor_visible = area.has_focus  # again, after any focus event that was still queued
    app.refresh_status()
    await pilot.pause()


async def idle(pilot: Any) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()



async def git_read(pilot: Any) -> None:
    pilot.app.refresh_git()
    await until(lambda: pilot.app.status_bar.git, pause=pilot.pause)


@pytest.mark.parametrize("size", SIZES)
def test_welcome(snap_compare: Any, stub: Stub, root: Path, size: tuple[int, int]) -> None:
    async def run_before(pilot: Any) -> None:
        await git_read(pilot)
        await settle(pilot)

    assert snap_compare(fixed_app(stub, root), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_approval_with_a_diff(snap_compare: Any, stub: Stub, root: Path, size: tuple[int, int]) -> None:
    stub.script(call(SLOW, "edit_file", path="app.py", old="a - b", new="a + b"), say("never"))
    app = fixed_app(stub, root, "ask")

    async def run_before(pilot: Any) -> None:
        await git_read(pilot)
        app.start_turn("fix add")
        await until(lambda: asking(app), pause=pilot.pause)
        panel(app).query_one("#reason").cursor_blink = False
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_a_denial_being_typed(snap_compare: Any, stub: Stub, root: Path, size: tuple[int, int]) -> None:
    stub.script(call(SLOW, "bash", command="wc -c app.py\r\x1b[2K"), say("never"))
    app = fixed_app(stub, root, "ask")

    async def run_before(pilot: Any) -> None:
        await git_read(pilot)
        app.start_turn("how big?")
        await until(lambda: asking(app), pause=pilot.pause)
        panel(app).query_one("#reason").cursor_blink = False
        await type_text(pilot, "use stat instead please")
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def long_output_app(stub: Stub, root: Path) -> RhapsodyApp:
    (root / "big.txt").write_text("".join(f"row {i}: the quick brown fox jumps\n" for i in range(300)))
    stub.script(call(SLOW, "bash", command="cat big.txt"), say("That is the whole file."))
    return fixed_app(stub, root)


async def unfold_long(pilot: Any) -> Foldable:
    app = pilot.app
    await git_read(pilot)
    app.start_turn("show big.txt")
    await idle(pilot)
    await settle(pilot)
    fold = [w for w in app.transcript.query(Foldable) if "cat big.txt" in w.title][0]
    fold.focus()
    await pilot.press("enter")
    await pilot.pause()
    fold.scroll_visible(top=True, animate=False)
    await pilot.pause()
    return fold


@pytest.mark.parametrize("size", SIZES)
def test_an_unfolded_long_output(snap_compare: Any, stub: Stub, root: Path, size: tuple[int, int]) -> None:
    assert snap_compare(long_output_app(stub, root), terminal_size=size, run_before=unfold_long)


@pytest.mark.parametrize("size", SIZES)
def test_the_full_output_view(snap_compare: Any, stub: Stub, root: Path, size: tuple[int, int]) -> None:
    async def run_before(pilot: Any) -> None:
        await unfold_long(pilot)
        await pilot.press("enter")
        await until(lambda: pilot.app.screen.query("#search"), pause=pilot.pause)
        pilot.app.screen.query_one("#fulltext").cursor_blink = False
        pilot.app.screen.query_one("#search").cursor_blink = False
        await type_text(pilot, "row 250")
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(long_output_app(stub, root), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_mid_run_with_a_spinner_and_a_placed_hint(snap_compare: Any, stub: Stub, root: Path, size: tuple[int, int]) -> None:
    stub.script(call(SLOW, "bash", command=GATE), call(SLOW, "bash", command="sleep 30"), say("never"))
    app = fixed_app(stub, root)

    async def run_before(pilot: Any) -> None:
        app.status_bar.live = FrozenClock()
        await git_read(pilot)
        app.start_turn("run the tests")
        await until(lambda: app.feed.calls, pause=pilot.pause)
        await app.controller.line("only the parser tests, please")  # while the first command waits for `go`
        (root / "go").touch()
        await until(lambda: len([e for e in app.transcript.entries if e.kind == "tool"]) == 2, pause=pilot.pause)
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
def test_after_a_seam(snap_compare: Any, stub: Stub, root: Path, size: tuple[int, int]) -> None:
    stub.script(call(SLOW, "read_file", path="app.py"), say("add subtracts."), handoff_turn(), say("Noted."))
    app = fixed_app(stub, root)

    async def run_before(pilot: Any) -> None:
        await git_read(pilot)
        app.start_turn("check add")
        await idle(pilot)
        await app.surface.command("/handoff anyway")
        await idle(pilot)
        await settle(pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
