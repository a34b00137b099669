"""What a session's sub-agents spent, and what they kept out of its context, from its `subagent` records.

Spent: their tool calls, tokens and dollars, each sub-agent priced at its own model (its record says). Kept
out: the estimated tokens of their tool calls and results, which would have been in this session's context
had it made those calls itself; priced like the rest of the bill: the first request after a sub-agent
ended would have written them to the cache, and every later one until the next seam read them, each at the
model that served it (core/pricing.py).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rhapsody.core.pricing import WRITE_1H_MULT, WRITE_5M_MULT, price_of, priced
from rhapsody.core.session import records as rec
from rhapsody.core.session.session_figures import USAGE_KEYS

ENDED = ("done", "limit", "failed", "interrupted")


@dataclass(frozen=True)
class Spent:
    """A session's sub-agents in figures (`cost_usd`, `kept_out_usd`: None where a model has no price)."""

    subagents: int = 0
    tool_calls: int = 0
    tokens: int = 0
    cost_usd: float | None = 0.0
    kept_out_tokens: int = 0
    carried_by: int = 0
    """Requests of this session that would have carried the kept-out traffic (each sub-agent's, summed)."""
    kept_out_usd: float | None = 0.0

    def as_json(self) -> dict[str, Any]:
        """The figures for `rhapsody stats --json`."""
        return {k: round(v, 6) if isinstance(v, float) else v for k, v in asdict(self).items()}


def spent(records: Sequence[rec.Record]) -> Spent:
    """The figures of every sub-agent that ended in `records` (a session's history)."""
    head = rec.first(records, rec.SessionStarted)
    head_model = head.model if head is not None else ""
    ended = [(i, r) for i, r in enumerate(records) if isinstance(r, rec.Subagent) and r.state in ENDED]
    if not ended:
        return Spent()
    cost: float | None = sum(r.cost_usd for _, r in ended)
    if not all(r.priced for _, r in ended):
        cost = None
    tokens = sum(int(r.usage.get(k) or 0) for _, r in ended for k in USAGE_KEYS)
    kept = sum(r.kept_out_tokens for _, r in ended)
    carried, usd = 0, 0.0
    unpriced = False
    for i, r in ended:
        later = carried_by(records, i)
        carried += len(later)
        for n, request in enumerate(later):
            model = request.model or head_model
            if not priced(model):
                unpriced = True
                continue
            price = price_of(model)[0]
            mult = (WRITE_1H_MULT if request.cache_ttl == "1h" else WRITE_5M_MULT) if n == 0 else price.read_mult
            usd += r.kept_out_tokens * price.input * mult / 1e6
    return Spent(len(ended), sum(r.tool_calls for _, r in ended), tokens, cost, kept, carried,
                 None if unpriced else usd)


def carried_by(records: Sequence[rec.Record], start: int) -> list[rec.RequestMade]:
    """The requests after record `start` up to the next seam: those that would have carried traffic made there."""
    out = []
    for record in records[start + 1:]:
        if isinstance(record, rec.Seam):
            break
        if isinstance(record, rec.RequestMade):
            out.append(record)
    return out


def spent_line(figures: Spent) -> str:
    """One line for `rhapsody stats`, /stats and the export's head ('' with no sub-agent)."""
    if not figures.subagents:
        return ""
    cost = "cost unknown" if figures.cost_usd is None else f"${figures.cost_usd:.4f}"
    kept = "unknown" if figures.kept_out_usd is None else f"${figures.kept_out_usd:.4f}"
    return (f"sub-agents {figures.subagents}: {figures.tool_calls} tool calls, {figures.tokens:,} tokens, {cost} at "
            f"their own models; their traffic kept out of this context: ~{figures.kept_out_tokens:,} tokens, which "
            f"{figures.carried_by} later requests would have carried ({kept} at this session's cache prices)")
