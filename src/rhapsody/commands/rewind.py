"""`/rewind` as a slash command (plain mode, ACP, and the app with arguments): list the points, or rewind to
one by submitting `ops.Rewind` to the agent.

The engine is rewind/rewind.py, the agent's rewinder rewind/rewinder.py; the app's own list is
frontends/app/rewind.py.
"""

from __future__ import annotations

from rhapsody.commands.outcome import Outcome
from rhapsody.core.agent import ops
from rhapsody.core.agent.inbox import CHECKPOINTS_OFF
from rhapsody.core.agent.loop import Agent
from rhapsody.core.errors import RhapsodyError
from rhapsody.rewind.rewind import WHATS, RewindPoint, What
from rhapsody.rewind.rewinder import CheckpointRewinder

BUSY = "wait for the turn to end before rewinding"
USAGE = "/rewind N [files|conversation|both] [force] goes back to before message N"


def points(agent: Agent) -> list[RewindPoint] | None:
    """The points the session can go back to; None when checkpoints are off (git runs: off the event loop)."""
    rewinder = agent.rewinder
    return rewinder.points(agent.session) if isinstance(rewinder, CheckpointRewinder) else None


def rewind_command(agent: Agent, arg: str) -> Outcome:
    """`/rewind` with no N lists the points; N [what] [force] submits the rewind."""
    if agent.working:
        return Outcome(BUSY, error=True)
    try:
        listed = points(agent)
    except RhapsodyError as exc:
        return Outcome(str(exc), error=True)
    if listed is None:
        return Outcome(CHECKPOINTS_OFF, error=True)
    words = arg.split()
    if not words:
        return Outcome("\n".join([t.line() for t in listed] or ["nothing to rewind to yet"]) + "\n" + USAGE)
    what: What = next((w for w in WHATS if w in words[1:]), "both")
    if not words[0].isdigit() or not 1 <= int(words[0]) <= len(listed) or set(words[1:]) - {*WHATS, "force"}:
        return Outcome(f"usage: /rewind N [files|conversation|both] [force], N from 1 to {len(listed)}", error=True)
    done = agent.submit(ops.Rewind(point=int(words[0]), what=what, force="force" in words[1:]))
    more = f"; /rewind {words[0]} {what} force overwrites them" if done.outside else ""
    return Outcome(done.text + more, error=not done.ok, reload=done.reload, in_history=done.ok, refill=done.refill)
