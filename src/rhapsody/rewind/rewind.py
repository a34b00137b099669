"""Rewind: the points to go back to, and restoring files, conversation or both.

The engine behind `/rewind` (commands/rewind.py, frontends/app/rewind.py) and `rhapsody rewind`
(commands/rewind_cli.py); the session start finishes an interrupted restore and cleans old
checkpoints through it (wiring.py). A points list is folded from the
history (core/session/checkpoints.py) with each turn's changed files and +/- lines from the shadow
repository. Restoring files first takes a `rewind` checkpoint (so the restore can itself be
undone), works out which paths differ, refuses in one line where it cannot be exact, and
names the files that changed outside rhapsody since the point (changes between the end of
one turn and the start of the next, or since the last turn ended): those are overwritten
only when the person says so. A `restore` record marks the start and the end; a restore cut
short by a kill is finished the next time the session is opened.
"""

from __future__ import annotations

from collections.abc import Sequence

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rhapsody.core.session.checkpoints import Point, points, rewind_conversation, take
from rhapsody.core.errors import RhapsodyError
from rhapsody.core.session.history import STATE_DIR, read_history, sessions, write_private
from rhapsody.core.session.session import Session
from rhapsody.rewind import restore
from rhapsody.rewind.shadow import Change, Shadow, legacy
from rhapsody.core.session import records as rec

What = Literal["files", "conversation", "both"]
WHATS: tuple[What, ...] = ("files", "conversation", "both")


@dataclass(frozen=True)
class RewindPoint:
    """A point with what its turn changed: per file, lines added and removed."""

    point: Point
    files: list[tuple[str, int, int]] = field(default_factory=list)
    kept: bool = True
    """Whether the point's checkpoint is in the shadow (not cleaned away, not an older rhapsody's in the project)."""

    @property
    def added(self) -> int:
        """Lines added by the turn."""
        return sum(a for _, a, _ in self.files)

    @property
    def removed(self) -> int:
        """Lines removed by the turn."""
        return sum(r for _, _, r in self.files)

    def line(self) -> str:
        """The point as one line of a list."""
        gone = "" if self.kept else "  (files unavailable: checkpoint not kept)"
        if self.point.kind == "rewind":
            when = time.strftime("%H:%M", time.localtime(self.point.ts))
            return f"{self.point.number:>3}  ↶ the files as they were before the restore at {when} (undoes it){gone}"
        first = " ".join(self.point.text.split())
        first = first if len(first) <= 60 else first[:59] + "…"
        changed = f"{len(self.files)} file{'s' if len(self.files) != 1 else ''} +{self.added} -{self.removed}"
        return f"{self.point.number:>3}  {first}  " + (f"({changed})" if self.kept else gone.strip())

    def json(self) -> dict[str, Any]:
        """The point for `--json`."""
        return {"n": self.point.number, "kind": self.point.kind, "message": self.point.message, "text": self.point.text,
                "commit": self.point.commit, "ts": self.point.ts, "kept": self.kept, "added": self.added,
                "removed": self.removed,
                "files": [{"path": p, "added": a, "removed": r} for p, a, r in self.files]}


def turns(session: Session, shadow: Shadow) -> list[RewindPoint]:
    """Every point of the session with its turn's changes (empty when the checkpoints are gone)."""
    return turns_of(session.records, session.conversation.abandoned, shadow)


def turns_of(records: Sequence[rec.Record], abandoned: set[int], shadow: Shadow) -> list[RewindPoint]:
    """The same from a session's records (`abandoned`: messages a conversation rewind left behind)."""
    found = points(records, abandoned)
    marks = _marks(records)
    kept = shadow.existing([commit for _, _, commit in marks])
    out = []
    for point in found:
        after = next((commit for seq, at, commit in marks if seq > point.seq and at in ("end", "turn", "rewind")), "")
        counted = point.kind == "turn" and {point.commit, after} <= kept
        out.append(RewindPoint(point, shadow.line_counts(point.commit, after) if counted else [], point.commit in kept))
    return out


