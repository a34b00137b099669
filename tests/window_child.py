"""A session driven past a loopback window, held at one step of the safety net until killed.

`hold(project, step, conn)` runs in a child process (tests/core/agent/test_window_states.py starts it with
tests/killed_child.py, forked from the run's worker server): it drives the loop against its own window-mode
loopback server, stops pulling events once the history reaches `step`, sends the history path,
and blocks on `conn` until the test kills it with SIGKILL. The loop is never closed, so nothing
a clean stop would write (an `interrupted` record) reaches the history: it is as a kill leaves it.
"""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import asyncio
from collections.abc import Callable
from pathlib import Path

import anthropic

from rhapsody.providers.anthropic import AnthropicModel
from rhapsody.config.settings import Settings
from rhapsody.core.session.handoff_state import Phase
from rhapsody.core.session.session import Session
from rhapsody.loopback.script import ScriptedResponder, say
from rhapsody.loopback.server import LoopbackServer
from rhapsody.sandbox.bwrap import bwrap_path
from rhapsody.wiring import build

from tests.core.test_window import WINDOW, big, long_session
from tests.core.session.test_handoff_e2e import handoff_turn
from tests.killed_child import Line

STRIP_WINDOW = 9_000
"""Two of big()'s 4,000-token results and the system prompt and tools do not fit; the latest alone, with
the request for the note and its room, does not either, so the net strips first."""


def _pruned(s: Session) -> bool:
    return any(r["kind"] == "prune" for r in dumped(s.records))


STEPS: dict[str, Callable[[Session], bool]] = {
    # room for the note first (no thinking): the oldest calls out, the note asked over what is left
    "room_asked": lambda s: s.handoff.phase == Phase.ASKED and _pruned(s),
    "room_noted": lambda s: s.handoff.phase == Phase.NOTED and _pruned(s),
    "room_committed": lambda s: _pruned(s) and any(r["kind"] == "seam" for r in dumped(s.records)),
    # a strip first, the note asked after it: a window so small that no cut between rounds leaves room for the
    # note beside the latest round (STRIP_WINDOW), with thinking on
    "asked": lambda s: s.handoff.phase == Phase.ASKED and bool(s.handoff.after_strip),
    "noted": lambda s: s.handoff.phase == Phase.NOTED and bool(s.handoff.after_strip),
    "attached": lambda s: any(r["kind"] == "seam_note" for r in dumped(s.records)),
}


async def drive(project: Path, step: str, conn: Line) -> None:
    """Drive a new session of `project` past the window until it reaches `step`, say so, block."""
    thinking = not step.startswith("room_")
    window = STRIP_WINDOW if thinking else WINDOW
    script = long_session() if not thinking else [big(1, True), big(2, True), handoff_turn(True), say("Note written."),
                                                  say("All done.")]
    server = LoopbackServer(ScriptedResponder(script), window=window).start()
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="sk-test-key", max_retries=0, timeout=5.0)
    settings = Settings(permission_mode="yolo", sandbox="workspace-write" if bwrap_path() else "off",
                        handoff_at_share="off", thinking=thinking)
    wiring = build(project, settings, AnthropicModel(client, retries=0), "claude-sonnet-5-5")
    events = wiring.agent.run("fill the window")
    reached = STEPS[step]
    while not reached(wiring.session):
        await events.__anext__()
    conn.send(str(wiring.session.path))
    await asyncio.to_thread(_wait, conn)


def _wait(conn: Line) -> None:
    try:
        conn.recv()
    except EOFError:
        pass


def hold(project: Path, step: str, conn: Line) -> None:
    """The child process: reach `step`, say so, then block until killed."""
    asyncio.run(drive(project, step, conn))
