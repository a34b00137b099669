"""The second window: a session that never has to end.

Every seam keeps every word and its field note, so a long enough session fills the window with
what it keeps. Before that, at a seam, rhapsody moves the words of the oldest seams out of the
active context as whole segments (a segment: the messages up to a seam's boundary), in one
`shelve` record:

- the words stay in the history, verbatim, and `recall` finds and fetches them (core/recall.py);
- the field notes (the `micro_handoff` calls and their results) stay where they are;
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

from typing import Any

from rhapsody.core.checkpoints import HARNESS_PREFIX
from rhapsody.core.context import measure_messages, notice
from rhapsody.core.messages import Message
from rhapsody.core.session import Session
from rhapsody.core.strip import authored_texts, validity_problems

SHELF_AT = 0.5
"""Shelve when what a seam left is more than this share of the window."""
SHELF_TO = 0.25
"""...and bring it back to this share, with whole segments."""
KEEP_SEAMS = 2
"""The words of this many newest seams always stay."""


def shelve_after_seam(session: Session, window: int) -> dict[str, Any] | None:
    """The `shelve` record when the latest seam left too much for the window, else None (nothing changed)."""
    conv = session.conversation
    before = conv.active()
    size = measure_messages(session.spec, before)[1]
    if size <= SHELF_AT * window:
        return None
    done = conv.shelf[0] if conv.shelf else 0
    segments = [s for s in conv.seams[: max(0, len(conv.seams) - KEEP_SEAMS)] if s.boundary > done]
    plan: tuple[int, int, str, list[Message]] | None = None
    for seam in segments:
        text = _notice_text(seam.seam, seam.boundary)
        after = conv.view(conv.boundary(), shelf=notice(seam.boundary, text))
        plan = (seam.seam, seam.boundary, text, after)
        if measure_messages(session.spec, after)[1] <= SHELF_TO * window:
            break
    if plan is None:
        return None
    number, boundary, text, after = plan
    problem = _audit(before, after, text)
    if problem:
        session.record("seam_failed", reason=f"second window abandoned, context unchanged: {problem}")
        return None
    return session.record("shelve", boundary=boundary, seams=number, text=text, messages=boundary,
                          before_tokens=size, after_tokens=measure_messages(session.spec, after)[1])


def one_line(seams: int, messages: int, tokens: int) -> str:
    """What the second window says to the person, live and when the history is shown again."""
    return (f"second window: the words of seams 1–{seams} ({messages:,} messages, ~{tokens:,} tokens) left the "
            "context, verbatim on disk and recallable; their field notes stay")


def _notice_text(seams: int, messages: int) -> str:
    return (f"{HARNESS_PREFIX} Second window: so that the context stays under the model's window, the words of "
            f"seams 1–{seams} (the first {messages} messages) left your context. They are on disk verbatim: "
            "`recall` with a query finds them (and any tool call of theirs), and fetches one by its id. Their field "
            "notes follow here, in place; the words after them are all still in your context.")


def _audit(before: list[Message], after: list[Message], text: str) -> str:
    """'' when the shelved view is valid and keeps the newest words unchanged, else why not."""
    problems = validity_problems(after)
    if problems:
        return f"the conversation would be invalid: {problems[0]}"
    kept, was = authored_texts(after), authored_texts(before)
    if not kept or kept[0] != text or (len(kept) > 1 and was[len(was) - len(kept) + 1:] != kept[1:]):
        return "the words kept would not be the newest words, unchanged"
    return ""
