"""The agent loop: one async generator every front end drives.

`Agent.run(text)` opens a turn (core/agent/turn.py) and repeats one round (core/agent/round.py): a request
streamed from the active context (core/agent/request.py), then the narrated tool calls and one user
message with their results and the pending hints (core/agent/tool_calls.py). A request refused for
length strips first (core/agent/safety_net.py); the model's end of turn commits a noted seam or
delivers queued messages (core/agent/turn_end.py), and a handoff still wanted then gets a turn of its
own, so ctrl+o ends in a seam in every front end. `_one_turn` holds the one cancellation path:
`round.interrupt` keeps the history a valid conversation, and the `Interrupted` it returns is
yielded, or put on the agent's one event queue (`events`) when the consumer closed the stream.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING

from rhapsody.core.agent import ops
from rhapsody.core.agent.inbox import Outbox, Rewinding, Work, handle
from rhapsody.core.toolbox.approval import HumanApprover
from rhapsody.core.session.checkpoints import end_checkpoint
from rhapsody.core.events import Event, TurnEnded
from rhapsody.core.accounting.cache_ttl import TtlChoice
from rhapsody.core.model import Model
from rhapsody.core.pricing import price_of
from rhapsody.core.accounting.natural_seam import Boundary, CheckpointSeam
from rhapsody.core.agent.observers import Observer, Observers
from rhapsody.core.agent.policy import Policy, limit_reached
from rhapsody.core.agent.request import stream_request
from rhapsody.core.agent.round import cancel_handoff, interrupt
from rhapsody.core.agent.safety_net import request_failed
from rhapsody.core.session.session import Session
from rhapsody.core.agent.tool_calls import run_calls
from rhapsody.core.toolbox.orchestrator import Toolbox
from rhapsody.core.toolbox.protocol import EditorFiles, ToolContext
from rhapsody.core.access.permissions import Mode
from rhapsody.core.toolbox.plan_review import HumanReviewer
from rhapsody.core.agent.turn import Opening, Turn, begin, model_ended, opening
from rhapsody.core.agent.turn_end import HandoffThreshold, handoff_left
from rhapsody.core.session import records as rec

if TYPE_CHECKING:
    from rhapsody.core.agent.delegation import Delegation


class Agent:
    """Runs turns of one session against one model with one toolbox.

    `observers` see every event, whichever front end drives the loop (memory logs,
    metrics); they run on a worker thread, and a turn ends once they have seen its events.
    """

    def __init__(self, session: Session, model: Model, toolbox: Toolbox, policy: Policy,
                 observers: Sequence[Observer] = (), rewinder: Rewinding | None = None,
                 delegation: Delegation | None = None) -> None:
        self.session = session
        self.delegation = delegation
        """What the agent lends the sub-agents its calls start (core/agent/subagent.py); None: it starts none."""
        self.model = model
        self.toolbox = toolbox
        self.policy = policy
        self.observers = Observers(observers)
        self.ctx = ToolContext(session.root, session, policy.bash_timeout, policy.output_cap, delegation=delegation)
        self.busy = False
        self._threshold = HandoffThreshold(policy.handoff_at_tokens, policy.handoff_at_share, policy.context_window)
        self._folds(session)
        session.figures.window_setting = policy.context_window  # the status bar's share, of the same window
        self.outbox = Outbox()
        """The one queue every event leaves by, once a front end reads it (`events`)."""
        self.work = Work(self.outbox)
        self.rewinder = rewinder
        """Goes back to before a message (None: checkpoints are off)."""
        self.questions_as_events()

    def submit(self, op: ops.Op) -> ops.Receipt:
        """The one way a front end changes the agent (core/agent/ops.py); what it starts says what it does on
        `events`."""
        return handle(self, op)

    def questions_as_events(self) -> None:
        """From now on the human's approver and plan reviewer put their questions on this agent's one queue (at
        its making, and again when work is submitted: a toolbox another agent was made with asks this one's)."""
        if isinstance(self.toolbox.approver, HumanApprover):
            self.toolbox.approver.emit = self.outbox.put
        if isinstance(self.toolbox.reviewer, HumanReviewer):
            self.toolbox.reviewer.emit = self.outbox.put

    async def events(self) -> AsyncGenerator[Event, None]:
        """Every event, in order, as `submit`'s work and the permission questions produce them; endless."""
        async for event in self.outbox:
            yield event

    async def settled(self) -> None:
        """Wait until the work under way (a turn, the human's command) is over, however it ends."""
        await self.work.settled()

    @property
    def permission_mode(self) -> Mode:
        """The permission mode calls are decided in now (`SetMode` switches it)."""
        return self.toolbox.permission_mode

    def read_denied(self) -> tuple[str, ...]:
        """The read deny rules: files a question never shows."""
        return self.toolbox.rules.read_denied()

    def start_sources(self) -> list[str]:
        """Start the tool sources (MCP servers) in the background; notices for the human."""
        return list(self.toolbox.start_sources())

    def edit_files_with(self, files: EditorFiles) -> None:
        """The editor's files, which the file tools read and write through (an editor front end that offers them)."""
        self.toolbox.files = files

    @property
    def working(self) -> bool:
        """Whether a turn or the human's command is under way."""
        return self.busy or self.work.running

    async def run(self, text: str | None = None, typed: str | None = None) -> AsyncGenerator[Event, None]:
        """One turn: the human's text (plus any pending hints), then the tool loop; then, when a handoff is still
        wanted, the turn that asks for it (core/agent/turn_end.py `handoff_left`), so every front end ends ctrl+o in a seam.
        `typed`: what the human typed when `text` holds more (a custom command's prompt): only its images and files attach."""
        if text and text.strip() and self._at_boundary(Boundary.HUMAN):  # the seam before the human's words
            async with aclosing(self._one_turn(None)) as turn:
                async for event in turn:
                    yield event
        ended = False
        async with aclosing(self._one_turn(text, typed)) as turn:
            async for event in turn:
                ended = _ended(event)
                yield event
        handoff, events = handoff_left(self.session)
        for event in events:
            yield self._observed(event)
        if events:
            await self._drain_observers()
        # A turn of its own follows for a handoff still wanted, and for a line typed after the turn last looked
        # for hints while it was still closing (a Stop hook, the observers): the agent was working, so the line
        # became a hint, and no boundary was left to deliver it at. No await comes between the last look and the
        # work's end, so a later line finds the agent idle and is a new turn.
        more = handoff or ended and bool(self.session.pending_hints())
        while more:
            ended = False
            async with aclosing(self._one_turn(None)) as turn:
                async for event in turn:
                    ended = _ended(event)
                    yield event
            more = ended and bool(self.session.pending_hints())

    async def _one_turn(self, text: str | None, typed: str | None = None) -> AsyncGenerator[Event, None]:
        """One turn, as `run` describes it, without what follows it."""
        opened = await opening(self.session, self.toolbox, self.policy.handoff_request, text, typed,
                               cap=self.policy.output_cap, plan_note=self.policy.plan_note)
        for notice in opened.notices:
            yield notice
        if not opened.blocks:
            return
        self.busy = True
        turn = Turn(len(self.session.records))
        try:
            async with aclosing(self._turn(turn, opened, text)) as events:
                async for event in events:
                    yield self._observed(event)
        except (asyncio.CancelledError, GeneratorExit) as exc:
            # Cancelled at an await, or closed by the consumer at a yield: the one place a turn stops early.
            interruption: list[Event] = [interrupt(self.session, turn.round), *cancel_handoff(self.session)]
            if not isinstance(exc, asyncio.CancelledError):  # a closed generator may not yield: the queue says it
                for event in interruption:
                    self.outbox.put(self._observed(event))
                raise
            for event in interruption:
                yield self._observed(event)
            raise
        finally:
            self.busy = False
            end_checkpoint(self.session, self.toolbox.checkpointer)

    async def _turn(self, turn: Turn, opened: Opening, text: str | None) -> AsyncGenerator[Event, None]:
        """The turn's first message, its rounds, then the observers' turn to see them all."""
        async for event in begin(self.session, self.toolbox, opened, text):
            yield event
        while not turn.over:
            limit = limit_reached(self.policy, self.session, turn.steps)
            if limit is not None:
                yield limit
                yield TurnEnded("limit")
                break
            async with aclosing(self._round(turn)) as events:
                async for event in events:
                    yield event
        await self._drain_observers()

    async def _drain_observers(self) -> None:
        """The observers have seen every event so far; an observer's error is recorded, never raised."""
        for error in await self.observers.drain():
            self.session.append(rec.Error(message=f"observer: {error}"))

    async def _round(self, turn: Turn) -> AsyncGenerator[Event, None]:
        """One request and what its answer asks for: the calls run, the end of the turn, or the failure."""
        current = turn.next_round()
        ttl = self._ttl.ttl(self.session.records)
        async for event in stream_request(self.session, self.model, self.policy.context_window, current, ttl):
            yield event
        if current.failure is not None:
            netted = request_failed(self.session, self.policy, self._threshold, current.failure, turn.refused)
            turn.refused, turn.over = True, not netted.go_on
            for event in netted.events:
                yield event
            return
        turn.refused = False
        response = current.answered(self.session)
        self._threshold.check(self.session)
        if not current.calls:
            self._at_boundary()  # the model ended its turn
            async for event in model_ended(self.session, self.toolbox, self.policy, self.model, self._threshold,
                                           turn, response):
                yield event
            return
        # aclosing: a consumer that closes the turn here closes the calls before the round is settled.
        async with aclosing(run_calls(self.ctx, self.toolbox, self.policy, current, response.message,
                                      self._at_boundary)) as running:
            async for event in running:
                yield event

    def _at_boundary(self, boundary: Boundary | None = None) -> bool:
        """The `checkpoint` policy judges the boundary just reached (None: what the records show); True when
        it asked for a seam there."""
        return self._checkpoint is not None and self._checkpoint.check(self.session, boundary)

    def _observed(self, event: Event) -> Event:
        self.observers.put(self.session, event)
        return event

    def replace_session(self, session: Session) -> list[str]:
        """Continue with another session (``/clear``, ``/resume``); only between turns. Returns the rules allowed
        "for this session", which no longer apply: they meant the one left."""
        forgotten = self.toolbox.rules.session_allow[:]
        self.toolbox.rules.session_allow.clear()
        self.session = session
        self.ctx = ToolContext(session.root, session, self.policy.bash_timeout, self.policy.output_cap,
                               delegation=self.delegation)
        self._folds(session)
        return forgotten

    def _folds(self, session: Session) -> None:
        """The folds over the session's records the loop keeps: the cache lifetime and the checkpoint policy."""
        self._ttl = TtlChoice(self.policy.cache_ttl, price_of(session.spec.model)[0].read_mult)
        self._checkpoint = (CheckpointSeam(lambda s: self._ttl.seconds(s.records)) if self.policy.checkpoint_seams
                            else None)

    def request_handoff(self) -> bool:
        """The one trigger every front end uses: key, /handoff or token threshold.

        False when a handoff is already under way.
        """
        return self.session.request_handoff()


def _ended(event: Event) -> bool:
    """Whether `event` says the model ended its turn of its own accord (not at a limit; a failure or an
    interruption says otherwise)."""
    return isinstance(event, TurnEnded) and event.stop_reason != "limit"
