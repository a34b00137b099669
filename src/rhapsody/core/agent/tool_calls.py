"""A round's tool calls, run in order, and the one user message that answers them.

Each call narrated with too few words is refused with the narration rule; the others run in the
toolbox. The message carries the results first, then the human's denial reasons, the steering
hints and, when a micro-handoff is wanted, its request. What ran is kept in the round
(core/agent/round.py), so a cancellation between calls answers the rest.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Callable

from rhapsody.core.events import Event, HandoffAsked, TodoUpdated, ToolFinished, ToolStarted
from rhapsody.core.session.handoff_state import NoteWritten, Phase
from rhapsody.core.session.messages import Block, Message, TextBlock, ToolUseBlock
from rhapsody.core.agent.narration import narration_words
from rhapsody.core.agent.policy import Policy
from rhapsody.core.agent.round import Round
from rhapsody.core.session.todo import TodoWritten
from rhapsody.core.toolbox.tools import ToolContext, Toolbox
from rhapsody.core.agent.turn_end import delivered, rolled, said
from rhapsody.core.agent.turn_hooks import ask_handoff, hook_notices, note_written


async def run_calls(ctx: ToolContext, toolbox: Toolbox, policy: Policy, current: Round, message: Message,
                    at_boundary: Callable[[], object] = lambda: None) -> AsyncGenerator[Event, None]:
    """Run the round's calls of `message`, then send their results as one user message; `at_boundary` judges
    the boundary the calls made (a commit, tests passing) before the message is built, so a seam it asks for
    is asked in it."""
    session, calls = ctx.session, list(current.calls)
    words = narration_words(message, policy.parallel_tools)
    for call in calls:
        async for event in _run_one(ctx, toolbox, policy, current, call, words.get(call.id, 0)):
            yield event
        current.calls.pop(0)
    at_boundary()
    blocks = current.blocks()
    hints = session.take_hints(("steer",))
    blocks += [TextBlock(text=h.text) for h in hints]
    asked: list[Block] = []
    if session.handoff.phase == Phase.WANTED:
        asked = await ask_handoff(session, toolbox, policy.handoff_request, interrupted_work=True, joins=blocks)
        blocks += asked
        yield HandoffAsked()
    record = session.append_message("user", blocks)
    for event in current.delivered(session, record["seq"]):
        yield event
    if policy.rolling and not session.spec.thinking:
        pruned = rolled(session, policy)
        if pruned is not None:
            yield pruned
    if hints:
        yield delivered(session, hints, record["seq"], current.landed(calls))
    for event in said(asked, record["seq"]):  # last, as the request comes last in the message
        yield event


async def _run_one(ctx: ToolContext, toolbox: Toolbox, policy: Policy, current: Round, call: ToolUseBlock,
                   words: int) -> AsyncGenerator[Event, None]:
    session = ctx.session
    if words < policy.narration_min_words:
        yield current.unnarrated(session, call, words, policy.narration_min_words, policy.narration_rule)
        return
    yield ToolStarted(call)
    outcome, ms = await toolbox.run(call.name, call.input, dataclasses.replace(ctx, call_id=call.id))
    current.ran(session, call, outcome, ms)
    if isinstance(outcome, NoteWritten) and not outcome.is_error:
        await note_written(session, toolbox, outcome)
    yield ToolFinished(call, outcome.content, outcome.is_error, 0 if outcome.refused else ms, outcome.exit_code,
                       outcome.refused, str(outcome.facts.get("diff") or ""),
                       str(outcome.facts.get("proposed_diff") or ""))
    if isinstance(outcome, TodoWritten) and not outcome.is_error:
        yield TodoUpdated(tuple(i.model_dump() for i in outcome.items))
    for notice in hook_notices(toolbox):
        yield notice
