"""Layout snapshots of the app's main states (pytest-textual-snapshot; `--snapshot-update` to refresh).

Every varying part is pinned: a fixed project path, a fixed session id, a fixed system
prompt and tool list, and the git status read before the shot; the loopback server plays
the same turns every run.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import git

from rhapsody.config import Settings
from rhapsody.core.context import RequestSpec
from rhapsody.core.history import HistoryWriter, history_dir
from rhapsody.core.loop import Agent
from rhapsody.core.session import Session
from rhapsody.loopback.script import call, say
from rhapsody.tools import default_toolbox
from rhapsody.tui.app import RhapsodyApp
from rhapsody.wiring import policy

from .conftest import Stub
from .test_handoff_e2e import handoff_turn

ROOT = Path("/tmp/rhapsody-snapshots/proj")
SLOW = "I will run the slow test suite now, because the fix must hold; I expect three passes."


def fixed_app(stub: Stub) -> RhapsodyApp:
    shutil.rmtree(ROOT.parent, ignore_errors=True)
    ROOT.mkdir(parents=True)
    repo = git.Repo.init(ROOT, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@localhost")
    (ROOT / "app.py").write_text("def add(a, b):\n    return a + b\n")
    repo.index.add(["app.py"])
    repo.index.commit("initial")
    toolbox = default_toolbox("yolo")
    spec = RequestSpec(model="claude-sonnet-5-5", system="You are a test agent.", tools=toolbox.specs())
    session = Session(ROOT, HistoryWriter(history_dir(ROOT) / "snapshot.jsonl"), spec, "snapshot")
    session.record("session", session="snapshot", cwd=str(ROOT), version="0", model=spec.model,
                   system=spec.system, tools=spec.tools, max_tokens=spec.max_tokens, parallel_tools=False, thinking=None)
    agent = Agent(session, stub.model(), toolbox, policy(Settings()))
    return RhapsodyApp(agent, Settings())


async def settle(pilot: Any) -> None:
    from rhapsody.tui.widgets import PromptInput

    pilot.app.query_one(PromptInput).cursor_blink = False  # a blinking cursor differs between shots
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def test_idle(snap_compare: Any, stub: Stub) -> None:
    assert snap_compare(fixed_app(stub), terminal_size=(100, 30), run_before=settle)


def test_pending_hint_while_a_tool_runs(snap_compare: Any, stub: Stub) -> None:
    stub.script(call(SLOW, "bash", command="sleep 30"), say("never reached"))
    app = fixed_app(stub)

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        app.refresh_git()
        await pilot.pause(0.3)
        app.start_turn("run the tests")
        while not app.agent.in_flight:
            await pilot.pause(0.02)
        await app.add_hint("only the parser tests, please", "steer")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)


def test_after_a_seam(snap_compare: Any, stub: Stub) -> None:
    stub.script(call(SLOW, "read_file", path="app.py"), say("add is correct."), handoff_turn(), say("Noted."))
    app = fixed_app(stub)

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        app.start_turn("check add")
        await settle(pilot)
        await app.command("/handoff")
        await settle(pilot)

    assert snap_compare(app, terminal_size=(100, 30), run_before=run_before)
