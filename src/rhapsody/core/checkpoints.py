"""Checkpoints as history records, and the conversation rewind.

A `checkpoint` record names a commit of the shadow repository (taken by a `Checkpointer`,
tools/shadow.py) and ties it to where it was taken: `at` is `turn` (before the human's
message, whose index in the conversation is `message`), `tool` (before a call that may
write, `tool_use_id`), `end` (the end of a turn) or `rewind` (before files were restored,
so the restore can itself be undone). A checkpoint that fails is a `checkpoint_failed`
record and the work goes on.

A conversation rewind is a `rewind` record: the conversation's view continues from message
`to` (core/context.py folds it); nothing is deleted.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rhapsody.core.errors import RhapsodyError, StorageError

if TYPE_CHECKING:
    from rhapsody.core.session import Session

HARNESS_PREFIX = "[rhapsody]"
"""How a message the harness sends in the human's place begins (prompts/handoff.md, continue.md)."""


class Checkpointer(Protocol):
    """Records the working tree; raises a RhapsodyError (one line) when it cannot."""

    def take(self, label: str) -> tuple[str, list[tuple[str, int, str, int]]]:
        """The commit of the tree now, and what was left out (path, size, why, modification time in ns)."""
        ...


async def checkpoint(session: Session, checkpointer: Checkpointer | None, at: str, **tied: Any) -> None:
    """Take a checkpoint off the event loop and record it (or record why it failed)."""
    if checkpointer is not None:
        await asyncio.to_thread(take, session, checkpointer, at, **tied)


def end_checkpoint(session: Session, checkpointer: Checkpointer | None) -> None:
    """The tree as a turn left it, also a cancelled one (a sync call cannot be cancelled). A history that cannot
    be written (a full disk) must not hide the error that ended the turn: the next append says it."""
    if checkpointer is not None:
        with contextlib.suppress(StorageError):
            take(session, checkpointer, "end")


def take(session: Session, checkpointer: Checkpointer, at: str, **tied: Any) -> dict[str, Any] | None:
    """Take a checkpoint and record it; None (a `checkpoint_failed` record) when it could not be taken."""
    start = time.perf_counter()
    try:
        commit, left_out = checkpointer.take(f"rhapsody {session.id} {at}")
    except RhapsodyError as exc:
        session.record("checkpoint_failed", at=at, reason=str(exc), **tied)
        return None
    ms = int((time.perf_counter() - start) * 1000)
    tied.setdefault("message", len(session.conversation.messages))
    return session.record("checkpoint", at=at, commit=commit, ms=ms, left_out=[list(x) for x in left_out], **tied)


@dataclass(frozen=True)
class Point:
    """A place the person can rewind to: a human message (and the checkpoint before it), or a restore."""

    number: int
    kind: str
    """`turn` or `rewind` (the files as they were before a restore)."""
    seq: int
    """The checkpoint record's seq."""
    commit: str
    message: int
    """The index of the message the checkpoint preceded (conversation rewinds go back to it)."""
    text: str
    ts: float


def points(records: list[dict[str, Any]], abandoned: set[int]) -> list[Point]:
    """Every checkpoint the person can pick, oldest first: before each human message still in the
    conversation (`abandoned`: message indexes a conversation rewind left behind), and before each restore
    of files that went ahead."""
    texts = _human_texts(records)
    undo = {r.get("before") for r in records if r["kind"] == "restore"}
    found: list[Point] = []
    for record in records:
        if record["kind"] != "checkpoint" or record.get("at") not in ("turn", "rewind"):
            continue
        if record["at"] == "rewind" and record["commit"] not in undo:
            continue  # taken for a restore that did not happen
        index = int(record.get("message", -1))
        if record["at"] == "turn" and (index in abandoned or index not in texts):
            continue
        text = texts.get(index, "") if record["at"] == "turn" else "(files as they were before this restore)"
        found.append(Point(len(found) + 1, record["at"], record["seq"], str(record["commit"]), index, text,
                           float(record.get("ts", 0))))
    return found


def _human_texts(records: list[dict[str, Any]]) -> dict[int, str]:
    """The text of each user message that holds the human's text, by its index in the conversation."""
    texts: dict[int, str] = {}
    index = 0
    for record in records:
        if record["kind"] != "message":
            continue
        content = record["content"]
        if record["role"] == "user":
            words = [content] if isinstance(content, str) else [
                b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
            words = [w for w in words if not w.startswith(HARNESS_PREFIX)]
            if any(w.strip() for w in words):
                texts[index] = "\n".join(w for w in words if w.strip())
        index += 1
    return texts


def rewind_conversation(session: Session, point: Point) -> dict[str, Any]:
    """Move the active context back to just before `point`'s message; the later branch stays on disk.

    The record carries the estimate of the request the rewound context makes (`est_tokens`), so the
    figures' context falls with it, as it does at a seam."""
    return session.record("rewind", to=point.message, checkpoint_seq=point.seq, text=point.text,
                          est_tokens=_context_after(session, point.message))


def _context_after(session: Session, to: int) -> int:
    """The estimated tokens of the request the context would make once rewound to message `to`."""
    import copy

    from rhapsody.core.context import measure_messages
    from rhapsody.core.records import Rewind

    probe = copy.copy(session.conversation)  # the containers a rewind changes are copied, the messages shared
    probe.abandoned, probe.seams = set(probe.abandoned), list(probe.seams)
    probe.apply(Rewind(kind="rewind", to=to))
    return measure_messages(session.spec, probe.active())[1]
