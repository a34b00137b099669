"""Checkpoints as history records, and the conversation rewind.

A `checkpoint` record names a commit of the shadow repository (taken by a `Checkpointer`,
rewind/shadow.py) and ties it to where it was taken: `at` is `turn` (before the human's
message, whose index in the conversation is `message`), `tool` (before a call that may
write, `tool_use_id`), `end` (the end of a turn) or `rewind` (before files were restored,
so the restore can itself be undone). A checkpoint that fails is a `checkpoint_failed`
record and the work goes on.

A conversation rewind is a `rewind` record: the conversation's view continues from message
`to` (core/session/context.py folds it); nothing is deleted.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncio
import concurrent.futures
import contextlib
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rhapsody.core.errors import RhapsodyError, StorageError
from rhapsody.core.session import records as rec
from rhapsody.core.session.messages import TextBlock

if TYPE_CHECKING:
    from rhapsody.core.session.session import Session

HARNESS_PREFIX = "[rhapsody]"
"""How a message the harness sends in the human's place begins (prompts/handoff.md, continue.md)."""


class Checkpointer(Protocol):
    """Records the working tree; raises a RhapsodyError (one line) when it cannot."""

    def take(self, label: str, thorough: bool = True) -> tuple[str, list[tuple[str, int, str, int]]]:
        """The commit of the tree now, and what was left out (path, size, why, modification time in ns); not
        `thorough`, it may look only where it knows the tree changed since its last checkpoint."""
        ...


FIRST_WAIT = 0.25
"""Seconds a turn's checkpoint is waited for before the turn goes on without it (the first checkpoint of a
large tree hashes every file)."""


@dataclass
class _Queued:
    """One checkpoint handed to the session's checkpoint thread, recorded in order once it is done."""

    future: Future[tuple[str, list[tuple[str, int, str, int]], int]]
    at: str
    tied: dict[str, Any]


@dataclass
class _Queue:
    worker: ThreadPoolExecutor
    waiting: list[_Queued]


_QUEUES: dict[str, _Queue] = {}
"""Each session's checkpoints in the order they were asked for; one thread takes them one after another."""


async def checkpoint(session: Session, checkpointer: Checkpointer | None, at: str, **tied: Any) -> None:
    """Take a checkpoint off the event loop and record it (or record why it failed).

    Checkpoints are taken in the order they are asked for. A `turn` checkpoint still running after
    FIRST_WAIT (the first of a large tree) does not hold the turn up: it is recorded, with the message
    it precedes, as soon as it is done and the loop next touches checkpoints. Every other checkpoint is
    waited for, with all those before it: a call that may write must not start while the tree it changes
    is being hashed, or the rewind point would hold half of its write."""
    if checkpointer is None:
        return
    queued = _submit(session, checkpointer, at, tied)
    if at == "turn":
        await asyncio.to_thread(concurrent.futures.wait, [queued.future], FIRST_WAIT)
    else:
        await asyncio.to_thread(concurrent.futures.wait, [q.future for q in _queue(session).waiting])
    _flush(session)


def end_checkpoint(session: Session, checkpointer: Checkpointer | None) -> None:
    """The tree as a turn left it, also a cancelled one (a sync call cannot be cancelled). A history that cannot
    be written (a full disk) must not hide the error that ended the turn: the next append says it. Behind a
    checkpoint still running it is queued, not waited for (the turn made no write meanwhile: writes wait)."""
    if checkpointer is None:
        return
    behind = bool(_queue(session).waiting)
    queued = _submit(session, checkpointer, "end", {})
    if not behind:
        concurrent.futures.wait([queued.future])
    with contextlib.suppress(StorageError):
        _flush(session)


def settle(session: Session) -> None:
    """Wait for every queued checkpoint of the session and record it (before a process that took them exits)."""
    concurrent.futures.wait([q.future for q in _queue(session).waiting])
    with contextlib.suppress(StorageError):
        _flush(session)


def _queue(session: Session) -> _Queue:
    if session.id not in _QUEUES:
        _QUEUES[session.id] = _Queue(ThreadPoolExecutor(1, thread_name_prefix="checkpoint"), [])
    return _QUEUES[session.id]


def _submit(session: Session, checkpointer: Checkpointer, at: str, tied: dict[str, Any]) -> _Queued:
    tied = {"message": len(session.conversation.messages), **tied}  # the message it precedes: now, not when done
    queue = _queue(session)
    label = f"rhapsody {session.id} {at}"
    queued = _Queued(queue.worker.submit(_timed, checkpointer, label, at != "turn"), at, tied)
    queue.waiting.append(queued)
    return queued


