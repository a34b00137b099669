"""The agent loop: one async generator every front end drives.

`Agent.run(text)` appends the user's message, then repeats: build the request from the
active context, stream the answer, run the tool calls that were narrated, and append one
user message with the tool results first and the pending hints after them. At the end of
the turn it commits a pending micro-handoff seam, delivers queued messages, or stops.

Cancellation (Esc) reaches the generator at an await, or as GeneratorExit at a yield when
the consumer closes it; either way the handler keeps what streamed, answers every open
tool call with an "interrupted" result and re-raises, so the history is always a valid
conversation.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from rhapsody.core.errors import ModelError
from rhapsody.core.events import (
    ContextPruned,
    Event,
    Failed,
    HandoffAsked,
    HandoffFailed,
    HintDelivered,
    ModelResponse,
    NarrationViolation,
    RequestSent,
    Retrying,
    SeamCommitted,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    TurnStarted,
    UsageReported,
)
from rhapsody.core.context import build_request
from rhapsody.core.handoff import AuditFailed, commit_seam, prune, seam_views
from rhapsody.core.messages import Block, Message, TextBlock, ToolResultBlock, ToolUseBlock
from rhapsody.core.model import Model
from rhapsody.core.narration import narration_words
from rhapsody.core.rolling import RollingPolicy, plan_cut
from rhapsody.core.session import Hint, Session
from rhapsody.core.tools import ToolContext, Toolbox

INTERRUPTED = "Interrupted by the human before this call finished."


@dataclass(frozen=True)
class Policy:
    """How the loop behaves; the texts come from prompts/."""

    narration_rule: str
    handoff_request: str
    handoff_reminder: str
    continue_after_handoff: str
    narration_min_words: int = 8
    parallel_tools: bool = False
    handoff_at_tokens: int | None = None
    bash_timeout: float = 120.0
    output_cap: int = 30000
    exact_tokens: bool = False
    rolling: RollingPolicy | None = None


class Agent:
    """Runs turns of one session against one model with one toolbox."""

    def __init__(self, session: Session, model: Model, toolbox: Toolbox, policy: Policy) -> None:
        self.session = session
        self.model = model
        self.toolbox = toolbox
        self.policy = policy
        self.ctx = ToolContext(session.root, session, policy.bash_timeout, policy.output_cap)
        self.busy = False
        self._partial: list[str] = []
        self._open: list[ToolUseBlock] = []
        self._done: list[ToolResultBlock] = []
        self._handoff_armed_at = policy.handoff_at_tokens
        self.observers: list[Callable[[Event], None]] = []
        """Called with every event, whichever front end drives the loop (memory logs, metrics)."""

    async def run(self, text: str | None = None) -> AsyncIterator[Event]:
        """One turn: the human's text (plus any pending hints), then the tool loop."""
        hints = self.session.take_hints()
        blocks: list[Block] = [TextBlock(text=h.text) for h in hints]
        if text and text.strip():
            blocks.append(TextBlock(text=text))
        if self.session.handoff_wanted and not self.session.handoff_asked:
            blocks.append(self._ask_handoff(interrupted_work=False))
        if not blocks:
            return
        self.busy = True
        try:
            record = self.session.append_message("user", blocks)
            if hints:
                yield self._delivered(hints, record["seq"], "start of turn")
            yield self._observed(TurnStarted(text or ""))
            async with aclosing(self._loop()) as loop:
                async for event in loop:
                    yield self._observed(event)
        finally:
            self.busy = False

    async def _loop(self) -> AsyncIterator[Event]:
        while True:
            response: ModelResponse | None = None
            try:
                async for event in self._request():
                    if isinstance(event, ModelResponse):
                        response = event
                    yield event
            except ModelError as exc:
                self.session.record("error", message=str(exc))
                yield Failed(str(exc))
                return
            except (asyncio.CancelledError, GeneratorExit):
                # Cancelled at an await, or closed by the consumer at a yield (aclosing):
                # either way the turn stops here, and what streamed is kept.
                self._keep_partial()
                raise
            assert response is not None
            message = response.message
            if message.content:
                self.session.append_message("assistant", list(message.content))
            self._check_threshold()
            calls = message.tool_uses()
            if not calls:
                follow_up: list[Block] = []
                async for event in self._end_of_turn(follow_up):
                    yield event
                if not follow_up:
                    yield TurnEnded(response.stop_reason)
                    return
                continue
            # aclosing: a consumer that closes the turn here must reach _run_calls' handler.
            async with aclosing(self._run_calls(message, calls)) as running:
                async for event in running:
                    yield event

    async def _request(self) -> AsyncIterator[Event]:
        body, size, est = self.session.request_and_size()
        self.session.record("request", bytes=size, est_tokens=est, messages=len(body["messages"]))
        yield RequestSent(size, est, len(body["messages"]))
        self._partial = []
        async for event in self.model.stream(body):
            if isinstance(event, TextDelta):
                self._partial.append(event.text)
            elif isinstance(event, Retrying):
                self._partial = []
                self.session.record("retry", attempt=event.attempt, reason=event.reason, delay=event.delay)
            elif isinstance(event, ModelResponse):
                self.session.record("usage", stop_reason=event.stop_reason, **event.usage)
                yield UsageReported(event.usage)
            yield event

    def _keep_partial(self) -> None:
        text = "".join(self._partial)
        self._partial = []
        if text.strip():
            self.session.append_message("assistant", [TextBlock(text=text)])
        self.session.record("interrupted", partial_text=text, during="stream")

    async def _run_calls(self, message: Message, calls: list[ToolUseBlock]) -> AsyncIterator[Event]:
        words = narration_words(message, self.policy.parallel_tools)
        self._open, self._done = list(calls), []
        try:
            for call in calls:
                async for event in self._run_one(call, words.get(call.id, 0)):
                    yield event
                self._open.pop(0)
        except (asyncio.CancelledError, GeneratorExit):
            self._answer_open_calls()
            raise
        blocks: list[Block] = list(self._done)
        hints = self.session.take_hints(("steer",))
        blocks += [TextBlock(text=h.text) for h in hints]
        if self.session.handoff_wanted and not self.session.handoff_asked:
            blocks.append(self._ask_handoff(interrupted_work=True))
            yield HandoffAsked()
        record = self.session.append_message("user", blocks)
        self._done = []
        if self.policy.rolling and not self.session.spec.thinking:
            async for event in self._roll():
                yield event
        if hints:
            yield self._delivered(hints, record["seq"], f"after the {', '.join(c.name for c in calls)} result")

    async def _run_one(self, call: ToolUseBlock, words: int) -> AsyncIterator[Event]:
        required = self.policy.narration_min_words
        if words < required:
            total = self.session.counters.violations + 1
            self.session.record("violation", tool_use_id=call.id, name=call.name, words=words, required=required)
            text = self.policy.narration_rule.format(words=words, required=required)
            self._done.append(ToolResultBlock(tool_use_id=call.id, content=text, is_error=True))
            yield NarrationViolation(call, words, required, total)
            return
        yield ToolStarted(call)
        outcome, ms = await self.toolbox.run(call.name, call.input, self.ctx)
        self.session.record(
            "tool_run",
            tool_use_id=call.id,
            name=call.name,
            is_error=outcome.is_error,
            exit_code=outcome.exit_code,
            duration_ms=ms,
            **({"refused": outcome.refused} if outcome.refused else {}),
            **outcome.facts,
        )
        result = ToolResultBlock(tool_use_id=call.id, content=outcome.content or "(no output)")
        if outcome.is_error:
            result = ToolResultBlock(tool_use_id=call.id, content=outcome.content or "(error)", is_error=True)
        self._done.append(result)
        if outcome.facts.get("seam_pending"):
            self.session.seam_pending = dict(outcome.facts)
        yield ToolFinished(call, outcome.content, outcome.is_error, 0 if outcome.refused else ms, outcome.exit_code,
                           outcome.refused)

    def _answer_open_calls(self) -> None:
        if not self._open and not self._done:
            return
        answered = {r.tool_use_id for r in self._done}
        still_open = [c for c in self._open if c.id not in answered]  # closed right after a call finished
        blocks: list[Block] = list(self._done)
        blocks += [ToolResultBlock(tool_use_id=c.id, content=INTERRUPTED, is_error=True) for c in still_open]
        self.session.append_message("user", blocks)
        self.session.record("interrupted", partial_text="", during="tools", open=[c.id for c in still_open])
        self._open, self._done = [], []

    async def _roll(self) -> AsyncIterator[Event]:
        """Apply the rolling policy's batch cut when working memory overflowed."""
        assert self.policy.rolling is not None
        conv = self.session.conversation
        ids = plan_cut(conv.messages, conv.pruned, self.policy.rolling)
        if not ids:
            return
        try:
            record = prune(self.session, ids, "rolling context: working memory overflowed")
        except AuditFailed as exc:
            self.session.record("seam_failed", reason=f"rolling cut abandoned: {exc}")
            return
        if self.session.spec.thinking:
            self.session.cut_thinking("rolling cut changed the prefix")
        yield ContextPruned(record)

    async def _end_of_turn(self, follow_up: list[Block]) -> AsyncIterator[Event]:
        """Decide what happens when the model ends its turn; fills `follow_up` to go on."""
        session = self.session
        if self.policy.rolling and session.spec.thinking:
            # With thinking on, the prefix may change only between turns (FACTS §1.3).
            async for event in self._roll():
                yield event
        if session.seam_pending is not None:
            async for event in self._commit_seam(follow_up):
                yield event
        elif session.handoff_asked:
            if not session.handoff_reminded:
                session.handoff_reminded = True
                follow_up.append(TextBlock(text=self.policy.handoff_reminder))
                yield HandoffAsked(reminder=True)
            else:
                self._reset_handoff()
                session.record("handoff_failed", reason="the agent did not call micro_handoff")
                yield HandoffFailed("the agent ended its turn twice without calling micro_handoff; nothing was stripped")
        hints = session.take_hints()
        follow_up.extend(TextBlock(text=h.text) for h in hints)
        if follow_up:
            record = session.append_message("user", follow_up)
            if hints:
                yield self._delivered(hints, record["seq"], "end of turn")

    async def _commit_seam(self, follow_up: list[Block]) -> AsyncIterator[Event]:
        session = self.session
        pending = session.seam_pending or {}
        resume_work = session.handoff_interrupted_work
        self._reset_handoff()
        try:
            record = commit_seam(session, note_path=str(pending.get("note_path", "")))
        except AuditFailed as exc:
            session.record("seam_failed", reason=str(exc))
            yield HandoffFailed(f"strip abandoned, context unchanged: {exc}")
            return
        if self.policy.handoff_at_tokens:
            self._handoff_armed_at = record["after"]["est_tokens"] + self.policy.handoff_at_tokens
        if self.policy.exact_tokens:
            await self._count_seam_tokens(record)
        yield SeamCommitted(record)
        if resume_work:
            follow_up.append(TextBlock(text=self.policy.continue_after_handoff))

    async def _count_seam_tokens(self, seam: dict[str, Any]) -> None:
        """Ask the count_tokens endpoint for the exact figures on both sides of the seam."""
        count = getattr(self.model, "count_tokens", None)
        if count is None:
            return
        before, after = seam_views(self.session)
        try:
            exact = [await count(build_request(self.session.spec, m)) for m in (before, after)]
        except ModelError as exc:
            self.session.record("error", message=f"count_tokens failed: {exc}")
            return
        self.session.record("seam_tokens", seam=seam["seam"], before=exact[0], after=exact[1])

    def _reset_handoff(self) -> None:
        session = self.session
        session.seam_pending = None
        session.handoff_wanted = session.handoff_asked = session.handoff_reminded = False
        session.handoff_interrupted_work = False

    def _ask_handoff(self, interrupted_work: bool) -> TextBlock:
        self.session.handoff_asked = True
        self.session.handoff_interrupted_work = interrupted_work
        self.session.record("handoff_asked", interrupted_work=interrupted_work)
        return TextBlock(text=self.policy.handoff_request)

    def _check_threshold(self) -> None:
        armed = self._handoff_armed_at
        if armed and not self.session.handoff_wanted and self.session.context_tokens() >= armed:
            self.session.request_handoff()

    def _delivered(self, hints: list[Hint], seq: int, where: str) -> HintDelivered:
        ids = tuple(h.id for h in hints)
        self.session.record("hint_delivered", ids=list(ids), message_seq=seq, where=where)
        return HintDelivered(ids, where)

    def _observed(self, event: Event) -> Event:
        for observer in self.observers:
            observer(event)
        return event

    @property
    def in_flight(self) -> tuple[ToolUseBlock, ...]:
        """Tool calls of the current message not yet answered."""
        return tuple(self._open)

    def replace_session(self, session: Session) -> None:
        """Continue with another session (``/clear``); only between turns."""
        self.session = session
        self.ctx = ToolContext(session.root, session, self.policy.bash_timeout, self.policy.output_cap)

    def request_handoff(self) -> None:
        """The one trigger every front end uses: key, /handoff or token threshold."""
        self.session.request_handoff()