def _marks(records: Sequence[rec.Record]) -> list[tuple[int, str, str]]:
    """(seq, at, commit) of every checkpoint, and of every finished restore (`restored`: the tree is its target)."""
    out = []
    for r in rec.of(records, rec.Checkpoint, rec.Restore):
        if isinstance(r, rec.Checkpoint):
            out.append((r.seq, r.at, r.commit))
        elif r.state == "done":
            out.append((r.seq, "restored", r.target))
    return out


@dataclass(frozen=True)
class FilesPlan:
    """A files restore worked out, not yet done."""

    target: str
    now: str
    """The `rewind` checkpoint just taken (the restore's undo point)."""
    changes: list[Change]
    outside: list[str]
    """Paths changed outside rhapsody since the point that the restore would overwrite."""
    refused: str = ""


def plan_files(session: Session, shadow: Shadow, point: Point) -> FilesPlan:
    """Take the undo checkpoint, then work out what restoring `point` changes, and whether it can."""
    if not shadow.has(point.commit):
        return FilesPlan(point.commit, "", [], [], f"checkpoint {point.number} is not kept: {_why_gone(shadow)}; "
                                                   "nothing was changed")
    record = take(session, shadow, "rewind")
    if record is None:
        failed = rec.last(session.records, rec.CheckpointFailed)
        return FilesPlan(point.commit, "", [], [], f"{failed.reason if failed else None}; nothing was changed")
    now = record.commit
    changes = shadow.changes(now, point.commit)
    refused = restore.refusal(session.root, changes) or _left_out(session.records, point, record)
    touched = {c.path for c in changes}
    outside = sorted(p for p in _outside(session.records, shadow, point.seq) if p in touched)
    return FilesPlan(point.commit, now, changes, outside, refused)


def _why_gone(shadow: Shadow) -> str:
    """Why a checkpoint a history names is not in the shadow."""
    cleaned = "cleaned away (checkpoints_keep_days, checkpoints_max_mb)"
    if not legacy(shadow.root):
        return cleaned
    return (f"{cleaned}, or taken by an older rhapsody into the project's {STATE_DIR}/checkpoints/, which is never "
            "read (a cloned project could plant one there)")


def _left_out(records: Sequence[rec.Record], point: Point, now: rec.Checkpoint) -> str:
    """A refusal when a file left out of either checkpoint (too big, a nested repository) differs between them
    (by size and modification time: its bytes were never read)."""
    then = next(r for r in rec.of(records, rec.Checkpoint) if r.seq == point.seq)
    old = {(x[0], x[1], *x[3:]): x[2] for x in then.left_out}
    new = {(x[0], x[1], *x[3:]): x[2] for x in now.left_out}
    for key in sorted(set(old) ^ set(new)):
        why = old.get(key) or new.get(key)
        return (f"cannot restore {key[0]!r} exactly: it was left out of {'that' if key in old else 'the current'} "
                f"checkpoint ({why}); nothing was changed")
    return ""


def _outside(records: Sequence[rec.Record], shadow: Shadow, since: int) -> set[str]:
    """Paths changed between the end of a turn (or a restore) and the next checkpoint, after seq `since`."""
    marks = [m for m in _marks(records) if m[0] >= since]
    kept = shadow.existing([commit for _, _, commit in marks])
    paths: set[str] = set()
    for (_, at, old), (_, _, new) in zip(marks, marks[1:]):
        if at in ("end", "restored") and old != new and {old, new} <= kept:
            paths.update(c.path for c in shadow.changes(old, new))
    return paths


def restore_files(session: Session, shadow: Shadow, plan: FilesPlan) -> str:
    """Write the plan's files, between a `restore` started and a `restore` done record."""
    session.append(rec.Restore(state="started", target=plan.target, before=plan.now))
    return _finish(session, shadow, plan.target, plan.changes)


