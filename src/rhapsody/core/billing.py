"""What the seams saved: a session's requests priced with prompt caching, with and without seams.

"As it happened" is the usage the API reported for every request, priced: uncached input
at 1×, cache writes at 1.25×, cache reads at the model's read multiplier (0.1× for most
models; see core/pricing.py). "Without seams" rebuilds every request from the history with
the seams left out (everything else as it happened: rolling cuts, thinking cuts, the
handoff calls themselves) and prices it with a prompt-cache model of the request rhapsody
builds: breakpoints after the system prompt and on the newest message, a 5-minute TTL
refreshed by each read, the longest cached prefix read and the rest written. The model's
token counts (compact JSON characters / 4) are scaled so that, run over the requests as
they happened, they add up to the input tokens the API reported; the same model run over
the requests as they happened is reported too, so its error can be seen.

Figures are in base-input-token equivalents (multiply by the model's input price for
dollars).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import hashlib
from itertools import compress, count
from operator import is_not
from dataclasses import dataclass
from typing import Any

from rhapsody.core.context import Conversation
from rhapsody.core.messages import Message, compact_json
from rhapsody.core.pricing import WRITE_5M_MULT, Price
from rhapsody.core.records import parse

TTL = 300.0
SEAM_KINDS = ("seam", "unseam", "shelve")
"""Records a replay without seams leaves out (a `shelve` follows from the seams before it)."""


@dataclass(frozen=True)
class Sent:
    """One answered request: when it went out, the messages it carried, what the API reported."""

    ts: float
    messages: list[Message]
    usage: dict[str, int]


def replay(records: list[dict[str, Any]], seams: bool = True) -> list[Sent]:
    """Every answered request of a history, rebuilt; with `seams=False`, as if no seam had happened."""
    conv = Conversation()
    sent: list[Sent] = []
    pending: tuple[float, list[Message]] | None = None
    for record in records:
        kind = record["kind"]
        if kind == "request":
            pending = (float(record.get("ts", 0.0)), conv.active())
        elif kind == "usage" and pending is not None:
            usage = {k: int(record.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens",
                                                           "cache_read_input_tokens")}
            sent.append(Sent(pending[0], pending[1], usage))
            pending = None
        elif seams or kind not in SEAM_KINDS:
            conv.apply(parse(record))
    return sent


def priced(usage: dict[str, int], read_mult: float) -> float:
    """Base-input-token equivalents of one request's reported input."""
    return (usage.get("input_tokens", 0) + usage.get("cache_creation_input_tokens", 0) * WRITE_5M_MULT
            + usage.get("cache_read_input_tokens", 0) * read_mult)


class CacheModel:
    """A prompt cache over [tools, system, *messages] with writes at rhapsody's two breakpoints.

    Consecutive requests mostly share their messages (the same objects, as the history view
    extends), so running digests are kept per position and only the new tail is hashed.
    """

    def __init__(self, head: list[Any], read_mult: float) -> None:
        self.read_mult = read_mult
        self._cache: dict[str, float] = {}
        self._memo: dict[int, tuple[Message, str, int]] = {}
        self._prev: list[Message] = []
        self._runs: list[str] = []
        """Running digest after each part of the previous request (head parts first)."""
        self._totals: list[int] = []
        """Tokens up to and including each part of the previous request."""
        running, total = "", 0
        for part in head:
            running, total = _digest(running + _digest(compact_json(part))), total + _tokens(part)
            self._runs.append(running)
            self._totals.append(total)
        self._head = len(head)

    def price(self, ts: float, messages: list[Message], read_mult: float | None = None) -> tuple[int, float]:
        """(input tokens, billed equivalents) of one request sent at `ts`, its cache reads at `read_mult`
        (the model's rate of the request; the model's default when None)."""
        same = _shared(self._prev, messages)
        runs, totals = self._runs[: self._head + same], self._totals[: self._head + same]
        for message in messages[same:]:
            digest, tokens = self._part(message)
            runs.append(_digest(runs[-1] + digest))
            totals.append(totals[-1] + tokens)
        self._prev, self._runs, self._totals = list(messages), runs, totals
        read = next((totals[i] for i in range(len(runs) - 1, -1, -1)
                     if self._cache.get(runs[i], -1e18) + TTL >= ts), 0)
        for i in {self._head - 1, len(runs) - 1}:  # the breakpoints: after system, on the newest message
            self._cache[runs[i]] = ts
        written = totals[-1] - read
        mult = self.read_mult if read_mult is None else read_mult
        return totals[-1], written * WRITE_5M_MULT + read * mult

    def _part(self, message: Message) -> tuple[str, int]:
        found = self._memo.get(id(message))
        if found is None or found[0] is not message:
            text = compact_json(message.api)
            found = (message, _digest(text), _chars_tokens(len(text)))
            self._memo[id(message)] = found
        return found[1], found[2]


def _shared(old: list[Message], new: list[Message]) -> int:
    """How many leading messages two requests share (the same objects): compared at C speed, since a long
    session's requests share thousands of messages each."""
    return next(compress(count(), map(is_not, old, new)), min(len(old), len(new)))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _tokens(part: Any) -> int:
    return _chars_tokens(len(compact_json(part)))


