"""`/rewind` as a slash command (plain mode, and the app with arguments): list the points, or rewind to one.

The engine is rewind/rewind.py; the app's own list is frontends/app/rewind.py.
"""

from __future__ import annotations

from rhapsody.commands.outcome import Outcome
from rhapsody.core.errors import RhapsodyError
from rhapsody.core.agent.loop import Agent
from rhapsody.rewind.rewind import WHATS, Rewound, Turn, What, rewind, turns
from rhapsody.rewind.shadow import Shadow

CHECKPOINTS_OFF = "checkpoints are off (checkpoints = false in the config): nothing to rewind to"
BUSY = "wait for the turn to end before rewinding"


def store_of(agent: Agent) -> Shadow | None:
    """The agent's checkpoint store, when checkpoints are on."""
    store = agent.toolbox.checkpointer
    return store if isinstance(store, Shadow) else None


def points(agent: Agent) -> list[Turn]:
    """The points the session can go back to (git runs: call it off the event loop)."""
    store = store_of(agent)
    return [] if store is None else turns(agent.session, store)


def rewind_to(agent: Agent, turn: Turn, what: What, overwrite: bool) -> Rewound:
    """Go back to `turn` (files changed outside rhapsody only with `overwrite`)."""
    store = store_of(agent)
    if store is None:
        return Rewound(CHECKPOINTS_OFF, error=True)
    return rewind(agent.session, store, turn, what, overwrite)


def rewind_command(agent: Agent, arg: str) -> Outcome:
    """`/rewind` in plain mode (and with arguments in the app): no N lists the points; N [what] [force] rewinds."""
    store = agent.toolbox.checkpointer
    if not isinstance(store, Shadow):
        return Outcome(CHECKPOINTS_OFF, error=True)
    if agent.busy:
        return Outcome(BUSY, error=True)
    try:
        listed = turns(agent.session, store)
    except RhapsodyError as exc:
        return Outcome(str(exc), error=True)
    words = arg.split()
    if not words:
        lines = [t.line() for t in listed] or ["nothing to rewind to yet"]
        return Outcome("\n".join(lines + ["/rewind N [files|conversation|both] [force] goes back to before message N"]))
    what: What = next((w for w in WHATS if w in words[1:]), "both")
    if not words[0].isdigit() or not 1 <= int(words[0]) <= len(listed) or set(words[1:]) - {*WHATS, "force"}:
        return Outcome(f"usage: /rewind N [files|conversation|both] [force], N from 1 to {len(listed)}", error=True)
    done = rewind(agent.session, store, listed[int(words[0]) - 1], what, "force" in words[1:])
    more = f"; /rewind {words[0]} {what} force overwrites them" if done.outside else ""
    return Outcome(done.text + more, error=done.error, reload=not done.error, in_history=not done.error,
                   refill=done.prompt)
