"""A round's tool calls, run in order, and the one user message that answers them.

Each call narrated with too few words is refused with the narration rule; the others run in the
toolbox. The message carries the results first, then the human's denial reasons, the steering
hints and, when a micro-handoff is wanted, its request. What ran is kept in the round
(core/agent/round.py), so a cancellation between calls answers the rest.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any
from contextlib import aclosing

from rhapsody.core.session import records as rec
from rhapsody.core.events import Event, HandoffAsked, SubagentStarted, TodoUpdated, ToolFinished, ToolStarted
from rhapsody.core.toolbox.protocol import NoteWritten
from rhapsody.core.session.messages import Block, Message, TextBlock, ToolUseBlock
from rhapsody.core.agent.narration import narration_words
from rhapsody.core.agent.policy import Policy
from rhapsody.core.agent.round import Round
from rhapsody.core.toolbox.protocol import TodoWritten
from rhapsody.core.toolbox.orchestrator import Toolbox
from rhapsody.core.toolbox.protocol import ToolContext, ToolOutcome
from rhapsody.core.agent.turn_end import delivered, rolled, said
from rhapsody.core.agent.turn_hooks import ask_handoff, hook_notices, note_written


async def run_calls(ctx: ToolContext, toolbox: Toolbox, policy: Policy, current: Round, message: Message,
                    at_boundary: Callable[[], object] = lambda: None) -> AsyncGenerator[Event, None]:
    """Run the round's calls of `message`, then send their results as one user message; `at_boundary` judges
    the boundary the calls made (a commit, tests passing) before the message is built, so a seam it asks for
    is asked in it."""
    session, calls = ctx.session, list(current.calls)
    words = narration_words(message, policy.parallel_tools)
    narrated = {c.id for c in calls if words.get(c.id, 0) >= policy.narration_min_words}
    for batch in batches(toolbox, calls, narrated):
        if len(batch) == 1 and (batch[0].id not in narrated or not toolbox.streams(batch[0].name)):
            running = _run_one(ctx, toolbox, policy, current, batch[0], words.get(batch[0].id, 0))
        else:
            running = _run_streamed(ctx, toolbox, current, batch)
        async with aclosing(running) as events:
            async for event in events:
                yield event
        del current.calls[:len(batch)]
    at_boundary()
    blocks = current.blocks()
    hints = session.pending_hints(("steer",))
    blocks += [TextBlock(text=h.text) for h in hints]
    asked: list[Block] = []
    if session.handoff.wanted:
        asked = await ask_handoff(session, toolbox, policy.handoff_request, interrupted_work=True, joins=blocks)
        blocks += asked
        yield HandoffAsked()
    record = session.append_message("user", blocks)
    for event in current.delivered(session, record.seq):
        yield event
    if policy.rolling and not session.spec.thinking:
        pruned = rolled(session, policy)
        if pruned is not None:
            yield pruned
    if hints:
        yield delivered(session, hints, record.seq, current.landed(calls))
    for event in said(asked, record.seq):  # last, as the request comes last in the message
        yield event


async def _run_one(ctx: ToolContext, toolbox: Toolbox, policy: Policy, current: Round, call: ToolUseBlock,
                   words: int) -> AsyncGenerator[Event, None]:
    session = ctx.session
    if words < policy.narration_min_words:
        yield current.unnarrated(session, call, words, policy.narration_min_words, policy.narration_rule)
        return
    yield ToolStarted(call)
    outcome, ms = await toolbox.run(call.name, call.input, dataclasses.replace(ctx, call_id=call.id))
    for event in await _finished(ctx, toolbox, current, call, outcome, ms):
        yield event


def batches(toolbox: Toolbox, calls: list[ToolUseBlock], narrated: set[str]) -> list[list[ToolUseBlock]]:
    """The round's calls in the order they run: neighbours that may run at once together (read-only sub-agents),
    every other call alone."""
    out: list[list[ToolUseBlock]] = []
    for call in calls:
        alongside = call.id in narrated and toolbox.runs_alongside(call.name, call.input)
        if alongside and out and out[-1][-1].id in narrated and toolbox.runs_alongside(out[-1][-1].name,
                                                                                       out[-1][-1].input):
            out[-1].append(call)
        else:
            out.append([call])
    return out


async def _run_streamed(ctx: ToolContext, toolbox: Toolbox, current: Round,
                        batch: list[ToolUseBlock]) -> AsyncGenerator[Event, None]:
    """Calls that report as they run, at the same time: their progress as it comes, then each one's end in order.
    Cancelled (Esc) or closed, every call still running is cancelled and waited for, so each records its stop."""
    queue: asyncio.Queue[Event] = asyncio.Queue()
    for call in batch:
        yield ToolStarted(call)
    tasks = [asyncio.ensure_future(toolbox.run(call.name, call.input, dataclasses.replace(
        ctx, call_id=call.id, progress=queue.put_nowait))) for call in batch]
    try:
        async for event in _drained(queue, tasks):
            if isinstance(event, SubagentStarted):
                current.interrupted_as[event.call_id] = stopped_text(event)
            yield event
    except asyncio.CancelledError:  # Esc: what the calls say as they stop (a sub-agent's end) still goes out
        await _stopped(tasks)
        while not queue.empty():
            yield queue.get_nowait()
        raise
    finally:
        await _stopped(tasks)
    for call, task in zip(batch, tasks):
        outcome, ms = task.result()
        for event in await _finished(ctx, toolbox, current, call, outcome, ms):
            yield event


async def _stopped(tasks: Sequence[asyncio.Future[tuple[ToolOutcome, int]]]) -> None:
    """Every task cancelled and waited for (each records its own stop)."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _drained(queue: asyncio.Queue[Event], tasks: Sequence[asyncio.Future[tuple[ToolOutcome, int]]]
                   ) -> AsyncGenerator[Event, None]:
    """The queue's events until every task is done and the queue empty."""
    while True:
        while not queue.empty():
            yield queue.get_nowait()
        pending = [t for t in tasks if not t.done()]
        if not pending:
            return
        getter = asyncio.ensure_future(queue.get())
        waited: list[asyncio.Future[Any]] = [*pending, getter]
        try:
            await asyncio.wait(waited, return_when=asyncio.FIRST_COMPLETED)
        finally:
            getter.cancel()
        if getter.done() and not getter.cancelled():
            yield getter.result()


