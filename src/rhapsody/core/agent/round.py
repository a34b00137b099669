"""One round of a turn: a request streamed, then the tool calls its answer made.

A `Round` holds one round's state: the text streamed so far, the answer (or why the request
failed), the calls not yet answered, the results and the human's denial reasons gathered so
far. `interrupt` settles a cancelled turn from it so the history stays a valid conversation:
what streamed is kept, every open call is answered with an "interrupted" result, and an
`interrupted` record ends what the turn wrote; a handoff request still waiting for its note
ends too (`cancel_handoff`). It is the loop's one cancellation path
(core/agent/loop.py).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rhapsody.core.session import handoff_state
from rhapsody.core.errors import ContextTooLong, ModelError
from rhapsody.core.events import DenialDelivered, HandoffFailed, Interrupted, ModelResponse, NarrationViolation
from rhapsody.core.session.messages import Block, TextBlock, ToolResultBlock, ToolUseBlock
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.protocol import ToolOutcome
from rhapsody.core.session import records as rec

INTERRUPTED = "Interrupted by the human before this call finished."


@dataclass
class Round:
    """One round's state: streaming until its answer is complete, then its calls and their results."""

    streaming: bool = True
    partial: list[str] = field(default_factory=list)
    """The text streamed so far (restarted when the request is retried)."""
    response: ModelResponse | None = None
    """The model's whole answer, once it streamed."""
    failure: ContextTooLong | ModelError | None = None
    """Why the request failed, when it did (there is then no answer)."""
    calls: list[ToolUseBlock] = field(default_factory=list)
    """Calls not yet answered, in order; the first may be running."""
    results: list[ToolResultBlock] = field(default_factory=list)
    denials: list[tuple[ToolUseBlock, str]] = field(default_factory=list)
    """Denial reasons typed by the human: sent after the results, as their own text."""
    unrun: set[str] = field(default_factory=set)
    """Calls refused before running (by the narration rule or a permission): they have no result to follow."""
    approvals: set[str] = field(default_factory=set)
    """Calls whose human words came with a call that ran (an approved plan): not denials."""
    interrupted_as: dict[str, str] = field(default_factory=dict)
    """What a call still open when the turn is interrupted gets instead of INTERRUPTED (a sub-agent stopped)."""

    def answered(self, session: Session) -> ModelResponse:
        """The whole answer goes into the history; its calls are the ones now to run."""
        assert self.response is not None
        content = self.response.message.content
        if content:
            session.append_message("assistant", list(content))
        self.calls = self.response.message.tool_uses()
        return self.response

    def ran(self, session: Session, call: ToolUseBlock, outcome: ToolOutcome, ms: int) -> None:
        """A call ran (or was refused): its run recorded, its result (and the human's words) kept."""
        session.append(rec.ToolRun(tool_use_id=call.id, name=call.name, is_error=outcome.is_error,
                       exit_code=outcome.exit_code, duration_ms=ms,
                       refused=outcome.refused or None,
                                   **(outcome.facts.model_dump(exclude_unset=True) if outcome.facts else {})))
        self.results.append(_result_of(call, outcome))
        if outcome.refused:
            self.unrun.add(call.id)
        if outcome.words:
            self.denials.append((call, outcome.words))
            if not outcome.is_error:  # the human's words with a call that ran: an approved plan, not a denial
                self.approvals.add(call.id)

    def unnarrated(self, session: Session, call: ToolUseBlock, words: int, required: int,
                   rule: str) -> NarrationViolation:
        """A call not run because too few words narrated it: recorded, answered with the rule."""
        total = session.figures.violations + 1
        session.append(rec.Violation(tool_use_id=call.id, name=call.name, words=words, required=required))
        self.unrun.add(call.id)
        text = rule.format(words=words, required=required)
        self.results.append(ToolResultBlock(tool_use_id=call.id, content=text, is_error=True))
        return NarrationViolation(call, words, required, total)

    def landed(self, calls: list[ToolUseBlock]) -> str:
        """Where hints sent with these calls' answers landed: after their results, or after calls refused
        without running (they have no result)."""
        names = ", ".join(c.name for c in calls)
        if all(c.id in self.unrun for c in calls):
            return f"after the refused {names} call{'s' if len(calls) > 1 else ''}"
        return f"after the {names} result"

    def blocks(self) -> list[Block]:
        """The user message's content: the results first (the API wants them first), then the denial reasons."""
        return [*self.results, *(TextBlock(text=words) for _, words in self.denials)]

    def delivered(self, session: Session, seq: int) -> list[DenialDelivered]:
        """The results went out in message `seq`: record each denial delivered; nothing is left to settle."""
        events = []
        for call, words in self.denials:
            if call.id in self.approvals:  # shown as the human's words, not recorded as a denial
                events.append(DenialDelivered(call, words))
                continue
            session.append(rec.Denial(tool_use_id=call.id, name=call.name, text=words, message_seq=seq))
            events.append(DenialDelivered(call, words))
        self.calls, self.results, self.denials, self.approvals = [], [], [], set()
        return events


def _result_of(call: ToolUseBlock, outcome: ToolOutcome) -> ToolResultBlock:
    """The tool_result the model gets for a call that ran (or was refused)."""
    if outcome.is_error:
        return ToolResultBlock(tool_use_id=call.id, content=outcome.blocks or outcome.content or "(error)",
                               is_error=True)
    return ToolResultBlock(tool_use_id=call.id, content=outcome.blocks or outcome.content or "(no output)")


def interrupt(session: Session, current: Round | None) -> Interrupted:
    """Settle a cancelled turn in the history at its round under way (None: before the first), and say what
    was interrupted."""
    if current is not None and current.streaming:
        return _keep_partial(session, current)
    if current is not None and (current.calls or current.results):
        return _answer_open_calls(session, current)
    session.append(rec.TurnInterrupted(partial_text="", during="turn"))  # between rounds: nothing is open
    return Interrupted("", during="turn")


def cancel_handoff(session: Session) -> list[HandoffFailed]:
    """Esc ends a handoff request waiting for its note too, whichever front end pressed it; the event that says so."""
    return [HandoffFailed(handoff_state.CANCELLED)] if handoff_state.cancel(session) else []


def _keep_partial(session: Session, current: Round) -> Interrupted:
    text = "".join(current.partial)
    current.partial, current.streaming = [], False
    if text.strip():
        session.append_message("assistant", [TextBlock(text=text)])
    session.append(rec.TurnInterrupted(partial_text=text, during="stream"))
    return Interrupted(text, during="stream")


def _answer_open_calls(session: Session, current: Round) -> Interrupted:
    answered = {r.tool_use_id for r in current.results}
    still_open = [c for c in current.calls if c.id not in answered]  # closed right after a call finished
    current.results += [ToolResultBlock(tool_use_id=c.id, content=current.interrupted_as.get(c.id, INTERRUPTED),
                                        is_error=True) for c in still_open]
    record = session.append_message("user", current.blocks())
    current.delivered(session, record.seq)
    session.append(rec.TurnInterrupted(partial_text="", during="tools", open=[c.id for c in still_open]))
    return Interrupted("", during="tools", open_calls=tuple(c.id for c in still_open))
