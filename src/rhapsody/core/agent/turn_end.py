"""What happens when the model ends its turn, and the steps the loop shares with it.

At the end of a turn a noted micro-handoff seam is committed, an unanswered handoff request
is reminded once and then given up, a memory reminder goes out when due, and the hints
still queued are delivered; whatever of this the model must read is a follow-up message
and the turn goes on. Once the turn is over, a handoff still wanted (ctrl+o pressed as the
turn ended without a tool call) is asked for in a turn of its own, so ctrl+o always ends in
a seam in every front end (`handoff_left`). Also here: the rolling policy's cut, the token
threshold that asks for a handoff, the record that says hints reached the model, and the
events that show what the harness itself told the model (`said`). The loop (core/agent/loop.py)
calls these; nothing here streams or runs tools.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rhapsody.core.session import handoff_state
from rhapsody.core.session.checkpoints import HARNESS_PREFIX
from rhapsody.core.events import (
    ContextPruned,
    Event,
    HandoffAsked,
    HandoffFailed,
    HarnessSaid,
    HintDelivered,
    MemoryReminded,
    SeamCommitted,
)
from rhapsody.core.session.handoff import AuditFailed, commit_seam, count_seam_tokens, roll, stripped_calls
from rhapsody.core.session.messages import Block, TextBlock
from rhapsody.core.model import Model
from rhapsody.core.agent.policy import Policy
from rhapsody.core.session.session import Session
from rhapsody.core.accounting.seam_cost import NOTE_ROOM_TOKENS, note_costs
from rhapsody.core.session.shelf import shelve_after_seam
from rhapsody.core.window import session_window, share_limit
from rhapsody.core.accounting.window_room import HEADROOM
from rhapsody.core.session import records as rec

ABANDONED = "strip abandoned, context unchanged: "
"""How a failed seam audit begins, live and on resume."""


@dataclass(frozen=True)
class TurnEnd:
    """What the end of the model's turn produced: events to show, and a message to go on with."""

    events: list[Event]
    follow_up: list[Block]


class HandoffThreshold:
    """Asks for a micro-handoff once the context reaches `handoff_at_tokens` past the last seam, or
    else `share` of the model's window (core/window.py)."""

    def __init__(self, every: int | None, share: float | None = None, window: int | None = None) -> None:
        self.every = every
        self.armed_at = every
        self.share = share
        self.window = window

    def limit(self, session: Session) -> int | None:
        """The context size at which the next handoff is asked for (None: never), at the latest the window less
        room for the handoff's own note (`note_room`), so the automatic seam never needs the safety net."""
        size = session_window(session.spec.model, session.figures.evidence, self.window).tokens
        if self.every or not self.share:
            return None if self.armed_at is None else min(self.armed_at, size - note_room(session.records))
        return min(share_limit(self.share, size, session.figures.after_last_seam), size - note_room(session.records))

    def check(self, session: Session) -> None:
        """Request a handoff when the context has reached the armed size and none is pending."""
        limit = self.limit(session)
        if limit and not session.handoff.pending and session.context_tokens() >= limit:
            session.request_handoff()

    def rearm(self, tokens_after_seam: int) -> None:
        """Count the next threshold from the context a seam left."""
        if self.every:
            self.armed_at = tokens_after_seam + self.every


def note_room(records: Sequence[rec.Record]) -> int:
    """The room the handoff's own requests need in the window: what this session's notes added (else the
    default), with a quarter more, as the safety net keeps for the note (core/accounting/window_room.py)."""
    costs = note_costs(records)
    return round(HEADROOM * (sum(costs) / len(costs) if costs else NOTE_ROOM_TOKENS))


