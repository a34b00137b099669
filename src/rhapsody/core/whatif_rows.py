"""The two rows a person would pick instead of seams, on the what-if's own replay.

- **The source's compaction, as it happened.** The replay without seams folds each `compaction`
  record where the source compacted; this row adds what the compaction itself cost, which the
  transcript does not report: one request over the whole context before the boundary (read from
  the cache as the request before it left it) and the summary as that request's output (the
  `compact_summary` message after the boundary, the text the model then carried).
- **Server-side clearing of old tool results** (the API's `clear_tool_uses_20250919` context edit):
  on a request whose input reaches `trigger` tokens, every tool result but the newest `keep` is
  replaced by a placeholder, oldest first; tool inputs and every word stay. The client sends the
  whole history and the server edits it, so the trigger is measured on the unedited request and the
  edit is made again on every later one; the cache model prices the edited request, so a result
  cleared since the previous request rewrites the cache from that result on. A source compaction
  still happens where this arm's (edited) context has grown as large as the source's had.

Figures are in the what-if's units (module `whatif`): the calibration's prefix and scale apply.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rhapsody.core.billing import SEAM_KINDS, CacheModel, Sent
from rhapsody.core.context import Conversation
from rhapsody.core.messages import Message, ToolResultBlock
from rhapsody.core.records import parse
from rhapsody.core.whatif import Arm, Calibration, context_tokens, reached, tokens

CLEAR_TRIGGER = 100_000
"""The API's default trigger for clearing tool results (input tokens)."""
CLEAR_KEEP = 3
"""The API's default number of newest tool uses whose results are kept."""
PLACEHOLDER = "[tool result cleared]"
"""What a cleared result reads as here; the API's own placeholder is a short text of this kind."""


Memo = dict[tuple[int, frozenset[str]], tuple[Message, Message]]
"""Edited copies by (original message, results cleared in it)."""


@dataclass(frozen=True)
class Clearing:
    """When the server clears (`trigger` input tokens) and how many newest results it keeps."""

    trigger: int = CLEAR_TRIGGER
    keep: int = CLEAR_KEEP

    @property
    def label(self) -> str:
        """The row's name in the table."""
        return f"clear tool results (at {self.trigger:,}, keep {self.keep})"


def compaction_arm(records: list[dict[str, Any]], read_mult: float, fit: Calibration) -> Arm:
    """The session without seams, the source compacting where it did, each compaction's request priced."""
    conv, sent, pending = Conversation(), [], None
    compactions = summary = 0
    awaiting = False
    for record in records:
        kind = record["kind"]
        if kind == "request":
            pending = Sent(float(record.get("ts", 0.0)), conv.active(), {})
        elif kind == "usage" and pending is not None:
            sent.append(pending)
            pending = None
        elif kind not in SEAM_KINDS:
            if kind == "compaction":
                sent.append(Sent(float(record.get("ts", 0.0)), conv.active(), {}))  # the summarising request
                compactions, awaiting = compactions + 1, True
            elif kind == "message" and awaiting and record.get("compact_summary"):
                summary, awaiting = summary + tokens(record["content"]), False
            conv.apply(parse(record))
    return _priced("source's compaction", sent, compactions, round(summary * fit.scale), read_mult, fit)


def clearing_arm(records: list[dict[str, Any]], read_mult: float, fit: Calibration, how: Clearing,
                 head: list[Any] | None = None) -> Arm:
    """The session without seams, the server clearing old tool results as `how` says."""
    head = fit.head if head is None else head
    conv, sent, pending = Conversation(), [], None
    memo: Memo = {}
    cleared_once = skip_summary = False
    for record in records:
        kind = record["kind"]
        if kind == "request":
            view = conv.active()
            if context_tokens(head, view) * fit.scale >= how.trigger:
                view, cleared_once = _cleared(view, how.keep, memo), True
            pending = Sent(float(record.get("ts", 0.0)), view, {})
        elif kind == "usage" and pending is not None:
            sent.append(pending)
            pending = None
        elif kind == "compaction":
            edited = _cleared(conv.active(), how.keep, memo) if cleared_once else conv.active()
            skip_summary = not reached(fit, head, edited, record)
            if not skip_summary:
                conv.apply(parse(record))
        elif kind == "message" and skip_summary and record.get("compact_summary"):
            skip_summary = False  # the summary of a compaction this arm did not make
        elif kind not in SEAM_KINDS:
            conv.apply(parse(record))
    return _priced(how.label, sent, 0, 0, read_mult, fit, head)


def _cleared(view: list[Message], keep: int, memo: Memo) -> list[Message]:
    """The view with every tool result but the newest `keep` replaced by the placeholder (one object per
    edited message, reused while its edit stays the same, so the cache model sees a stable prefix)."""
    ids = [b.tool_use_id for m in view for b in m.content if isinstance(b, ToolResultBlock)]
    gone = set(ids[: max(0, len(ids) - keep)])
    return [_edit(m, gone, memo) for m in view]


def _edit(message: Message, gone: set[str], memo: Memo) -> Message:
    hit = frozenset(b.tool_use_id for b in message.content if isinstance(b, ToolResultBlock) and b.tool_use_id in gone)
    if not hit:
        return message
    found = memo.get((id(message), hit))
    if found is not None and found[0] is message:
        return found[1]
    content = [ToolResultBlock(tool_use_id=b.tool_use_id, content=PLACEHOLDER)
               if isinstance(b, ToolResultBlock) and b.tool_use_id in hit else b for b in message.content]
    edited = Message(role=message.role, content=content)
    memo[(id(message), hit)] = (message, edited)
    return edited


def _priced(label: str, sent: list[Sent], events: int, output: int, read_mult: float, fit: Calibration,
            head: list[Any] | None = None) -> Arm:
    model = CacheModel(fit.head if head is None else head, read_mult)
    priced_ = [model.price(s.ts, s.messages) for s in sent]
    return Arm(label, len(sent), events, round(sum(t for t, _ in priced_) * fit.scale),
               round(sum(c for _, c in priced_) * fit.scale),
               round(max((t for t, _ in priced_), default=0) * fit.scale), output)
