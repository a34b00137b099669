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

Figures are in the what-if's units (module `whatif`): the calibration's prefix (each model's) and scale
apply, and every request is billed as the what-if's seam rows are (billing's `bill`: each request at the
model that answered it, the TTL its usage shows; a compaction's own request at the model and TTL of the
request before it).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from dataclasses import dataclass
from itertools import compress, count
from operator import is_not
from typing import Any

from collections.abc import Sequence

from rhapsody.core.session import records as rec
from rhapsody.core.accounting.billing import SEAM_RECORDS, Sent
from rhapsody.core.pricing import input_equivalents, rates_of
from rhapsody.core.session.context import Conversation
from rhapsody.core.session.messages import Message, ToolResultBlock
from rhapsody.core.accounting.whatif import (Arm, Calibration, context_tokens, model_of, priced_arm, reached, session_model,
                                  tokens, usage_of, with_models)

CLEAR_TRIGGER = 100_000
"""The API's default trigger for clearing tool results (input tokens)."""
CLEAR_KEEP = 3
"""The API's default number of newest tool uses whose results are kept."""
PLACEHOLDER = "[tool result cleared]"
"""What a cleared result reads as here; the API's own placeholder is a short text of this kind."""


_Entry = tuple[Message, tuple[str, ...], dict[frozenset[str], Message], frozenset[str]]
Memo = dict[int, _Entry]
"""By original message: it, the ids of the tool results in it, its edited copies by the results cleared, and
those ids as a set (the key of its copy with all of them cleared). A long session's every request looks at every
message, so each is read once."""


@dataclass(frozen=True)
class Clearing:
    """When the server clears (`trigger` input tokens) and how many newest results it keeps."""

    trigger: int = CLEAR_TRIGGER
    keep: int = CLEAR_KEEP

    @property
    def label(self) -> str:
        """The row's name in the table."""
        return f"clear tool results (at {self.trigger:,}, keep {self.keep})"


def compaction_arm(records: Sequence[rec.Record], read_mult: float | None, fit: Calibration) -> Arm:
    """The session without seams, the source compacting where it did, each compaction's request priced."""
    conv, sent, pending = Conversation(), [], None
    compactions = summary = 0
    awaiting = False
    for record in records:
        if isinstance(record, rec.RequestMade):
            pending = Sent(record.ts, conv.active(), {})
        elif isinstance(record, rec.UsageRecorded):
            if pending is not None:
                sent.append(dataclasses.replace(pending, usage=usage_of(record)))
            pending = None
        elif not isinstance(record, SEAM_RECORDS):
            if isinstance(record, rec.Compaction):
                sent.append(Sent(record.ts, conv.active(), {}))  # the summarising request
                compactions, awaiting = compactions + 1, True
            elif isinstance(record, rec.MessageAdded) and awaiting and rec.extra(record, "compact_summary"):
                summary, awaiting = summary + tokens([b.dump() for b in record.content]), False
            conv.apply(record)
    return priced_arm("source's compaction", with_models(sent, records), compactions, fit, read_mult,
                      round(summary * fit.scale))


def clearing_arm(records: Sequence[rec.Record], read_mult: float | None, fit: Calibration, how: Clearing,
                 head: list[Any] | None = None) -> Arm:
    """The session without seams, the server clearing old tool results as `how` says; with `head`, every
    request of every model carries that prompt and those tools instead of the source's."""
    fit = fit.own(head)
    conv, sent, pending = Conversation(), [], None
    cleared = _Clearing(how.keep)
    cleared_once = skip_summary = False
    model = session_model(records)
    for record in records:
        model = model_of(record, model)
        head = fit.head_of(model)
        if isinstance(record, rec.RequestMade):
            view = conv.active()
            if context_tokens(head, view) * fit.scale >= how.trigger:
                view, cleared_once = cleared(view), True
            pending = Sent(record.ts, view, {})
        elif isinstance(record, rec.UsageRecorded):
            if pending is not None:
                sent.append(dataclasses.replace(pending, usage=usage_of(record)))
            pending = None
        elif isinstance(record, rec.Compaction):
            edited = cleared(conv.active()) if cleared_once else conv.active()
            skip_summary = not reached(fit, head, edited, record)
            if not skip_summary:
                conv.apply(record)
        elif isinstance(record, rec.MessageAdded) and skip_summary and rec.extra(record, "compact_summary"):
            skip_summary = False  # the summary of a compaction this arm did not make
        elif not isinstance(record, SEAM_RECORDS):
            conv.apply(record)
    return priced_arm(how.label, with_models(sent, records), 0, fit, read_mult, 0)


