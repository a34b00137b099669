"""What opens and closes a turn, and the turn's own state: its counters and the round under way.

The first user message of a turn carries the pending hints first, then the human's text, the
images, files and folders it names (core/attachments.py) and what UserPromptSubmit hooks add; with no words of the human, a wanted
micro-handoff is asked for instead. A hook may refuse the prompt: then nothing is sent. Once
the message is written, a checkpoint is taken and tool sources' new tools are taken in. When
the model ends its turn, the turn is over unless what the end of a turn sends (a seam's
follow-up, a reminder, queued hints: core/agent/turn_end.py) or a Stop hook sends the agent back to
work; a Stop hook may do so a bounded number of times.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

from rhapsody.core.session.checkpoints import HARNESS_PREFIX, checkpoint
from rhapsody.core.attachments import Attachment, attach as attach_files
from rhapsody.core.events import Event, FilesAttached, ImagesAttached, ModelResponse, Notice, TurnEnded, TurnStarted
from rhapsody.core.toolbox.hooks import STOP_CONTINUES
from rhapsody.core.session.images import Attached, attach, label
from rhapsody.core.session.messages import Block, Message, TextBlock
from rhapsody.core.model import Model
from rhapsody.core.agent.policy import Policy
from rhapsody.core.agent.round import Round
from rhapsody.core.session import records as rec
from rhapsody.core.session.session import Session
from rhapsody.core.agent.tool_sync import sync_tools
from rhapsody.core.toolbox.orchestrator import Toolbox
from rhapsody.core.agent.turn_end import HandoffThreshold, delivered, end_of_turn, said
from rhapsody.core.agent.turn_hooks import ask_handoff, fire, hook_notices


@dataclass
class Turn:
    """Where the turn's records start, the requests it made, how often a Stop hook sent it back to work, and
    the round under way (what a cancellation settles)."""

    start: int = 0
    steps: int = 0
    stops: int = 0
    round: Round | None = None
    refused: bool = False
    """The last request was refused for length: the strip at the window answered it already."""
    over: bool = False
    """The model ended the turn and nothing sent it back to work, or a failed request ended it."""

    def next_round(self) -> Round:
        """A new round: one more request of this turn."""
        self.steps += 1
        self.round = Round()
        return self.round


@dataclass(frozen=True)
class Opening:
    """The turn's first message (empty: nothing to send), the hints and images in it, and notices for the human."""

    blocks: list[Block]
    hints: list[rec.Hint]
    images: list[Attached]
    notices: list[Notice]
    files: tuple[Attachment, ...] = ()


async def opening(session: Session, toolbox: Toolbox, handoff_request: str, text: str | None,
                  typed: str | None = None, cap: int = 30_000, plan_note: str = "") -> Opening:
    """The first message of a turn on the human's text (None or blank: only what is pending); `typed`: the
    words the human typed when `text` holds more (a custom command's prompt), the only ones that attach images
    and files; `cap`: the most characters of one attached file (the tools' output cap); `plan_note`: what plan
    mode asks, sent before the human's text when the session was switched into it."""
    if not (text and text.strip()):
        return await _pending_only(session, toolbox, handoff_request)
    verdict = await fire(session, toolbox, "UserPromptSubmit", prompt=text)
    notices = hook_notices(toolbox)
    if verdict.blocked:
        why = verdict.reason or "no reason given"
        return Opening([], [], [], [*notices, Notice(f"prompt not sent: a UserPromptSubmit hook blocked it: {why}")])
    added = [TextBlock(text=verdict.context)] if verdict.context.strip() else []
    source = text if typed is None else typed
    images, refused = attach(source, session.root, toolbox.protected)
    files, unread = attach_files(source, session.root, toolbox.protected, cap)
    hints = session.pending_hints()
    blocks: list[Block] = [*(TextBlock(text=h.text) for h in hints), *_plan_note(session, toolbox, plan_note),
                           TextBlock(text=text),
                           *(i.block() for i in images), *(f.block() for f in files), *added]
    return Opening(blocks, hints, images, [*notices, *(Notice(line) for line in [*refused, *unread])], tuple(files))


async def begin(session: Session, toolbox: Toolbox, opened: Opening, text: str | None) -> AsyncGenerator[Event, None]:
    """Write the turn's first message, take a checkpoint, take in new tools; what the front ends show of it."""
    message = len(session.conversation.messages)
    record = session.append_message("user", opened.blocks)
    # after the message is on disk (a quit right after Enter keeps it); no file changed in between
    await checkpoint(session, toolbox.checkpointer, "turn", message=message)
    if opened.hints:
        yield delivered(session, opened.hints, record.seq, "start of turn")
    yield TurnStarted(text or "")
    for said_now in said(opened.blocks[len(opened.hints):], record.seq):  # the harness's own words: a handoff asked for
        yield said_now
    if opened.images:
        yield ImagesAttached(tuple(label(i.block().dump()) for i in opened.images))
    if opened.files:
        yield FilesAttached(tuple(f.text for f in opened.files))
    async for notice in sync_tools(session, toolbox):
        yield notice


def _plan_note(session: Session, toolbox: Toolbox, note: str) -> list[Block]:
    """Plan mode's instructions as the harness's words, once after a switch into plan mode; none when the
    system prompt has them (the session started in plan mode) or a message since the switch carried them."""
    note = note.strip()
    if toolbox.permission_mode != "plan" or not note or note in session.spec.system:
        return []
    since = max((i for i, r in enumerate(session.records) if isinstance(r, rec.PermissionMode)), default=0)
    sent = any(isinstance(b, TextBlock) and note in b.text for r in rec.of(session.records[since:], rec.MessageAdded)
               for b in r.content)
    return [] if sent else [TextBlock(text=f"{HARNESS_PREFIX} {note}")]


async def _pending_only(session: Session, toolbox: Toolbox, handoff_request: str) -> Opening:
    """A turn without the human's words: the pending hints, else the micro-handoff if one is wanted."""
    hints = session.pending_hints()
    blocks: list[Block] = [TextBlock(text=h.text) for h in hints]
    if session.handoff.wanted and not blocks:
        blocks = await ask_handoff(session, toolbox, handoff_request, interrupted_work=False)
    return Opening(blocks, hints, [], [])


async def model_ended(session: Session, toolbox: Toolbox, policy: Policy, model: Model, threshold: HandoffThreshold,
                      turn: Turn, response: ModelResponse) -> AsyncGenerator[Event, None]:
    """The model ended its turn: the end of a turn's events; the turn is over unless they, or a Stop hook, send
    the agent back to work."""
    end = await end_of_turn(session, policy, model, threshold, turn.start)
    for event in end.events:
        yield event
    turn.over = not end.follow_up and not await _stop_blocked(session, toolbox, response.message, turn)
    for notice in hook_notices(toolbox):
        yield notice
    if turn.over:
        yield TurnEnded(response.stop_reason)


async def _stop_blocked(session: Session, toolbox: Toolbox, message: Message, turn: Turn) -> bool:
    """Whether a Stop hook sends the agent back to work (counted in the turn); its reason is then the next
    user message."""
    last = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    verdict = await fire(session, toolbox, "Stop", stop_hook_active=turn.stops > 0, last_assistant_message=last)
    if not verdict.blocked or turn.stops >= STOP_CONTINUES:
        return False
    turn.stops += 1
    session.append_message("user", [TextBlock(text=verdict.reason or "A Stop hook asks you to go on.")])
    return True