def stopped_text(started: SubagentStarted) -> str:
    """The result a sub-agent's call gets when Esc stops it."""
    return (f"Interrupted by the human: sub-agent {started.id} was stopped before it finished; its history is "
            f"session {started.session}. Ask the human before starting it again.")


async def _finished(ctx: ToolContext, toolbox: Toolbox, current: Round, call: ToolUseBlock, outcome: ToolOutcome,
              ms: int) -> list[Event]:
    """A call's end: its run recorded, its result kept, the events that say so."""
    session = ctx.session
    events: list[Event] = []
    current.ran(session, call, outcome, ms)
    if isinstance(outcome, NoteWritten) and not outcome.is_error:
        await note_written(session, toolbox, outcome)
    events.append(ToolFinished(call, outcome.content, outcome.is_error, 0 if outcome.refused else ms,
                               outcome.exit_code, outcome.refused, _diff(outcome.facts), _proposed(outcome.facts)))
    if isinstance(outcome, TodoWritten) and not outcome.is_error:
        events.append(TodoUpdated(tuple(i.model_dump() for i in outcome.items)))
    return [*events, *hook_notices(toolbox)]


def _diff(facts: rec.ToolFacts | None) -> str:
    """The diff a write made ('' for any other call)."""
    return (facts.diff or "") if isinstance(facts, rec.FileFacts) else ""


def _proposed(facts: rec.ToolFacts | None) -> str:
    """The diff a denied write would have made ('' for any other call)."""
    return facts.proposed_diff if isinstance(facts, rec.ProposalFacts) else ""
