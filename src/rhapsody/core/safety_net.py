"""The safety net at the window: strip first, then ask for the field note, then go on.

A handoff is a model call over the whole context, so once the context no longer fits it
cannot be asked for. The strip needs no model call. When a request is refused for length
(the API's 400, or rhapsody's own estimate before sending), `request_failed` strips first:

1. a `seam` record strips every message so far, the current round included (its tool
   results leave too, and every thinking block, so none is left bound to a prefix that
   changed; the audit checks the text and the request's validity as for any seam);
2. the agent is asked for its field note over the stripped context, with the list of what
   left (each call recallable by id) and, from the note tool, the harness's facts;
3. the note attaches to that seam (`seam_note`), and the agent is told to go on.

A note already written (phase `noted`) is not asked again: its seam is committed now, and
work the handoff interrupted goes on.
When stripping would take nothing, or the stripped request is refused again, the turn
fails with one line, as it does on any other failed request; the history is valid at every
step, since each step is one record.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from dataclasses import dataclass

from rhapsody.core import handoff_state
from rhapsody.core.context import measure_messages
from rhapsody.core.errors import ContextTooLong, ModelError
from rhapsody.core.events import Event, Failed, HandoffAsked, HandoffFailed, HarnessSaid, SeamCommitted
from rhapsody.core.handoff import AuditFailed, commit_seam, stripped_index
from rhapsody.core.handoff_state import Phase
from rhapsody.core.messages import TextBlock
from rhapsody.core.policy import Policy
from rhapsody.core.session import Session
from rhapsody.core.shelf import shelve_after_seam
from rhapsody.core.turn_end import ABANDONED, HandoffThreshold, said
from rhapsody.core.window import context_window


@dataclass(frozen=True)
class Netted:
    """What the strip at the window produced: events to show, and whether the turn goes on."""

    events: list[Event]
    go_on: bool


def request_failed(session: Session, policy: Policy, threshold: HandoffThreshold,
                   failure: ContextTooLong | ModelError, refused_before: bool) -> Netted:
    """A failed request: refused for length, strip first (the threshold then counts from the seam), unless
    the stripped request was refused too; any other failure ends the turn."""
    if not isinstance(failure, ContextTooLong):
        return _fail(session, str(failure))
    if refused_before:
        return _refused_again(session, str(failure))
    netted = _strip_first(session, policy, str(failure))
    if netted.go_on:
        threshold.rearm(session.figures.after_last_seam)
    return netted


def _strip_first(session: Session, policy: Policy, refusal: str) -> Netted:
    """Strip the context that did not fit, then ask for the note over what is left."""
    if not _strip_takes_something(session):
        return _fail(session, f"{refusal}; stripping tool traffic would take nothing, so the request cannot be made to fit")
    state = session.handoff
    index = stripped_index(session)
    try:
        record = commit_seam(session, note_path=state.note_path if state.phase == Phase.NOTED else "",
                             window={"refusal": refusal})
    except AuditFailed as exc:
        reason = f"{ABANDONED}{exc}"
        session.record("seam_failed", reason=reason)
        return Netted([HandoffFailed(reason), *_fail(session, refusal).events], False)
    events: list[Event] = [SeamCommitted(record, shelve_after_seam(session, _window(session, policy)))]
    if state.phase == Phase.NOTED and state.interrupted_work:  # the seam the note was for is made: go on
        events += _tell(session, policy.continue_after_handoff)
    elif state.phase != Phase.NOTED:
        handoff_state.ask(session, interrupted_work=True, after_strip=record["seam"])
        events += _tell(session, policy.window_request.format(reason=refusal, seam=record["seam"], index=index))
        events.append(HandoffAsked())
    return Netted(events, True)


def _window(session: Session, policy: Policy) -> int:
    return context_window(session.spec.model, policy.context_window)


def _tell(session: Session, text: str) -> list[HarnessSaid]:
    """Send the model the harness's own `text` as a user message; the events that show it."""
    blocks = [TextBlock(text=text)]
    return said(blocks, session.append_message("user", list(blocks))["seq"])


def _refused_again(session: Session, refusal: str) -> Netted:
    """The stripped request was refused for length as well: the turn ends, saying so."""
    return _fail(session, f"{refusal} (after the strip at the window: the words kept are more than the window holds)")


def _strip_takes_something(session: Session) -> bool:
    conv = session.conversation
    everything = conv.view(len(conv.messages))
    return measure_messages(session.spec, everything)[0] < measure_messages(session.spec, conv.active())[0]


def _fail(session: Session, message: str) -> Netted:
    session.record("error", message=message)
    return Netted([Failed(message)], False)
