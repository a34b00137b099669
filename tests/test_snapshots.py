"""Layout snapshots of the app's main states (pytest-textual-snapshot; `--snapshot-update` to refresh).

Every varying part is pinned: the project path has a fixed length (it lives in tmp_path,
padded, because the field note names it and the seam's byte counts include the note), the
session id, system prompt and tool list are fixed, the toolbox's clock is frozen so every
duration is 0.0 s, dates and commit ids have a fixed width, and the git status is read
before the shot; the loopback server plays the same turns every run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import git

from rhapsody.config import Settings
from rhapsody.core.context import RequestSpec
from rhapsody.core.history import HistoryWriter, history_dir
from rhapsody.core.loop import Agent
from rhapsody.core.session import Session
from rhapsody.loopback.script import call, say
from rhapsody.core.tools import Toolbox
from rhapsody.tools import default_tools
from rhapsody.tui.app import RhapsodyApp
from rhapsody.wiring import policy

from .conftest import SANDBOX, Stub, until
from .test_handoff_e2e import handoff_turn

PATH_LENGTH = 200
"""Characters of the project path in every shot (tmp_path is shorter, and varies)."""
SLOW = "I will run the slow test suite now, because the fix must hold; I expect three passes."


def fixed_root(tmp_path: Path) -> Path:
    """A project folder in tmp_path whose path is always PATH_LENGTH characters long."""
    pad = PATH_LENGTH - len(str(tmp_path)) - 1
    assert 0 < pad < 250, f"tmp_path {tmp_path} does not fit in {PATH_LENGTH} characters"
    root = tmp_path / ("proj" + "-" * (pad - 4))
    root.mkdir()
    return root


def fixed_app(stub: Stub, tmp_path: Path) -> RhapsodyApp:
    root = fixed_root(tmp_path)
    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@localhost")
    (root / "app.py").write_text("def add(a, b):\n    return a + b\n")
    repo.index.add(["app.py"])
    repo.index.commit("initial")
    toolbox = Toolbox(default_tools(SANDBOX), "yolo", clock=lambda: 0.0)
    spec = RequestSpec(model="claude-sonnet-5-5", system="You are a test agent.", tools=toolbox.specs())
    session = Session(root, HistoryWriter(history_dir(root) / "snapshot.jsonl"), spec, "snapshot")
    session.record("session", session="snapshot", cwd=str(root), version="0", model=spec.model,
                   system=spec.system, tools=spec.tools, max_tokens=spec.max_tokens, parallel_tools=False, thinking=None)
    agent = Agent(session, stub.model(), toolbox, policy(Settings()))
    return RhapsodyApp(agent, Settings())


async def settle(pilot: Any) -> None:
    from rhapsody.tui.widgets import PromptInput

    pilot.app.query_one(PromptInput).cursor_blink = False  # a blinking cursor differs between shots
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def test_idle(snap_compare: Any, stub: Stub, tmp_path: Path) -> None:
    assert snap_compare(fixed_app(stub, tmp_path), terminal_size=(100, 30), run_before=settle)


def test_pending_hint_while_a_tool_runs(snap_compare: Any, stub: Stub, tmp_path: Path) -> None:
    stub.script(call(SLOW, "bash", command="sleep 30"), say("never reached"))
    app = fixed_app(stub, tmp_path)

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        await until(lambda: bool(app._git), pause=pilot.pause)  # on_mount's git read is done
        app.start_turn("run the tests")
        await until(lambda: bool(app.agent.in_flight), pause=pilot.pause)
        await app.add_hint("only the parser tests, please", "steer")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)


def test_after_a_seam(snap_compare: Any, stub: Stub, tmp_path: Path) -> None:
    stub.script(call(SLOW, "read_file", path="app.py"), say("add is correct."), handoff_turn(), say("Noted."))
    app = fixed_app(stub, tmp_path)

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        app.start_turn("check add")
        await settle(pilot)
        await app.command("/handoff")
        await settle(pilot)

    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)
