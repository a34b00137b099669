"""What `Agent.submit` does with each operation, and the one queue every event leaves by.

An operation acts at once (a hint is on disk, a mode switched) and says so in its `Receipt`;
what takes time runs as the agent's own task: a turn (`UserTurn`, `QueueMessage` when idle, a
handoff requested when idle) or the human's shell command. Their events, the human's questions
(`ApprovalAsked`, `PlanReviewAsked`) and what a turn closed early could not say all go into `Outbox`, the one way out;
each piece of work ends with `Idle`. `Interrupt` cancels the running turn, which is the loop's one
cancellation path (core/agent/loop.py `_one_turn`), as Esc was.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Protocol, assert_never

from rhapsody.core.agent import ops
from rhapsody.core.agent.prompt_shell import MARK, expanded_turn
from rhapsody.core.agent.shell import run_human_command
from rhapsody.core.events import Event, Idle, Interrupted
from rhapsody.core.session import records as rec
from rhapsody.core.session.handoff import undo_seam
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.approval import Approval
from rhapsody.core.toolbox.orchestrator import Toolbox
from rhapsody.core.toolbox.plan_review import HumanReviewer
from rhapsody.core.toolbox.protocol import PlanReview, ToolContext

BUSY_TURN = "the agent is working: a line typed now is a hint (steer), or queued for the end of the turn"
CHECKPOINTS_OFF = "checkpoints are off (checkpoints = false in the config): nothing to rewind to"


class Rewinding(Protocol):
    """Goes back to before a message (the rewind package provides it, over the checkpoint store)."""

    def __call__(self, session: Session, point: int, what: ops.RewindWhat, force: bool) -> ops.Receipt:
        """Rewind `session` to before point `point`; files changed outside rhapsody only with `force`."""
        ...


class Outbox:
    """The agent's one queue of events, in the order they happened; a front end reads it with `get`."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Event] | None = None

    @property
    def queue(self) -> asyncio.Queue[Event]:
        """The queue, made in the running event loop on first use."""
        if self._queue is None:
            self._queue = asyncio.Queue()
        return self._queue

    def put(self, event: Event) -> None:
        """Add one event; never waits."""
        self.queue.put_nowait(event)

    async def get(self) -> Event:
        """The next event, waiting for one."""
        return await self.queue.get()

    def ready(self) -> list[Event]:
        """The events waiting now, taken; never waits."""
        taken: list[Event] = []
        while not self.queue.empty():
            taken.append(self.queue.get_nowait())
        return taken

    async def __aiter__(self) -> AsyncIterator[Event]:
        while True:
            yield await self.get()


class Work:
    """The agent's task under way (a turn or a shell command) and the events it sends to the outbox."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox
        self.task: asyncio.Task[None] | None = None
        self._beside: set[asyncio.Task[None]] = set()
        self.interrupted = False
        """Whether the running task has said `Interrupted` (so a cancel before it could is said for it)."""

    @property
    def running(self) -> bool:
        """Whether a task is under way."""
        return self.task is not None and not self.task.done()

    def start(self, events: AsyncGenerator[Event, None]) -> None:
        """Run `events` as the agent's task, each into the outbox, then `Idle`."""
        self.interrupted = False
        self.task = asyncio.get_running_loop().create_task(self._pump(events))
        self.task.add_done_callback(self._done)

    async def _pump(self, events: AsyncGenerator[Event, None]) -> None:
        # Cancelled at an await inside `events`: the loop yields its Interrupted first, which comes here.
        async with aclosing(events) as stream:
            async for event in stream:
                self.interrupted = self.interrupted or isinstance(event, Interrupted)
                self.outbox.put(event)

    def _done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() and not self.interrupted:  # cancelled before the loop could say so itself
            self.outbox.put(Interrupted(""))
        elif not task.cancelled() and task.exception() is not None:
            from rhapsody.core.events import Failed

            self.outbox.put(Failed(str(task.exception())))
        self.outbox.put(Idle())

    def beside(self, events: AsyncGenerator[Event, None]) -> None:
        """Run `events` beside the task under way (a shell command during a turn); Esc does not stop it."""
        task = asyncio.get_running_loop().create_task(self._send(events))
        self._beside.add(task)  # held, so the task is not collected before it ends
        task.add_done_callback(self._beside.discard)

    async def _send(self, events: AsyncGenerator[Event, None]) -> None:
        async with aclosing(events) as stream:
            async for event in stream:
                self.outbox.put(event)

    async def settled(self) -> None:
        """Wait until the task under way, if any, is over (cancelled, failed or done)."""
        if self.task is not None:
            await asyncio.wait([self.task])

    def cancel(self) -> bool:
        """Cancel the task under way; False when none is."""
        if not self.running:
            return False
        assert self.task is not None
        self.task.cancel()
        return True


