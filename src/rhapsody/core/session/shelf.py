"""The second window: a session that never has to end.

Every seam keeps every word and its field note, so a long enough session fills the window with
what it keeps. Before that, at a seam, rhapsody moves the words of the oldest seams out of the
active context as whole segments (a segment: the messages up to a seam's boundary), in one
`shelve` record:

- the words stay in the history, verbatim, and `recall` finds and fetches them (core/session/recall.py);
- the field notes (the `micro_handoff` calls and their results) stay where they are, unless what
  is kept is still over `SHELF_AT` and the notes alone take more than `SHELF_TO` of the window:
  then the oldest notes leave as well (each is on disk in `.rhapsody/notes/` and in the history,
  and `recall` finds it);
- the view opens with one harness notice saying what left and how to get it back;
- the words of the newest `KEEP_SEAMS` seams always stay;
- nothing is summarised: the notes are the agent's own.

It happens right after a seam is committed, when what the seam left is more than `SHELF_AT` of
the window, and takes the fewest oldest segments that bring it to `SHELF_TO` (or as many as it may).
At that point the seam has just stripped every thinking block, so no thinking is bound to the
prefix that changes; `system` and `tools` are untouched. The shelved view is audited as a strip
is: the conversation must stay valid, and the words kept must be the newest words, unchanged.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import Callable

from rhapsody.core.session import records as rec
from rhapsody.core.session.checkpoints import HARNESS_PREFIX
from rhapsody.core.session.context import Shelf, measure_messages, notice
from rhapsody.core.session.messages import Message
from rhapsody.core.session.session import Session
from rhapsody.core.session.strip import authored_texts, validity_problems

SHELF_AT = 0.5
"""Shelve when what a seam left is more than this share of the window."""
SHELF_TO = 0.25
"""...and bring it back to this share, with whole segments."""
KEEP_SEAMS = 2
"""The words of this many newest seams always stay."""


def shelve_after_seam(session: Session, window: int) -> rec.Shelve | None:
    """The `shelve` record when the latest seam left too much for the window, else None (nothing changed)."""
    conv = session.conversation
    before = conv.active()
    size = measure_messages(session.spec, before)[1]
    if size <= SHELF_AT * window:
        return None
    done = conv.shelf or Shelf(0, notice(""))
    segments = [s for s in conv.seams[: max(0, len(conv.seams) - KEEP_SEAMS)] if s.boundary > done.boundary]
    if not segments:
        segments = [s for s in conv.seams if s.boundary == done.boundary]  # the notes may still have to go
    words = _fewest(session, segments, lambda seam: Shelf(seam.boundary, notice(""), done.notes_boundary), window)
    if words is None:
        return None
    notes: tuple[rec.Seam, Shelf, int] | None = None
    if words[2] > SHELF_AT * window and _notes_fill(session, words[0].boundary, words[2], window):
        kept = [s for s in conv.seams if done.notes_boundary < s.boundary <= words[0].boundary]
        notes = _fewest(session, kept, lambda seam: Shelf(words[0].boundary, notice(""), seam.boundary), window)
    if words[0].boundary == done.boundary and (notes is None or notes[0].boundary <= done.notes_boundary):
        return None  # nothing more may leave
    return _record(session, before, size, words[0], notes[0] if notes else None, done)


def _notes_fill(session: Session, boundary: int, size: int, window: int) -> bool:
    """Whether the notes before `boundary` alone take more than SHELF_TO of the window (then the oldest go)."""
    conv = session.conversation
    bare = measure_messages(session.spec, conv.view(conv.boundary(), shelf=Shelf(boundary, notice(""), boundary)))[1]
    return size - bare > SHELF_TO * window


def _fewest(session: Session, segments: list[rec.Seam], shelf_at: Callable[[rec.Seam], Shelf],
            window: int) -> tuple[rec.Seam, Shelf, int] | None:
    """The oldest segments that bring the context to SHELF_TO of the window (all of them when none does):
    the last seam they take, the shelf, and the context's estimate with it."""
    found = None
    conv = session.conversation
    for seam in segments:
        shelf = shelf_at(seam)
        found = (seam, shelf, measure_messages(session.spec, conv.view(conv.boundary(), shelf=shelf))[1])
        if found[2] <= SHELF_TO * window:
            break
    return found


def _record(session: Session, before: list[Message], size: int, words: rec.Seam, notes: rec.Seam | None,
            done: Shelf) -> rec.Shelve | None:
    """Audit the shelf and write its record (None, and a `seam_failed`, when the audit fails)."""
    conv = session.conversation
    notes_boundary = notes.boundary if notes else done.notes_boundary
    notes_seams = notes.seam if notes else _seam_at(conv.seams, done.notes_boundary)
    text = notice_text(words.seam, words.boundary, notes_seams)
    after = conv.view(conv.boundary(), shelf=Shelf(words.boundary, notice(text), notes_boundary))
    problem = _audit(before, after, text)
    if problem:
        session.append(rec.SeamFailed(reason=f"second window abandoned, context unchanged: {problem}"))
        return None
    return session.append(rec.Shelve(boundary=words.boundary, seams=words.seam, text=text, messages=words.boundary,
                          notes_boundary=notes_boundary, notes_seams=notes_seams, before_tokens=size,
                          after_tokens=measure_messages(session.spec, after)[1]))


def _seam_at(seams: list[rec.Seam], boundary: int) -> int:
    return next((s.seam for s in seams if s.boundary == boundary), 0)


def one_line(seams: int, messages: int, tokens: int) -> str:
    """What the second window says to the person, live and when the history is shown again."""
    return (f"second window: the words of seams 1–{seams} ({messages:,} messages, ~{tokens:,} tokens) left the "
            "context, verbatim on disk and recallable; their field notes stay")


def notice_text(seams: int, messages: int, notes_seams: int) -> str:
    """The harness's notice that stands in the view in place of the words that left."""
    notes = ("Their field notes follow here, in place" if not notes_seams else
             f"The field notes of seams 1–{notes_seams} left too (the notes alone filled a quarter of the window; "
             "`recall` finds them as well); the later notes follow here, in place")
    return (f"{HARNESS_PREFIX} Second window: so that the context stays under the model's window, the words of "
            f"seams 1–{seams} (the first {messages} messages) left your context. They are on disk verbatim: "
            f"`recall` with a query finds them (and any tool call of theirs), and fetches one by its id. {notes}; "
            "the words after them are all still in your context.")


def _audit(before: list[Message], after: list[Message], text: str) -> str:
    """'' when the shelved view is valid and keeps the newest words unchanged, else why not."""
    problems = validity_problems(after)
    if problems:
        return f"the conversation would be invalid: {problems[0]}"
    kept, was = authored_texts(after), authored_texts(before)
    if not kept or kept[0] != text or (len(kept) > 1 and was[len(was) - len(kept) + 1:] != kept[1:]):
        return "the words kept would not be the newest words, unchanged"
    return ""