def _chars_tokens(chars: int) -> int:
    return max(1, -(-chars // 4))


def simulate(head: list[Any], sent: list[Sent], read_mult: float | list[float]) -> list[tuple[int, float]]:
    """(input tokens, billed equivalents) of each request of a run under the cache model; `read_mult`
    is one rate for all, or one per request (each at the model that served it)."""
    mults = _per_request(read_mult, len(sent))
    model = CacheModel(head, mults[0] if mults else 0.1)
    return [model.price(request.ts, request.messages, mult) for request, mult in zip(sent, mults)]


def _per_request(read_mult: float | list[float], n: int) -> list[float]:
    return list(read_mult) if isinstance(read_mult, list) else [read_mult] * n


def served_by(records: list[dict[str, Any]]) -> list[str]:
    """The model that served each answered request, in the order `replay` yields them.

    A request record names its model; older ones do not, and then the session's model as
    of that request (its head, or the latest `model` switch before it) is the one.
    """
    head = records[0] if records and records[0].get("kind") == "session" else {}
    current, pending, served = str(head.get("model", "")), None, []
    for record in records:
        kind = record["kind"]
        if kind == "model":
            current = str(record.get("model", current))
        elif kind == "request":
            pending = str(record.get("model") or current)
        elif kind == "usage" and pending is not None:
            served.append(pending)
            pending = None
    return served


def seam_savings(records: list[dict[str, Any]], read_mult: float | list[float],
                 prices: list[Price] | None = None, per_request: bool = False) -> dict[str, Any]:
    """Billed input as it happened beside the same requests rebuilt without any seam.

    `read_mult` is the cache-read rate for every request, or one per answered request (the
    rate of the model that served it, so a `/model` switch does not reprice the past);
    `cache_read_multiplier` is then that one rate, or None when the requests' rates differ.

    With `prices` (one per answered request, see `served_by`), each request is also priced
    in dollars at its own model: `billed_input_usd` and `billed_input_usd_without_seams`.

    With `per_request`, also each answered request's billed input as it happened and without
    seams (`billed_per_request`, `billed_per_request_without_seams`), which add up to the totals.
    """
    head_record = records[0] if records and records[0].get("kind") == "session" else {}
    head = [head_record.get("tools", []), [{"type": "text", "text": head_record.get("system", "")}]]
    actual = replay(records, seams=True)
    without = replay(records, seams=False)
    mults = _per_request(read_mult, len(actual))
    reported = sum(sum(s.usage.values()) for s in actual)
    each = [priced(s.usage, mult) for s, mult in zip(actual, mults)]
    billed = sum(each)
    sim, free = simulate(head, actual, mults), simulate(head, without, mults)
    sim_tokens, sim_billed = sum(t for t, _ in sim), sum(c for _, c in sim)
    free_tokens, free_billed = sum(t for t, _ in free), sum(c for _, c in free)
    scale = reported / sim_tokens if sim_tokens else 1.0
    # A further request reads its whole prefix from cache: the seams save what they hold out of it now
    # (the strips and cuts in force, from their own records, so the figure is right at once after a seam
    # and falls to nothing after /unhandoff; the last request sent may predate either).
    held = held_out(records)
    further = _chars_tokens(held) * scale * mults[-1] if sim and held > 0 else 0.0
    dollars = {} if prices is None else _dollars(actual, free, scale, prices)
    series = {"billed_per_request": each, "billed_per_request_without_seams": [c * scale for _, c in free]}
    return {
        **dollars,
        **(series if per_request else {}),
        "answered_requests": len(actual),
        "seams": sum(1 for r in records if r["kind"] == "seam"),
        "cache_read_multiplier": mults[0] if len(set(mults)) == 1 else (None if mults else _one(read_mult)),
        "cache_write_multiplier": WRITE_5M_MULT,
        "input_tokens": reported,
        "billed_input_tokens": round(billed),
        "input_tokens_without_seams": round(free_tokens * scale),
        "billed_input_tokens_without_seams": round(free_billed * scale),
        "billed_input_tokens_simulated": round(sim_billed * scale),
        "token_scale": round(scale, 4),
        "saving": round(1 - billed / (free_billed * scale), 4) if free_billed else 0.0,
        "saving_per_further_request": round(further),
    }


def held_out(records: list[dict[str, Any]]) -> int:
    """Bytes of request the seams and rolling cuts in force keep out of the context (undone seams excluded)."""
    undone = {r.get("seam") for r in records if r["kind"] == "unseam"}
    return sum(int(r["before"]["request_bytes"]) - int(r["after"]["request_bytes"]) for r in records
               if (r["kind"] == "seam" and r.get("seam") not in undone) or r["kind"] == "prune")


def _one(read_mult: float | list[float]) -> float | None:
    return read_mult if isinstance(read_mult, (int, float)) else None


def _dollars(actual: list[Sent], free: list[tuple[int, float]], scale: float, prices: list[Price]) -> dict[str, float]:
    """Each request's input in dollars at the model that served it, as it happened and without seams."""
    per_token = [p.input / 1e6 for p in prices]
    billed = sum(priced(s.usage, p.read_mult) * rate for s, p, rate in zip(actual, prices, per_token))
    without = sum(cost * scale * rate for (_, cost), rate in zip(free, per_token))
    return {"billed_input_usd": round(billed, 4), "billed_input_usd_without_seams": round(without, 4)}
