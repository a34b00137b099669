"""What opens a turn, and the turn's own state beyond its rounds (core/round.py).

The first user message of a turn carries the pending hints first, then the human's text, the
images it names and what UserPromptSubmit hooks add; with no words of the human, a wanted
micro-handoff is asked for instead. A hook may refuse the prompt: then nothing is sent. At the
end of a turn a Stop hook may send the agent back to work, a bounded number of times.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from dataclasses import dataclass

from rhapsody.core.events import Notice
from rhapsody.core.handoff_state import Phase
from rhapsody.core.images import Attached, attach
from rhapsody.core.hooks import STOP_CONTINUES
from rhapsody.core.messages import Block, Message, TextBlock
from rhapsody.core.session import Hint, Session
from rhapsody.core.tools import Toolbox
from rhapsody.core.turn_hooks import ask_handoff, fire, hook_notices


@dataclass
class Turn:
    """Where the turn's records start, the requests it made, and how often a Stop hook sent it back to work."""

    start: int = 0
    steps: int = 0
    stops: int = 0


@dataclass(frozen=True)
class Opening:
    """The turn's first message (empty: nothing to send), the hints and images in it, and notices for the human."""

    blocks: list[Block]
    hints: list[Hint]
    images: list[Attached]
    notices: list[Notice]


async def opening(session: Session, toolbox: Toolbox, handoff_request: str, text: str | None) -> Opening:
    """The first message of a turn on the human's text (None or blank: only what is pending)."""
    if not (text and text.strip()):
        return await _pending_only(session, toolbox, handoff_request)
    verdict = await fire(session, toolbox, "UserPromptSubmit", prompt=text)
    notices = hook_notices(toolbox)
    if verdict.blocked:
        why = verdict.reason or "no reason given"
        return Opening([], [], [], [*notices, Notice(f"prompt not sent: a UserPromptSubmit hook blocked it: {why}")])
    added = [TextBlock(text=verdict.context)] if verdict.context.strip() else []
    images, refused = attach(text, session.root)
    hints = session.take_hints()
    blocks: list[Block] = [*(TextBlock(text=h.text) for h in hints), TextBlock(text=text),
                           *(i.block() for i in images), *added]
    return Opening(blocks, hints, images, [*notices, *(Notice(line) for line in refused)])


async def _pending_only(session: Session, toolbox: Toolbox, handoff_request: str) -> Opening:
    """A turn without the human's words: the pending hints, else the micro-handoff if one is wanted."""
    hints = session.take_hints()
    blocks: list[Block] = [TextBlock(text=h.text) for h in hints]
    if session.handoff.phase == Phase.WANTED and not blocks:
        blocks = await ask_handoff(session, toolbox, handoff_request, interrupted_work=False)
    return Opening(blocks, hints, [], [])


async def stop_blocked(session: Session, toolbox: Toolbox, message: Message, turn: Turn) -> bool:
    """Whether a Stop hook sends the agent back to work (counted in the turn); its reason is then the next
    user message."""
    last = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    verdict = await fire(session, toolbox, "Stop", stop_hook_active=turn.stops > 0, last_assistant_message=last)
    if not verdict.blocked or turn.stops >= STOP_CONTINUES:
        return False
    turn.stops += 1
    session.append_message("user", [TextBlock(text=verdict.reason or "A Stop hook asks you to go on.")])
    return True
