"""The agent loop: one async generator every front end drives.

`Agent.run(text)` appends the user's message (core/turn.py), then repeats one round: build
the request from the active context and stream the answer (core/request.py), run the tool
calls that were narrated and append one user message with the tool results first and the
pending hints after them (core/tool_calls.py). At the end of the turn it commits a pending
micro-handoff seam, delivers queued messages, or stops (core/turn_end.py); a handoff still
wanted once the turn is over is asked for in a turn of its own, so ctrl+o ends in a seam in
every front end; between turns it takes in tool sources' new tools (core/tool_sync.py).

Cancellation (Esc) reaches the generator at an await, or as GeneratorExit at a yield when
the consumer closes it; either way one handler settles the current round (core/round.py):
it keeps what streamed, answers every open tool call with an "interrupted" result and
re-raises, so the history is always a valid conversation; a handoff request waiting for its
note ends with it. A cancelled turn yields `Interrupted` (and `HandoffFailed` for such a
request) as its last events before the cancellation goes on; a closed one keeps them for the
front end (`take_unsaid`). `max_steps_per_turn` and `max_cost_usd` end a turn with
`LimitsExceeded` before a request that would pass them. The micro-handoff's state lives in
the session (core/handoff_state.py); the loop only moves it along.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing

from rhapsody.core.checkpoints import checkpoint, take
from rhapsody.core.errors import ContextTooLong, ModelError, StorageError
from rhapsody.core.events import (
    Event,
    Failed,
    ImagesAttached,
    ModelResponse,
    TurnEnded,
    TurnStarted,
)
from rhapsody.core.images import label
from rhapsody.core.messages import ToolUseBlock
from rhapsody.core.model import Model
from rhapsody.core.observers import Observer, Observers
from rhapsody.core.policy import Policy, limit_reached
from rhapsody.core.request import stream_request
from rhapsody.core.round import Round, cancel_handoff, interrupt
from rhapsody.core.safety_net import refused_again, strip_first
from rhapsody.core.session import Session
from rhapsody.core.tool_calls import run_calls
from rhapsody.core.tool_sync import sync_tools
from rhapsody.core.tools import ToolContext, Toolbox
from rhapsody.core.turn import Turn, opening, stop_blocked
from rhapsody.core.turn_end import HandoffThreshold, delivered, end_of_turn, handoff_left, said
from rhapsody.core.turn_hooks import hook_notices
from rhapsody.core.window import after_last_seam


class Agent:
    """Runs turns of one session against one model with one toolbox.

    `observers` see every event, whichever front end drives the loop (memory logs,
    metrics); they run on a worker thread, and a turn ends once they have seen its events.
    """

    def __init__(self, session: Session, model: Model, toolbox: Toolbox, policy: Policy,
                 observers: Sequence[Observer] = ()) -> None:
        self.session = session
        self.model = model
        self.toolbox = toolbox
        self.policy = policy
        self.observers = Observers(observers)
        self.ctx = ToolContext(session.root, session, policy.bash_timeout, policy.output_cap)
        self.busy = False
        self._round: Round | None = None
        """The round under way: what a cancellation settles."""
        self._threshold = HandoffThreshold(policy.handoff_at_tokens, policy.handoff_at_share, policy.context_window)
        self._turn = Turn()
        self.unsaid: list[Event] = []
        """What a turn closed by its consumer could not say (see `take_unsaid`)."""

    async def run(self, text: str | None = None) -> AsyncGenerator[Event, None]:
        """One turn: the human's text (plus any pending hints), then the tool loop; then, when a handoff is still
        wanted, the turn that asks for it (core/turn_end.py `handoff_left`), so every front end ends ctrl+o in a seam."""
        self.unsaid = []
        async with aclosing(self._one_turn(text)) as turn:
            async for event in turn:
                yield event
        handoff, events = handoff_left(self.session)
        for event in events:
            yield self._observed(event)
        if events:
            await self._drain_observers()
        if handoff:
            async with aclosing(self._one_turn(None)) as turn:
                async for event in turn:
                    yield event

    def take_unsaid(self) -> list[Event]:
        """What the last turn, closed by its consumer at a yield, could not say (`Interrupted`, a handoff
        cancelled): the front end shows these itself."""
        unsaid, self.unsaid = self.unsaid, []
        return unsaid

    async def _one_turn(self, text: str | None) -> AsyncGenerator[Event, None]:
        """One turn, as `run` describes it, without what follows it."""
        opened = await opening(self.session, self.toolbox, self.policy.handoff_request, text)
        for notice in opened.notices:
            yield notice
        blocks, hints, images = opened.blocks, opened.hints, opened.images
        if not blocks:
            return
        self.busy = True
        self._turn = Turn(len(self.session.records))
        self._round = None
        try:
            message = len(self.session.conversation.messages)
            record = self.session.append_message("user", blocks)
            # after the message is on disk (a quit right after Enter keeps it); no file changed in between
            await checkpoint(self.session, self.toolbox.checkpointer, "turn", message=message)
            if hints:
                yield self._observed(delivered(self.session, hints, record["seq"], "start of turn"))
            yield self._observed(TurnStarted(text or ""))
            for said_now in said(blocks[len(hints):], record["seq"]):  # the harness's own words: a handoff asked for
                yield self._observed(said_now)
            if images:
                yield self._observed(ImagesAttached(tuple(label(i.block().dump()) for i in images)))
            async for notice in sync_tools(self.session, self.toolbox):
                yield self._observed(notice)
            try:
                async with aclosing(self._loop()) as loop:
                    async for event in loop:
                        yield self._observed(event)
                await self._drain_observers()
            except (asyncio.CancelledError, GeneratorExit) as exc:
                # Cancelled at an await, or closed by the consumer at a yield: the turn stops here.
                interruption: list[Event] = [interrupt(self.session, self._round), *cancel_handoff(self.session)]
                self._round = None
                if not isinstance(exc, asyncio.CancelledError):  # a closed generator may not yield
                    self.unsaid = interruption
                    raise
                for event in interruption:
                    yield self._observed(event)
                raise
        finally:
            self.busy = False
            self._end_checkpoint()

    def _end_checkpoint(self) -> None:
        """The tree as the turn left it, also when cancelled (a sync call cannot be cancelled). A history that
        cannot be written (a full disk) must not hide the error that ended the turn: the next append says it."""
        if self.toolbox.checkpointer is not None:
            with contextlib.suppress(StorageError):
                take(self.session, self.toolbox.checkpointer, "end")

    async def _loop(self) -> AsyncGenerator[Event, None]:
        refused = ""  # the length refusal the last strip at the window answered
        while True:
            limit = limit_reached(self.policy, self.session, self._turn.steps)
            if limit is not None:
                yield limit
                yield TurnEnded("limit")
                return
            self._turn.steps += 1
            response: ModelResponse | None = None
            failure: ContextTooLong | ModelError | None = None
            current = self._round = Round()
            try:
                async for event in stream_request(self.session, self.model, self.policy.context_window, current):
                    if isinstance(event, ModelResponse):
                        response = event
                    yield event
            except (ContextTooLong, ModelError) as exc:
                failure = exc
            current.streaming = False
            if isinstance(failure, ContextTooLong):
                net = refused_again(self.session, str(failure)) if refused else \
                    strip_first(self.session, self.policy, str(failure))
                refused = str(failure)
                for event in net.events:
                    yield event
                if not net.go_on:
                    return
                self._threshold.rearm(after_last_seam(self.session.records))
                continue
            if failure is not None:
                self.session.record("error", message=str(failure))
                yield Failed(str(failure))
                return
            assert response is not None
            refused = ""
            message = response.message
            if message.content:
                self.session.append_message("assistant", list(message.content))
            self._threshold.check(self.session)
            calls = message.tool_uses()
            if not calls:
                end = await end_of_turn(self.session, self.policy, self.model, self._threshold, self._turn.start)
                for event in end.events:
                    yield event
                if not end.follow_up and not await stop_blocked(self.session, self.toolbox, message, self._turn):
                    for notice in hook_notices(self.toolbox):
                        yield notice
                    yield TurnEnded(response.stop_reason)
                    return
                for notice in hook_notices(self.toolbox):
                    yield notice
                continue
            # aclosing: a consumer that closes the turn here closes the calls before the round is settled.
            current.run_calls(calls)
            async with aclosing(run_calls(self.ctx, self.toolbox, self.policy, current, message)) as running:
                async for event in running:
                    yield event

    def _observed(self, event: Event) -> Event:
        self.observers.put(self.session, event)
        return event

    async def _drain_observers(self) -> None:
        for error in await self.observers.drain():
            self.session.record("error", message=f"observer: {error}")

    @property
    def in_flight(self) -> tuple[ToolUseBlock, ...]:
        """Tool calls of the current message not yet answered."""
        return tuple(self._round.calls) if self._round else ()

    def replace_session(self, session: Session) -> None:
        """Continue with another session (``/clear``); only between turns."""
        self.session = session
        self.ctx = ToolContext(session.root, session, self.policy.bash_timeout, self.policy.output_cap)

    def request_handoff(self) -> bool:
        """The one trigger every front end uses: key, /handoff or token threshold.

        False when a handoff is already under way.
        """
        return self.session.request_handoff()

