"""A rhapsody session driven to one handoff state, then held there until killed.

`hold(project, state, conn)` runs in a child process (tests/core/session/test_handoff_states.py starts
it with tests/killed_child.py, forked from the run's worker server): it runs the loop against its own
loopback server, stops consuming events as soon as the session's handoff reaches `state`,
sends the history path and the phase it holds, and blocks on `conn` until the test kills
it with SIGKILL (or the test process is gone and the pipe closes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anthropic

from rhapsody.providers.anthropic import AnthropicModel
from rhapsody.config.settings import Settings
from rhapsody.core.events import Event
from rhapsody.core.session.handoff import undo_seam
from rhapsody.core.agent.loop import Agent
from rhapsody.loopback.script import ScriptedResponder, say
from rhapsody.loopback.server import LoopbackServer
from rhapsody.wiring import build

from tests.core.session.test_handoff_e2e import handoff_turn
from tests.killed_child import Line

SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "wanted": [],
    "asked": [],
    "reminded": [say("I would rather finish first.")],
    "noted": [handoff_turn()],
    "committed": [handoff_turn(), say("Note written.")],
    "failed": [say("Not now."), say("Still not now.")],
    "undone": [handoff_turn(), say("Note written.")],
}


async def reach(agent: Agent, state: str) -> AsyncGenerator[Event, None] | None:
    """Request a handoff and drive the turn until the handoff is in `state` (or the turn ends); the turn's
    stream, left open when it stopped there: closing it would end the turn as Esc does, and a handoff request
    with it."""
    agent.request_handoff()
    target = "committed" if state == "undone" else state
    stream = None
    if agent.session.handoff.phase != target:
        stream = agent.run()
        async for _ in stream:
            if agent.session.handoff.phase == target:
                break
    if state == "undone":
        undo_seam(agent.session)
    return stream


async def drive(project: Path, state: str, conn: Line) -> None:
    """Drive a new session of `project` to `state`, send its history path and the phase it holds, then block
    (the turn's stream still open) until killed."""
    server = LoopbackServer(ScriptedResponder(SCRIPTS[state])).start()
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="sk-test-key", max_retries=0, timeout=5.0)
    wiring = build(project, Settings(permission_mode="yolo"), AnthropicModel(client, retries=0), "claude-sonnet-5-5")
    _open = await reach(wiring.agent, state)  # referenced until the child is killed, so never closed
    conn.send((str(wiring.session.path), wiring.session.handoff.phase.value))
    try:
        conn.recv()
    except EOFError:
        pass


def hold(project: Path, state: str, conn: Line) -> None:
    """The child process: reach `state`, say so, then block until killed."""
    asyncio.run(drive(project, state, conn))
