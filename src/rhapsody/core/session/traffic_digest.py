"""Both sides of a seam audited: a SHA-256 of the tool traffic that left the context.

The authored-text hash proves what stayed; this one proves what left. At a seam (or a
rolling cut) the harness hashes every tool call that leaves the view together with its
result, and records the digest. `recall` and `/unhandoff` recompute it from the history
and say whether what they return is exactly what left.

The digest of one call is the SHA-256 of the compact JSON `[tool_use, tool_result]` (keys
sorted, the result `null` when there is none); the digest of a set of calls is the
SHA-256 of their digests, one per line, in conversation order.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rhapsody.core.session import records as rec
from rhapsody.core.session.context import Conversation
from rhapsody.core.session.messages import Message, ToolResultBlock, ToolUseBlock
from rhapsody.core.counts import counted

Pair = tuple[ToolUseBlock, ToolResultBlock | None]


def pairs(messages: Iterable[Message]) -> list[Pair]:
    """Every tool call in `messages` with its result, in order."""
    messages = list(messages)
    results = {b.tool_use_id: b for m in messages for b in m.content if isinstance(b, ToolResultBlock)}
    return [(b, results.get(b.id)) for m in messages for b in m.content if isinstance(b, ToolUseBlock)]


def left(before: Sequence[Message], after: Sequence[Message]) -> list[Pair]:
    """The calls in `before` that are not in `after`: what a strip took out of the view."""
    kept = {use.id for use, _ in pairs(after)}
    return [p for p in pairs(before) if p[0].id not in kept]


def call_sha256(pair: Pair) -> str:
    """The digest of one call and its result."""
    use, result = pair
    body = [use.dump(), result.dump() if result is not None else None]
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def traffic_sha256(calls: Iterable[Pair]) -> str:
    """The digest of a set of calls, in order."""
    return hashlib.sha256("\n".join(call_sha256(p) for p in calls).encode()).hexdigest()


def fields(calls: list[Pair]) -> dict[str, Any]:
    """The fields a seam or prune record carries about what left."""
    return {"stripped_sha256": traffic_sha256(calls), "stripped_calls": len(calls)}


@dataclass(frozen=True)
class Cut:
    """One seam or rolling cut, re-derived from the history, beside what it recorded."""

    kind: str
    number: int
    recorded: str | None
    actual: str
    calls: dict[str, Pair] = field(default_factory=dict)

    @property
    def verified(self) -> bool:
        """Whether the history still holds exactly what left at this cut."""
        return self.recorded is not None and self.recorded == self.actual

    def verdict(self) -> str:
        """One line a human or the model can read."""
        name = f"seam {self.number}" if self.kind == "seam" else f"rolling cut {self.number}"
        if self.recorded is None:
            return f"not verified: {name} recorded no hash of what it stripped (written by an older rhapsody)"
        if self.verified:
            return (f"verified: the {counted(len(self.calls), 'call')} {name} stripped {'hashes' if len(self.calls) == 1 else 'hash'} to the SHA-256 it recorded "
                    f"({self.recorded[:12]}…)")
        return (f"NOT VERIFIED: {name} recorded {self.recorded[:12]}… for what it stripped, "
                f"the history now gives {self.actual[:12]}…")


def cuts(records: Sequence[rec.Record]) -> list[Cut]:
    """Every seam and rolling cut of a history, each re-derived from the records before it."""
    conv = Conversation()
    out: list[Cut] = []
    prunes = 0
    for record in records:
        if isinstance(record, rec.Seam):
            gone = left(conv.active(), conv.view(record.boundary))
            number = record.seam if "seam" in record.model_fields_set else len(out) + 1
            out.append(_cut("seam", number, record, gone))
        elif isinstance(record, rec.Prune):
            prunes += 1
            gone = left(conv.active(), conv.view(conv.boundary(), conv.pruned | set(record.ids)))
            out.append(_cut("prune", prunes, record, gone))
        conv.apply(record)
    return out


def _cut(kind: str, number: int, record: rec.Seam | rec.Prune, gone: list[Pair]) -> Cut:
    return Cut(kind, number, record.stripped_sha256, traffic_sha256(gone), {p[0].id: p for p in gone})


def cut_of(records: Sequence[rec.Record], tool_use_id: str) -> Cut | None:
    """The newest cut that took this call out of the view, if any did."""
    found = [c for c in cuts(records) if tool_use_id in c.calls]
    return found[-1] if found else None