def _finish(session: Session, shadow: Shadow, target: str, changes: list[Change]) -> str:
    blobs = shadow.blobs(sorted({c.new_blob for c in changes if c.new_blob}))
    restore.apply(session.root, changes, blobs)
    session.append(rec.Restore(state="done", target=target, changed=len(changes)))
    return f"files restored: {len(changes)} path{'s' if len(changes) != 1 else ''} changed"


def finish_interrupted(session: Session, shadow: Shadow) -> str:
    """Finish a files restore a kill cut short (the tree goes on to its target); '' when there is none."""
    last = rec.last(session.records, rec.Restore)
    if last is None or last.state != "started" or not shadow.has(last.target):
        return ""
    now = shadow.snapshot("rhapsody finishing a restore").commit
    changes = shadow.changes(now, last.target)
    if restore.refusal(session.root, changes):
        return ""
    return "an interrupted rewind was finished: " + _finish(session, shadow, last.target, changes)


@dataclass(frozen=True)
class Rewound:
    """What a rewind did: the line to show, and the message to put back in the prompt."""

    text: str
    prompt: str = ""
    error: bool = False
    outside: tuple[str, ...] = ()
    """Files changed outside rhapsody that the rewind would overwrite (it stopped to ask)."""


def rewind(session: Session, shadow: Shadow, turn: RewindPoint, what: What, overwrite: bool) -> Rewound:
    """Restore files, conversation or both to `turn`; files changed outside rhapsody only with `overwrite`."""
    point = turn.point
    said: list[str] = []
    if what != "files" and point.kind != "turn":
        return Rewound("a restore point has files only; choose files", error=True)
    if what in ("files", "both"):
        try:
            plan = plan_files(session, shadow, point)
        except (RhapsodyError, OSError) as exc:
            return Rewound(f"rewind failed, nothing was changed: {exc}", error=True)
        if plan.refused:
            return Rewound(plan.refused, error=True)
        if plan.outside and not overwrite:
            return Rewound(outside_text(plan.outside), error=True, outside=tuple(plan.outside))
        try:
            said.append(restore_files(session, shadow, plan))
        except (RhapsodyError, OSError) as exc:
            return Rewound(f"rewind failed part way: {exc}; opening the session again finishes it", error=True)
    if what in ("conversation", "both"):
        rewind_conversation(session, point)
        said.append(f"conversation rewound to before message {point.number}")
    return Rewound("; ".join(said), prompt=point.text if what != "files" else "")


def outside_text(paths: list[str]) -> str:
    """The question about files changed outside rhapsody, in one line."""
    shown = ", ".join(paths[:8]) + (f" and {len(paths) - 8} more" if len(paths) > 8 else "")
    return f"changed outside rhapsody since then, and the rewind would overwrite them: {shown}"


DAY = 86400.0


def clean(shadow: Shadow, keep_days: float, max_bytes: float, now: float, grace: str = "1.hour.ago") -> int:
    """Remove checkpoints older than `keep_days`, then the oldest until the shadow is under `max_bytes`;
    at most once a day (a stamp file). Returns how many checkpoints every session's history still names."""
    stamp = shadow.git_dir / "rhapsody-cleaned"
    if not shadow.git_dir.is_dir() or (stamp.exists() and stamp.stat().st_mtime > now - DAY):
        return -1
    named = _every_checkpoint(shadow.root)
    keep = [commit for ts, commit in named if ts >= now - keep_days * DAY]
    if len(keep) < len(named):
        shadow.prune(keep, grace)
    while keep and shadow.size_bytes() > max_bytes:
        keep = keep[len(keep) // 2 + 1:]  # the newer half stays
        shadow.prune(keep, grace)
    write_private(stamp, f"{now}\n")
    return len(keep)


def _every_checkpoint(root: Path) -> list[tuple[float, str]]:
    """(ts, commit) of every checkpoint every session of the project recorded, oldest first."""
    found = []
    for path in sessions(root):
        try:
            records = read_history(path, typed=True).typed
        except RhapsodyError:
            continue
        found += [(r.ts, r.commit) for r in rec.of(records, rec.Checkpoint)]
    return sorted(found)
