"""The micro-handoff as one state machine whose every transition is a history record.

    idle ──want──▶ wanted ──ask──▶ asked ──remind──▶ reminded
    (any) ──the request does not fit the window──▶ committed (a `seam`, no note yet) ──ask──▶ asked (after_strip)
                                     │                  │
                       (the agent calls micro_handoff: the note is written)
                                     ▼                  ▼
                                   noted ──end of turn──▶ committed (a `seam` record;
                                                        after a strip at the window, a `seam_note` record)
                                                       ╰▶ failed (`seam_failed`)
    asked/reminded ──the agent ends its turn again without a note──▶ failed (`handoff_failed`)
    wanted/asked/reminded ──Esc interrupts the turn──▶ failed (`handoff_failed`, cancelled)
    wanted ──the turn ended with no tool calls since the last seam (or yet)──▶ failed (`handoff_failed`)
    committed ──/unhandoff──▶ undone (an `unseam` record)

`committed`, `failed` and `undone` are at rest, like `idle`: a new request starts over at
`wanted`. The transitions `wanted`, `asked`, `reminded` and `noted` are `handoff` records;
the others are the records that already say what happened (`seam`, `seam_failed`,
`handoff_failed`, `unseam`). `fold` is pure: the session replays it over the history, so
a session killed in any state resumes in that state.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, TypeVar, assert_never

from rhapsody.core.session import records as rec


class Phase(StrEnum):
    """Where the handoff stands."""

    IDLE = "idle"
    WANTED = "wanted"
    ASKED = "asked"
    REMINDED = "reminded"
    NOTED = "noted"
    COMMITTED = "committed"
    FAILED = "failed"
    UNDONE = "undone"


AT_REST = frozenset({Phase.IDLE, Phase.COMMITTED, Phase.FAILED, Phase.UNDONE})


@dataclass(frozen=True)
class HandoffState:
    """The handoff's phase and what the next steps need to know."""

    phase: Phase = Phase.IDLE
    interrupted_work: bool = False
    """Asked in the middle of work (after tool results): the agent is told to go on after the seam."""
    note_path: str = ""
    """The field note the pending seam will point at (phase `noted`)."""
    after_strip: int = 0
    """The seam already made at the window whose note is asked for (0: the note comes before its seam)."""

    @property
    def pending(self) -> bool:
        """Whether a handoff is under way (wanted, asked, reminded or noted)."""
        return self.phase not in AT_REST

    @property
    def wanted(self) -> bool:
        """A handoff is wanted and the agent not asked for its note yet."""
        return self.phase == Phase.WANTED

    @property
    def asked(self) -> bool:
        """The agent was asked for its note once, and has not written it."""
        return self.phase == Phase.ASKED

    @property
    def reminded(self) -> bool:
        """The agent was asked, ended its turn without the note, and was reminded."""
        return self.phase == Phase.REMINDED

    @property
    def asking(self) -> bool:
        """A request for the note is out (asked or reminded): it is not asked again."""
        return self.phase in (Phase.ASKED, Phase.REMINDED)

    @property
    def noted(self) -> bool:
        """The note is written; the seam commits when the agent ends its turn."""
        return self.phase == Phase.NOTED


def fold(state: HandoffState, record: rec.Record) -> HandoffState:
    """The state after one history record (records of other kinds leave it as it is)."""
    match record:  # the kinds a history holds most of come first: each case is an isinstance check
        case rec.MessageAdded() | rec.RequestMade() | rec.UsageRecorded() | rec.ToolRun():
            return state
        case rec.Handoff():
            return _moved(state, record)
        case rec.LegacyHandoffAsked():  # written by rhapsody before the `handoff` record existed
            return HandoffState(Phase.ASKED, interrupted_work=record.interrupted_work)
        case rec.Seam() | rec.SeamNote():
            return HandoffState(Phase.COMMITTED)
        case rec.SeamFailed() | rec.HandoffAbandoned():
            return HandoffState(Phase.FAILED)
        case rec.Unseam():
            return HandoffState(Phase.UNDONE)
        case (rec.SessionStarted() | rec.Retry() | rec.Violation() | rec.Hint() | rec.HintsDelivered() | rec.Permission()
              | rec.PermissionMode() | rec.Denial() | rec.Todo() | rec.Subagent() | rec.MemoryReminder() | rec.Prune()
              | rec.SeamTokens() | rec.ThinkingCut() | rec.ModelSwitched() | rec.Tools() | rec.NoticeShown()
              | rec.TurnInterrupted() | rec.Limit()
              | rec.Error() | rec.Resumed() | rec.Hook() | rec.Checkpoint() | rec.CheckpointFailed() | rec.ConversationRewind()
              | rec.Restore() | rec.Import() | rec.KeptAside() | rec.Compaction() | rec.Shelve() | rec.Other()):
            return state
        case _:
            assert_never(record)