class OpTarget(Protocol):
    """What the operations act on: the agent's parts, as core/agent/loop.py's `Agent` has them (named here so the
    two modules form no circle)."""

    session: Session
    toolbox: Toolbox
    ctx: ToolContext
    outbox: Outbox
    work: Work
    rewinder: Rewinding | None

    @property
    def working(self) -> bool:
        """Whether a turn or the human's command is under way."""

    def run(self, text: str | None = None, typed: str | None = None) -> AsyncGenerator[Event, None]:
        """One turn's events."""

    def request_handoff(self) -> bool:
        """Ask for the micro-handoff; False when one is under way."""

    def questions_as_events(self) -> None:
        """The human's questions go on the one queue from now on."""


def handle(agent: OpTarget, op: ops.Op) -> ops.Receipt:
    """Act on one operation (see the module's docstring); the match is exhaustive."""
    match op:
        case ops.UserTurn():
            return _turn(agent, op.text or None, op.typed, op.shell)
        case ops.QueueMessage():
            if agent.working:
                return _hint(agent, op.text, "queue")
            return _turn(agent, op.text, op.typed)
        case ops.AddHint():
            return _hint(agent, op.text, op.mode)
        case ops.Interrupt():
            return ops.Receipt(agent.work.cancel())
        case ops.ApprovalAnswer():
            return ops.Receipt(_answer(agent, op))
        case ops.PlanAnswer():
            return ops.Receipt(_plan_answer(agent, op))
        case ops.SetMode():
            agent.toolbox.permission_mode = op.mode
            agent.session.append(rec.PermissionMode(mode=op.mode))
            return ops.Receipt()
        case ops.RequestHandoff():
            return _handoff(agent)
        case ops.UndoHandoff():
            return _undo(agent)
        case ops.Rewind():
            return _rewind(agent, op)
        case ops.ShellCommand():
            return _shell(agent, op.command)
        case ops.AddNotice():
            agent.session.append(rec.NoticeShown(text=op.text, shown="as is", error=True if op.error else None,
                                                 command=True if op.command else None))
            return ops.Receipt()
        case _:
            assert_never(op)


def _turn(agent: OpTarget, text: str | None, typed: str | None, shell: bool = False) -> ops.Receipt:
    if agent.working:
        return ops.Receipt(False, BUSY_TURN)
    agent.questions_as_events()
    agent.work.start(expanded_turn(agent, text, typed) if shell and text and MARK.search(text) else agent.run(text, typed))
    return ops.Receipt(started=True)


def _hint(agent: OpTarget, text: str, mode: str) -> ops.Receipt:
    hint = agent.session.hint(text, mode)
    where = "end of turn" if mode == "queue" else "next tool boundary"
    return ops.Receipt(text=f"[{hint.id} pending: {where}]", id=hint.id)


def _answer(agent: OpTarget, op: ops.ApprovalAnswer) -> bool:
    from rhapsody.core.toolbox.approval import HumanApprover

    approver = agent.toolbox.approver
    if not isinstance(approver, HumanApprover):
        return False
    question = approver.asked.get(op.id)
    rules = question.rules if question is not None else ()
    match op.decision:
        case "once":
            approval = Approval(True)
        case "always":
            approval = Approval(True, remember=rules)
        case "deny":
            approval = Approval(False, words=op.reason)
    return approver.answer(op.id, approval)


def _plan_answer(agent: OpTarget, op: ops.PlanAnswer) -> bool:
    reviewer = agent.toolbox.reviewer
    if not isinstance(reviewer, HumanReviewer):
        return False
    return reviewer.answer(op.id, PlanReview(op.decision == "approve", op.plan, op.mode, op.feedback))


def _handoff(agent: OpTarget) -> ops.Receipt:
    if not agent.request_handoff():
        return ops.Receipt(False, "a micro-handoff is already under way")
    if agent.working:
        return ops.Receipt(text="micro-handoff requested: at the next tool boundary, or right after this turn ends")
    agent.questions_as_events()
    agent.work.start(agent.run(None))
    return ops.Receipt(text="micro-handoff requested", started=True)


def _undo(agent: OpTarget) -> ops.Receipt:
    if agent.working:
        return ops.Receipt(False, "wait for the turn to end before undoing a seam")
    record = undo_seam(agent.session)
    if record is None:
        return ops.Receipt(False, "no seam to undo")
    return ops.Receipt(reload=True, record=record)


def _rewind(agent: OpTarget, op: ops.Rewind) -> ops.Receipt:
    if agent.rewinder is None:
        return ops.Receipt(False, CHECKPOINTS_OFF)
    if agent.working:
        return ops.Receipt(False, "wait for the turn to end before rewinding")
    return agent.rewinder(agent.session, op.point, op.what, op.force)


def _shell(agent: OpTarget, command: str) -> ops.Receipt:
    async def ran(beside: bool) -> AsyncGenerator[Event, None]:
        event = await run_human_command(agent.session, agent.toolbox, agent.ctx, command)
        yield dataclasses.replace(event, in_turn=beside and agent.work.running)  # the turn still to read it

    if agent.work.running:  # a turn runs: the command runs beside it, its output queued for the turn's end
        agent.work.beside(ran(True))
        return ops.Receipt()
    agent.work.start(ran(False))
    return ops.Receipt(started=True)

