"""The hooks the loop fires within a turn, and the notices hooks leave for the front ends.

PreHandoff and PostHandoff are fired here, and each hook with the session's payload (`fire`, which builds
it only when a hook listens);
the tool events (PreToolUse, PostToolUse, Notification) are the toolbox's (core/toolbox/orchestrator.py).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import Sequence

from rhapsody.core.session import handoff_state
from rhapsody.core.session.context import measure_messages
from rhapsody.core.events import Notice
from rhapsody.core.toolbox.protocol import NoteWritten
from rhapsody.core.toolbox.hooks import NOTHING, HookVerdict, payload
from rhapsody.core.session.messages import Block, Message, TextBlock
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.orchestrator import Toolbox


async def fire(session: Session, toolbox: Toolbox, event: str, **fields: object) -> HookVerdict:
    """Run the user's hooks for `event`, with the session's payload (none listening: nothing is built)."""
    if not toolbox.hooks.wants(event):
        return NOTHING
    return await toolbox.hooks.fire(session, event, payload(session, event, toolbox.permission_mode, **fields))


def hook_notices(toolbox: Toolbox) -> list[Notice]:
    """What the hooks said for the human since last asked."""
    return [Notice(line) for line in toolbox.hooks.notices()]


async def ask_handoff(session: Session, toolbox: Toolbox, request: str, interrupted_work: bool,
                      joins: Sequence[Block] = ()) -> list[Block]:
    """Ask the model for its field note: the request, and what PreHandoff hooks add; `joins`: the blocks the
    request follows in the same user message (tool results, hints), counted in the context it was asked in."""
    handoff_state.ask(session, interrupted_work, est_tokens=context_with(session, joins))
    verdict = await fire(session, toolbox, "PreHandoff", interrupted_work=interrupted_work)
    extra: list[Block] = [TextBlock(text=verdict.context)] if verdict.context.strip() else []
    return [TextBlock(text=request), *extra]


def context_with(session: Session, blocks: Sequence[Block]) -> int:
    """The estimated context once `blocks` join it as the next user message (none: the context as it is)."""
    messages = session.messages()
    if blocks:
        messages = [*messages, Message(role="user", content=list(blocks))]
    return measure_messages(session.spec, messages)[1]


async def note_written(session: Session, toolbox: Toolbox, outcome: NoteWritten) -> None:
    """The field note is saved: the handoff moves on, and PostHandoff hooks get the note."""
    handoff_state.noted(session, outcome.note_path, outcome.seam, outcome.note)
    path = session.root / outcome.note_path
    await fire(session, toolbox, "PostHandoff", note_path=str(path), note=outcome.note, seam=outcome.seam)