def _timed(checkpointer: Checkpointer, label: str, between: bool) -> tuple[str, list[tuple[str, int, str, int]], int]:
    """Take one; `between` a turn's calls (`tool`, `end`) it need not be thorough: each turn's own is."""
    start = time.perf_counter()
    commit, left_out = checkpointer.take(label, thorough=not between)
    return commit, left_out, int((time.perf_counter() - start) * 1000)


def _flush(session: Session) -> None:
    """Record the queued checkpoints that are done, oldest first, up to the first still running."""
    queue = _queue(session)
    while queue.waiting and queue.waiting[0].future.done():
        queued = queue.waiting.pop(0)
        try:
            commit, left_out, ms = queued.future.result()
        except RhapsodyError as exc:
            session.append(rec.CheckpointFailed(at=queued.at, reason=str(exc), **queued.tied))
            continue
        session.append(rec.Checkpoint(at=queued.at, commit=commit, ms=ms, left_out=[list(x) for x in left_out],
                       **queued.tied))
    if not queue.waiting:  # the thread goes with the last one; the next checkpoint starts another
        queue.worker.shutdown(wait=False)
        del _QUEUES[session.id]


def take(session: Session, checkpointer: Checkpointer, at: str, **tied: Any) -> rec.Checkpoint | None:
    """Take a checkpoint and record it; None (a `checkpoint_failed` record) when it could not be taken."""
    start = time.perf_counter()
    try:
        commit, left_out = checkpointer.take(f"rhapsody {session.id} {at}")
    except RhapsodyError as exc:
        session.append(rec.CheckpointFailed(at=at, reason=str(exc), **tied))
        return None
    ms = int((time.perf_counter() - start) * 1000)
    tied.setdefault("message", len(session.conversation.messages))
    return session.append(rec.Checkpoint(at=at, commit=commit, ms=ms, left_out=[list(x) for x in left_out], **tied))


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


def points(records: Sequence[rec.Record], abandoned: set[int]) -> list[Point]:
    """Every checkpoint the person can pick, oldest first: before each human message still in the
    conversation (`abandoned`: message indexes a conversation rewind left behind), and before each restore
    of files that went ahead."""
    texts = _human_texts(records)
    undo = {r.before for r in rec.of(records, rec.Restore)}
    found: list[Point] = []
    for record in rec.of(records, rec.Checkpoint):
        if record.at not in ("turn", "rewind"):
            continue
        if record.at == "rewind" and record.commit not in undo:
            continue  # taken for a restore that did not happen
        index = -1 if record.message is None else record.message
        if record.at == "turn" and (index in abandoned or index not in texts):
            continue
        text = texts.get(index, "") if record.at == "turn" else "(files as they were before this restore)"
        found.append(Point(len(found) + 1, record.at, record.seq, record.commit, index, text, record.ts))
    return found


def _human_texts(records: Sequence[rec.Record]) -> dict[int, str]:
    """The text of each user message that holds the human's text, by its index in the conversation."""
    texts: dict[int, str] = {}
    for index, record in enumerate(rec.of(records, rec.MessageAdded)):
        if record.role == "user":
            words = [b.text for b in record.content if isinstance(b, TextBlock)]
            words = [w for w in words if not w.startswith(HARNESS_PREFIX)]
            if any(w.strip() for w in words):
                texts[index] = "\n".join(w for w in words if w.strip())
    return texts


def rewind_conversation(session: Session, point: Point) -> rec.ConversationRewind:
    """Move the active context back to just before `point`'s message; the later branch stays on disk.

    The record carries the estimate of the request the rewound context makes (`est_tokens`), so the
    figures' context falls with it, as it does at a seam."""
    return session.append(rec.ConversationRewind(to=point.message, checkpoint_seq=point.seq, text=point.text,
                          est_tokens=_context_after(session, point.message)))


def _context_after(session: Session, to: int) -> int:
    """The estimated tokens of the request the context would make once rewound to message `to`."""
    import copy

    from rhapsody.core.session.context import measure_messages
    from rhapsody.core.session.records import ConversationRewind

    probe = copy.copy(session.conversation)  # the containers a rewind changes are copied, the messages shared
    probe.abandoned, probe.seams = set(probe.abandoned), list(probe.seams)
    probe.apply(ConversationRewind(kind="rewind", to=to))
    return measure_messages(session.spec, probe.active())[1]
