"""Room for the field note at the window: how much of the oldest tool traffic must leave first.

When a request is refused for length, the note is not written blind: the oldest calls leave the
view first (a `prune` record, audited like a strip), only as many as the request for the note
needs to fit with room for the note, so the note is written over what is left, the latest
results included (core/agent/safety_net.py). `room_for_note` finds that cut:

- the window is the refusal's own figure when it says one (Anthropic: "… N tokens > M maximum",
  OpenAI-compatible: "maximum context length is M tokens … resulted in N tokens"), else
  rhapsody's (core/window.py);
- the estimate is calibrated by the refused request: its tokens as the refusal counted them over
  rhapsody's estimate of it (else the last reported usage, core/window.py);
- a cut falls between rounds only (after a user message, before an assistant one), never in the
  latest round, and keeps every call of the handoff; the smallest cut whose view, with the
  request for the note and `headroom` for what the handoff adds, fits is taken.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rhapsody.core.session.context import measure_messages
from rhapsody.core.session.messages import Message, TextBlock, ToolUseBlock
from rhapsody.core.session.session import Session
from rhapsody.core.session.strip import HANDOFF_TOOL
from rhapsody.core.window import expected_tokens, session_window

_ANTHROPIC = re.compile(r"(\d+) tokens > (\d+) maximum")
_OPENAI = re.compile(r"maximum context length is (\d+) tokens(?:.*?resulted in (\d+) tokens)?", re.DOTALL)
HEADROOM = 1.25
"""Room kept for what the handoff adds, over its estimate: the note is written once as the call's input
and comes back in its result, with the index."""


@dataclass(frozen=True)
class Room:
    """The calls to take out first so the request for the note fits, and the figures that chose them."""

    ids: list[str]
    window: int
    expected: int
    """The request for the note's expected tokens once they are out (calibrated)."""


def refusal_figures(refusal: str) -> tuple[int | None, int | None]:
    """(tokens the refused request had, the window) as the refusal says them; None where it does not."""
    found = _ANTHROPIC.search(refusal)
    if found:
        return int(found.group(1)), int(found.group(2))
    found = _OPENAI.search(refusal)
    if found:
        return (int(found.group(2)) if found.group(2) else None), int(found.group(1))
    return None, None


def room_for_note(session: Session, ask: str, adds: int, window_setting: int | None, refusal: str) -> Room | None:
    """The oldest calls whose leaving makes room for the note (None: no cut between rounds does)."""
    conv = session.conversation
    tokens, window = refusal_figures(refusal)
    window = window or session_window(session.spec.model, session.figures.evidence, window_setting).tokens
    now = measure_messages(session.spec, conv.active())[1]
    scale = tokens / now if tokens and now else None
    cuts = _cuts(conv.messages, conv.boundary(), conv.abandoned)
    asked = Message(role="user", content=[TextBlock(text=ask)])

    def expected(ids: list[str]) -> int:
        view = [*conv.view(conv.boundary(), conv.pruned | set(ids)), asked]
        est = measure_messages(session.spec, view)[1]
        return round(est * scale) if scale else expected_tokens(session.records, est)

    limit = window - round(HEADROOM * adds)
    low, high = 0, len(cuts) - 1
    if high < 0 or expected(cuts[high]) > limit:
        return None
    while low < high:  # fewer calls out, more tokens: the smallest cut that fits
        mid = (low + high) // 2
        if expected(cuts[mid]) <= limit:
            high = mid
        else:
            low = mid + 1
    return Room(cuts[low], window, expected(cuts[low]))


def _cuts(messages: list[Message], start: int, abandoned: set[int]) -> list[list[str]]:
    """For each place between rounds after `start` (the latest round excluded): the calls before it."""
    cuts: list[list[str]] = []
    ids: list[str] = []
    last_round = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=0)
    for i, message in enumerate(messages[:last_round]):
        if i >= start and i not in abandoned:
            ids += [b.id for b in message.content if isinstance(b, ToolUseBlock) and b.name != HANDOFF_TOOL]
        if message.role == "user" and messages[i + 1].role == "assistant" and ids and (not cuts or cuts[-1] != ids):
            cuts.append(list(ids))
    return cuts