def _moved(state: HandoffState, record: rec.Handoff) -> HandoffState:
    phase = Phase(record.state)
    if phase == Phase.WANTED:
        return HandoffState(Phase.WANTED)
    interrupted = state.interrupted_work if record.interrupted_work is None else record.interrupted_work
    note_path = state.note_path if record.note_path is None else record.note_path
    after_strip = state.after_strip if record.after_strip is None else record.after_strip
    return dataclasses.replace(state, phase=phase, interrupted_work=interrupted, note_path=note_path,
                               after_strip=after_strip)


_R = TypeVar("_R", bound=rec.Known)


class HandoffSession(Protocol):
    """What a transition needs of the session (core/session/session.py, which folds this module's records):
    the state it is in, its records, and the one way to add one. A protocol, so the two do not import each other."""

    @property
    def handoff(self) -> HandoffState:
        """The state folded from the records so far."""
        ...

    @property
    def records(self) -> list[rec.Record]:
        """Every record of the session, in order."""
        ...

    def append(self, record: _R) -> _R:
        """Append one record to the history and fold it in."""
        ...


def want(session: HandoffSession, at: str | None = None, saves: int | None = None, costs: int | None = None) -> bool:
    """Ask for a handoff (`why`: what the automatic seam judged, e.g. the boundary `at` and the figures); False
    (nothing recorded) when one is already under way."""
    if session.handoff.pending:
        return False
    session.append(rec.Handoff(state=Phase.WANTED.value, at=at, saves=saves, costs=costs))
    return True


def ask(session: HandoffSession, interrupted_work: bool, after_strip: int = 0, est_tokens: int | None = None) -> None:
    """The request for a field note went to the agent (`after_strip`: for this seam, made at the window;
    `est_tokens`: the context the request joins, without the request itself: what the handoff adds is
    counted from there)."""
    session.append(rec.Handoff(state=Phase.ASKED.value, interrupted_work=interrupted_work,
                               after_strip=after_strip or None, est_tokens=est_tokens))


def remind(session: HandoffSession) -> None:
    """The agent ended its turn without a note; it was reminded once."""
    session.append(rec.Handoff(state=Phase.REMINDED.value))


def noted(session: HandoffSession, note_path: str, seam: int, note: str) -> None:
    """The field note is written; the seam commits when the agent ends its turn."""
    session.append(rec.Handoff(state=Phase.NOTED.value, note_path=note_path, seam=seam,
                               note_bytes=len(note.encode("utf-8", "surrogatepass"))))


def cancel(session: HandoffSession, reason: str = "") -> bool:
    """The request ends before a note was written (Esc, or nothing to strip); nothing is stripped.

    False (nothing recorded) when no request waits for a note.
    """
    if not (session.handoff.wanted or session.handoff.asking):
        return False
    give_up(session, reason or CANCELLED)
    return True


CANCELLED = "micro-handoff cancelled: Esc interrupted the turn before the field note; nothing was stripped"
NOTHING = "nothing to hand off: no tool calls since the last seam"
NOTHING_YET = "nothing to hand off: no tool calls yet"


def nothing(session: HandoffSession) -> str:
    """Why a handoff has nothing to strip: no calls since the last seam, or none at all when there was no seam."""
    return NOTHING if rec.first(session.records, rec.Seam) else NOTHING_YET


NO_NOTE = "the agent ended its turn twice without calling micro_handoff; nothing was stripped"
"""Why a handoff failed when the agent never wrote its note: the same words live and on resume."""
OLD_NO_NOTE = "the agent did not call micro_handoff"
"""What histories written before NO_NOTE recorded for the same failure."""


def give_up(session: HandoffSession, reason: str = NO_NOTE) -> None:
    """The request ends without a note (the agent ended its turn twice, Esc, nothing to strip); nothing is stripped."""
    session.append(rec.HandoffAbandoned(reason=reason))


def failed_reason(reason: str) -> str:
    """A `handoff_failed` record's reason as the live event said it (older histories worded it shorter)."""
    return NO_NOTE if reason == OLD_NO_NOTE else reason