async def end_of_turn(session: Session, policy: Policy, model: Model, threshold: HandoffThreshold,
                      turn_start: int) -> TurnEnd:
    """A seam, a reminder, hints: the events and the follow-up message (empty: the turn ends)."""
    events: list[Event] = []
    follow_up: list[Block] = []
    if policy.rolling and session.spec.thinking:
        # With thinking on, the prefix may change only between turns (FACTS §1.3).
        pruned = rolled(session, policy)
        events += [pruned] if pruned is not None else []
    if session.handoff.noted and session.handoff.after_strip:  # the strip came first, at the window
        state = session.handoff
        session.append(rec.SeamNote(seam=state.after_strip, note_path=state.note_path))
        follow_up.append(TextBlock(text=policy.continue_after_handoff))
    elif session.handoff.noted:
        committed, resume_work = await _commit_seam(session, policy, model, threshold)
        events.append(committed)
        if resume_work:
            follow_up.append(TextBlock(text=policy.continue_after_handoff))
    elif session.handoff.asked:
        handoff_state.remind(session)
        follow_up.append(TextBlock(text=policy.handoff_reminder))
        events.append(HandoffAsked(reminder=True))
    elif session.handoff.reminded:
        handoff_state.give_up(session, handoff_state.NO_NOTE)
        events.append(HandoffFailed(handoff_state.NO_NOTE))
    elif policy.memory_reminder and _memory_due(session, policy, turn_start):
        session.append(rec.MemoryReminder())
        follow_up.append(TextBlock(text=policy.memory_reminder))
        events.append(MemoryReminded())
    harness = list(follow_up)
    hints = session.pending_hints()
    follow_up.extend(TextBlock(text=h.text) for h in hints)
    if follow_up:
        record = session.append_message("user", follow_up)
        events += said(harness, record.seq)
        if hints:
            events.append(delivered(session, hints, record.seq, "end of turn"))
    return TurnEnd(events, follow_up)


def said(blocks: Sequence[Block], seq: int) -> list[HarnessSaid]:
    """What the harness itself told the model in these blocks of the user message `seq` (its own texts begin
    with HARNESS_PREFIX; what a hook added does not), in the message's order."""
    return [HarnessSaid(b.text, seq) for b in blocks if isinstance(b, TextBlock) and b.text.startswith(HARNESS_PREFIX)]


def handoff_left(session: Session) -> tuple[bool, list[Event]]:
    """After a turn: whether a handoff still wanted opens a turn of its own now (ctrl+o always ends in a seam).

    With no tool call to strip it is given up instead, no request sent, and the event says why.
    """
    if not session.handoff.wanted:
        return False, []
    if stripped_calls(session):
        return True, []
    why = handoff_state.nothing(session)
    handoff_state.cancel(session, why)  # no request for a seam that strips nothing
    return False, [HandoffFailed(why)]


def rolled(session: Session, policy: Policy) -> ContextPruned | None:
    """Apply the rolling policy's batch cut when working memory overflowed."""
    assert policy.rolling is not None
    record = roll(session, policy.rolling)
    return ContextPruned(record) if record is not None else None


def delivered(session: Session, hints: list[rec.Hint], seq: int, where: str) -> HintDelivered:
    """Record that `hints` went out in message `seq`; the event that says where."""
    ids = tuple(h.id for h in hints)
    session.append(rec.HintsDelivered(ids=list(ids), message_seq=seq, where=where))
    return HintDelivered(ids, where)


def _memory_due(session: Session, policy: Policy, turn_start: int) -> bool:
    """A task of this turn used tools, left memory untouched, and was not reminded yet."""
    turn = session.records[turn_start:]
    if rec.first(turn, rec.MemoryReminder, rec.Seam, rec.Handoff):
        return False
    runs = [r for r in rec.of(turn, rec.ToolRun) if r.name not in ("micro_handoff", "recall")]
    wrote = any(r.op == "write" and (r.path or "").startswith(policy.memory_path + "/") for r in runs)
    return bool(runs) and not wrote


async def _commit_seam(session: Session, policy: Policy, model: Model,
                       threshold: HandoffThreshold) -> tuple[SeamCommitted | HandoffFailed, bool]:
    """Commit the noted seam; the event, and whether the agent goes on with its work after it."""
    state = session.handoff
    try:
        record = commit_seam(session, note_path=state.note_path)
    except AuditFailed as exc:
        reason = f"{ABANDONED}{exc}"
        session.append(rec.SeamFailed(reason=reason))  # in the words the live line says, for a resume to show
        return HandoffFailed(reason), False
    window = session_window(session.spec.model, session.figures.evidence, policy.context_window).tokens
    shelved = shelve_after_seam(session, window)
    threshold.rearm(shelved.after_tokens if shelved else record.after.est_tokens)
    if policy.exact_tokens:
        await count_seam_tokens(session, model, record.seam)
    return SeamCommitted(record, shelved), state.interrupted_work
