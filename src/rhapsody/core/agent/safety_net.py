"""The safety net at the window: room for the note first, the note over what is left, then the strip.

A handoff is a model call over the whole context, so once the context no longer fits it
cannot be asked for as it is; and a note asked for after everything is stripped is written
blind, holding nothing that was not narrated. When a request is refused for length (the
API's 400, or rhapsody's own estimate before sending), `request_failed` makes room first:

1. a `prune` record takes the oldest tool calls out of the view, only as many as the request
   for the note needs to fit with room for the note (core/accounting/window_room.py), audited like any
   strip; the latest results stay;
2. the agent is asked for its field note over what is left (`prompts/window_note.md`, with
   the list of what left, each call recallable by id);
3. the note is written and the seam strips the rest at the end of that turn, as every seam
   does (core/agent/turn_end.py: the second window then shelves the oldest seams' words where the
   seam left more than half the window, core/session/shelf.py), and the agent is told to go on.

A handoff already asked for is not asked again: the prune makes room for the request already
in the context. A note already written (phase `noted`) is not asked again: its seam is
committed now, and work the handoff interrupted goes on. With thinking on, the cut changes the
prefix every thinking block so far is bound to (FACTS §1.3), so a `thinking_cut` record drops
them all first, as the strip does (dropping thinking from the start of the history is valid;
the next request thinks afresh), and then the prune: the note is still written over the latest
results. Where no cut between rounds makes room, or where the request for the note is refused as
well, rhapsody strips first as before: a `seam` record strips every message so far, the
current round included, then asks for the note over the stripped context, and the note
attaches to that seam (`seam_note`); the second window's shelving follows that seam too. When
stripping would take nothing, or the stripped request is refused again, the turn fails with one
line, as on any other failed request; the history is valid at every step, since each step is one
record.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from dataclasses import dataclass

from rhapsody.core.session import handoff_state
from rhapsody.core.session.context import measure_messages
from rhapsody.core.errors import ContextTooLong, ModelError
from rhapsody.core.events import (
    ContextPruned,
    Event,
    Failed,
    HandoffAsked,
    HandoffFailed,
    HarnessSaid,
    SeamCommitted,
)
from rhapsody.core.session.handoff import INDEX_CHARS, AuditFailed, commit_seam, prune, stripped_index
from rhapsody.core.session.messages import TextBlock
from rhapsody.core.agent.policy import Policy
from rhapsody.core.accounting.seam_cost import of_session
from rhapsody.core.session.session import Session
from rhapsody.core.session.shelf import shelve_after_seam
from rhapsody.core.agent.turn_end import ABANDONED, HandoffThreshold, said
from rhapsody.core.agent.turn_hooks import context_with
from rhapsody.core.window import session_window
from rhapsody.core.accounting.window_room import room_for_note
from rhapsody.core.session import records as rec

WINDOW_REASON = "at the window, room for the field note: "
"""How the reason of the `prune` that makes room for the note at the window begins."""


@dataclass(frozen=True)
class Netted:
    """What the strip at the window produced: events to show, and whether the turn goes on."""

    events: list[Event]
    go_on: bool


def request_failed(session: Session, policy: Policy, threshold: HandoffThreshold,
                   failure: ContextTooLong | ModelError, refused_before: bool) -> Netted:
    """A failed request: refused for length, make room for the note first, else strip first (the threshold
    then counts from the seam), unless the stripped request was refused too; any other failure ends the turn."""
    if not isinstance(failure, ContextTooLong):
        return _fail(session, str(failure))
    refusal = str(failure)
    if refused_before and not _made_room(session):
        return _refused_again(session, refusal)
    if not refused_before and not session.handoff.noted:
        made = _room_first(session, policy, refusal)
        if made is not None:
            return made
    netted = _strip_first(session, policy, refusal)
    if netted.go_on:
        threshold.rearm(session.figures.after_last_seam)
    return netted


def _room_first(session: Session, policy: Policy, refusal: str) -> Netted | None:
    """Take the oldest calls out so the request for the note fits with room for it, and ask for the note
    (None: no cut makes room, or its audit failed; the caller strips first instead)."""
    state = session.handoff
    asking = not state.asking  # a request already out is not asked again
    ask = policy.window_note.format(reason=refusal, index="x" * INDEX_CHARS) if asking else ""  # the longest index
    room = room_for_note(session, ask, of_session(session).adds, policy.context_window, refusal)
    if room is None:
        return None
    index = stripped_index(session, only=set(room.ids))
    if session.spec.thinking:  # first, so a crash between the two leaves thinking dropped and nothing cut: valid
        session.cut_thinking(f"{WINDOW_REASON}the cut changes the prefix every thinking block so far is bound to")
    try:
        record = prune(session, room.ids, f"{WINDOW_REASON}{refusal}")
    except AuditFailed as exc:
        session.append(rec.SeamFailed(reason=f"{ABANDONED}{exc}"))
        return None
    events: list[Event] = [ContextPruned(record)]
    if asking:
        handoff_state.ask(session, interrupted_work=True, est_tokens=context_with(session, []))
        events += _tell(session, policy.window_note.format(reason=refusal, index=index))
        events.append(HandoffAsked())
    return Netted(events, True)


def _made_room(session: Session) -> bool:
    """Whether what answered the last refusal was room for the note (the latest cut is the window's prune, not
    a seam): the request for the note was refused as well, so now rhapsody strips first."""
    latest = rec.last(session.records, rec.Seam, rec.Prune)
    return isinstance(latest, rec.Prune) and latest.reason.startswith(WINDOW_REASON)


def _strip_first(session: Session, policy: Policy, refusal: str) -> Netted:
    """Strip the context that did not fit, then ask for the note over what is left."""
    if not _strip_takes_something(session):
        return _fail(session, f"{refusal}; stripping tool traffic would take nothing, so the request cannot be made to fit")
    state = session.handoff
    index = stripped_index(session)
    try:
        record = commit_seam(session, note_path=state.note_path if state.noted else "",
                             window={"refusal": refusal})
    except AuditFailed as exc:
        reason = f"{ABANDONED}{exc}"
        session.append(rec.SeamFailed(reason=reason))
        return Netted([HandoffFailed(reason), *_fail(session, refusal).events], False)
    events: list[Event] = [SeamCommitted(record, shelve_after_seam(session, _window(session, policy)))]
    if state.noted and state.interrupted_work:  # the seam the note was for is made: go on
        events += _tell(session, policy.continue_after_handoff)
    elif not state.noted:
        handoff_state.ask(session, interrupted_work=True, after_strip=record.seam)
        events += _tell(session, policy.window_request.format(reason=refusal, seam=record.seam, index=index))
        events.append(HandoffAsked())
    return Netted(events, True)


def _window(session: Session, policy: Policy) -> int:
    """The window the second window is sized by: the one the session runs in, as at every seam."""
    return session_window(session.spec.model, session.figures.evidence, policy.context_window).tokens


def _tell(session: Session, text: str) -> list[HarnessSaid]:
    """Send the model the harness's own `text` as a user message; the events that show it."""
    blocks = [TextBlock(text=text)]
    return said(blocks, session.append_message("user", list(blocks)).seq)


def _refused_again(session: Session, refusal: str) -> Netted:
    """The stripped request was refused for length as well: the turn ends, saying so."""
    return _fail(session, f"{refusal} (after the strip at the window: the words kept are more than the window holds)")


def _strip_takes_something(session: Session) -> bool:
    conv = session.conversation
    everything = conv.view(len(conv.messages))
    return measure_messages(session.spec, everything)[0] < measure_messages(session.spec, conv.active())[0]


def _fail(session: Session, message: str) -> Netted:
    session.append(rec.Error(message=message))
    return Netted([Failed(message)], False)