class _Clearing:
    """The views of one arm with every tool result but the newest `keep` replaced by the placeholder (one object
    per edited message, reused while its edit stays the same, so the cache model sees a stable prefix). The
    views mostly extend the one before (the same objects), so only the new tail is read anew."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.memo: Memo = {}
        self.view: list[Message] = []
        self.entries: list[_Entry] = []
        self.ids: list[str] = []
        """The ids of the tool results of the last view, in order."""
        self.counts = [0]
        """How many of `ids` the first k messages of the last view hold, for each k."""
        self.whole: list[Message] = []
        """The first messages of the last view with all their results cleared."""

    def __call__(self, view: list[Message]) -> list[Message]:
        same = next(compress(count(), map(is_not, self.view, view)), min(len(self.view), len(view)))
        entries, counts = self.entries[:same], self.counts[: same + 1]
        ids = self.ids[: counts[-1]]
        for message in view[same:]:
            entry = _entry(message, self.memo)
            entries.append(entry)
            ids.extend(entry[1])
            counts.append(len(ids))
        cut = max(0, len(ids) - self.keep)
        whole = bisect_right(counts, cut) - 1  # the messages before it hold results before the cut only
        done = self.whole[: min(same, whole)]
        done.extend(_edited(entry, entry[3]) if entry[1] else entry[0] for entry in entries[len(done):whole])
        self.view, self.entries, self.ids, self.counts, self.whole = list(view), entries, ids, counts, done
        gone = set(ids[:cut])
        return done + [_edit(entry, gone) if entry[1] else entry[0] for entry in entries[whole:]]


def _entry(message: Message, memo: Memo) -> _Entry:
    found = memo.get(id(message))
    if found is None or found[0] is not message:
        ids = tuple(b.tool_use_id for b in message.content if isinstance(b, ToolResultBlock))
        found = memo[id(message)] = (message, ids, {}, frozenset(ids))
    return found


def _edit(entry: _Entry, gone: set[str]) -> Message:
    return _edited(entry, frozenset(i for i in entry[1] if i in gone))


def _edited(entry: _Entry, hit: frozenset[str]) -> Message:
    message, _, edits, _ = entry
    if not hit:
        return message
    edited = edits.get(hit)
    if edited is None:
        content = [ToolResultBlock(tool_use_id=b.tool_use_id, content=PLACEHOLDER)
                   if isinstance(b, ToolResultBlock) and b.tool_use_id in hit else b for b in message.content]
        edited = edits[hit] = Message(role=message.role, content=content)
    return edited


def subagents(records: Sequence[rec.Record], read_mult: float | None) -> dict[str, Any]:
    """The requests of an imported session's subagents (its sidechains) as the file reports them, each at the model
    that answered it: the same in every row, since a seam of the main conversation leaves a subagent's own
    requests as they were, so they are said beside the rows, not in them. A message written as several lines
    repeats its usage: consecutive lines of one agent with the same usage count once."""
    seen: tuple[Any, ...] | None = None
    billed, dollars, requests = 0.0, 0.0, 0
    for record in rec.of(records, rec.KeptAside):
        extra = record.model_extra or {}  # an aside's fields vary with `what`
        usage = extra.get("usage")
        if record.what != "sidechain" or not isinstance(usage, dict):
            continue
        key = (extra.get("agent_id"), tuple(sorted(usage.items())))
        if key == seen:
            continue
        seen, requests = key, requests + 1
        rates = rates_of(str(extra.get("model", "")), read_mult)
        each = input_equivalents({k: int(v or 0) for k, v in usage.items()}, rates)
        billed += each
        dollars = dollars + each * rates.usd_per_token if rates.usd_per_token is not None and dollars >= 0 else -1.0
    return {"requests": requests, "billed_input_tokens": round(billed), "usd": round(dollars, 4) if dollars >= 0 else None}
