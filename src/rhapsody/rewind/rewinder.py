"""The agent's rewinder: what an `ops.Rewind` does, over the checkpoint store (core/agent/inbox.py `Rewinding`).

The session bootstrap (wiring.py) hands one to the Agent when checkpoints are on, so `/rewind` in the app's
picker, in plain mode, from the Python API and over ACP all go back through `Agent.submit`. Files changed
outside rhapsody since the point are never overwritten unasked: the receipt refuses and names them
(`Receipt.outside`), and the front end asks the human and submits again with `force`.
"""

from __future__ import annotations

from rhapsody.core.agent import ops
from rhapsody.core.errors import RhapsodyError
from rhapsody.core.session.session import Session
from rhapsody.rewind.rewind import RewindPoint, rewind, turns
from rhapsody.rewind.shadow import Shadow


class CheckpointRewinder:
    """Goes back to before a message through the project's shadow repository, and lists the points."""

    def __init__(self, shadow: Shadow) -> None:
        self.shadow = shadow

    def points(self, session: Session) -> list[RewindPoint]:
        """The points `session` can go back to, numbered from 1 (git runs: call it off the event loop)."""
        return turns(session, self.shadow)

    def __call__(self, session: Session, point: int, what: ops.RewindWhat, force: bool) -> ops.Receipt:
        try:
            listed = self.points(session)
        except RhapsodyError as exc:
            return ops.Receipt(False, str(exc))
        if not 1 <= point <= len(listed):
            return ops.Receipt(False, f"no point {point} to rewind to: /rewind lists {len(listed)}")
        done = rewind(session, self.shadow, listed[point - 1], what, force)
        if done.error:
            return ops.Receipt(False, done.text, outside=done.outside)
        return ops.Receipt(text=done.text, reload=True, refill=done.prompt)
