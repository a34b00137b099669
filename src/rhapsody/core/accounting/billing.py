"""What the seams saved: a session's requests priced with prompt caching, with and without seams.

"As it happened" is the usage the API reported for every request, priced at the model that
answered it: uncached input at 1x, cache writes at 1.25x (5-minute TTL) or 2x (1-hour), cache
reads at the model's read multiplier (0.1x for most models; see core/pricing.py). "Without
seams" rebuilds every request from the history with the seams left out (everything else as
it happened: rolling cuts, thinking cuts, the handoff calls themselves) and prices it with
a prompt-cache model of the request: one cache per model, breakpoints after the system
prompt and on the newest message, each entry living for its TTL from the request that wrote
or last read it (so a pause longer than five minutes makes a 5-minute entry cold), the
longest live prefix read and the rest written. Each request writes with the TTL its reported
usage shows (1-hour, 5-minute, or 1-hour up to the system prompt and 5-minute after); the
uncached input it reported stays uncached.

Calibration (`fit`), so the figures are in the API's tokens: in an imported history, the first
request of each model, its reported input minus the rebuild, is a prefix the history does
not hold (the source's own system prompt and tools), kept in every request of that model
(a native history holds its own); then one
scale makes the rebuilt requests as they happened add up to the input the API reported. The
same model run over the requests as they happened is reported too (`replay_error`), so how
far to trust it can be seen.

Figures are in base-input-token equivalents (multiply by the model's input price for
dollars).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress, count
from operator import is_not
from typing import Any

from rhapsody.core.session.context import Conversation
from rhapsody.core.session.messages import Message, compact_json
from rhapsody.core.pricing import WRITE_1H_KEY, WRITE_1H_MULT, WRITE_5M_MULT, Price, Rates, input_equivalents, rates_of
from rhapsody.core.session import records as rec

TTL_5M = 300.0
TTL_1H = 3600.0
TTL = TTL_5M
SEAM_RECORDS = (rec.Seam, rec.Unseam, rec.Shelve)
"""Records a replay without seams leaves out (a `shelve` follows from the seams before it)."""
INPUT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


@dataclass(frozen=True)
class Sent:
    """One answered request: when it went out, the messages it carried, what the API reported, its model."""

    ts: float
    messages: list[Message]
    usage: dict[str, int]
    model: str = ""
    ttl: tuple[float, float] | None = None
    """The cache lifetimes it writes with, where its usage does not say (a replayed handoff's requests)."""


def reported(usage: dict[str, int]) -> int:
    """The input tokens one usage report counts (uncached, written, read)."""
    return sum(usage.get(k, 0) for k in INPUT_KEYS)


def replay(records: Sequence[rec.Record], seams: bool = True) -> list[Sent]:
    """Every answered request of a history, rebuilt; with `seams=False`, as if no seam had happened."""
    conv = Conversation()
    sent: list[Sent] = []
    pending: tuple[float, list[Message], str] | None = None
    model = head_of(records).model
    for record in records:
        if isinstance(record, rec.RequestMade):
            pending = (record.ts, conv.active(), record.model or model)
        elif isinstance(record, rec.UsageRecorded):
            if pending is not None:
                sent.append(Sent(pending[0], pending[1], usage_of(record), pending[2]))
            pending = None
        elif isinstance(record, rec.ModelSwitched):
            model = record.model or model
        elif seams or not isinstance(record, SEAM_RECORDS):
            conv.apply(record)
    return sent


def head_of(records: Sequence[rec.Record]) -> rec.SessionStarted:
    """A history's session record (an empty one when the history does not start with it)."""
    head = records[0] if records else None
    return head if isinstance(head, rec.SessionStarted) else rec.SessionStarted.model_construct()


def usage_of(record: rec.UsageRecorded) -> dict[str, int]:
    """A usage record as the figures count it: the input kinds and the 1-hour writes."""
    return {k: getattr(record, k) for k in (*INPUT_KEYS, WRITE_1H_KEY)}


def priced(usage: dict[str, int], read_mult: float) -> float:
    """Base-input-token equivalents of one request's reported input (a Claude model's write rates)."""
    return input_equivalents(usage, Rates(read_mult))


@dataclass(frozen=True)
class Split:
    """One request's input tokens as the API bills them."""

    uncached: float = 0.0
    write_5m: float = 0.0
    write_1h: float = 0.0
    read: float = 0.0

    @property
    def tokens(self) -> float:
        """All of the request's input."""
        return self.uncached + self.write_5m + self.write_1h + self.read

    def billed(self, rates: Rates) -> float:
        """Base-input-token equivalents at `rates`."""
        return self.uncached + self.write_5m * rates.write_5m + self.write_1h * rates.write_1h + self.read * rates.read

    def plus(self, other: Split) -> Split:
        """The sum of two splits."""
        return Split(self.uncached + other.uncached, self.write_5m + other.write_5m, self.write_1h + other.write_1h,
                     self.read + other.read)

    def as_dict(self) -> dict[str, int]:
        """Rounded, under the names `--json` uses."""
        return {"uncached": round(self.uncached), "write_5m": round(self.write_5m), "write_1h": round(self.write_1h),
                "read": round(self.read)}


def split_of(usage: dict[str, int]) -> Split:
    """A usage report as a split."""
    written = usage.get("cache_creation_input_tokens", 0)
    hour = min(usage.get(WRITE_1H_KEY, 0), written)
    return Split(usage.get("input_tokens", 0), written - hour, hour, usage.get("cache_read_input_tokens", 0))


def ttl_of(usage: dict[str, int], before: tuple[float, float]) -> tuple[float, float]:
    """(TTL of the write after the system prompt, of the write on the newest message) that a request's usage
    shows; `before` (the previous request's) when it wrote nothing, or has no usage (a replayed handoff)."""
    written, hour = usage.get("cache_creation_input_tokens", 0), usage.get(WRITE_1H_KEY, 0)
    if not written:
        return before
    if not hour:
        return (TTL_5M, TTL_5M)
    return (TTL_1H, TTL_1H) if hour >= written else (TTL_1H, TTL_5M)


@dataclass(frozen=True)
class Fit:
    """The prefix the history does not hold (per model), and the scale from rebuilt tokens to reported ones."""

    head: list[Any]
    scale: float
    heads: dict[str, list[Any]] = field(default_factory=dict)
    """Other models' heads, where their first request showed another prefix (a second model's own prompt)."""

    def head_of(self, model: str) -> list[Any]:
        """The head a request of `model` carries."""
        return self.heads.get(model, self.head)


def session_head(records: Sequence[rec.Record]) -> list[Any]:
    """The tools and system prompt a history's session record holds."""
    head = head_of(records)
    return [list(head.tools), [{"type": "text", "text": head.system}]]


def fit(records: Sequence[rec.Record], actual: list[Sent] | None = None) -> Fit:
    """Fit the rebuilt requests as they happened to what the API reported (module docstring)."""
    base = session_head(records)
    actual = replay(records, seams=True) if actual is None else actual
    heads: dict[str, list[Any]] = {}
    imported = rec.first(records[:3], rec.Import) is not None  # a native history holds its own prompt and tools
    for sent in actual:
        if not imported:
            heads[sent.model] = base
        elif sent.model not in heads:
            missing = reported(sent.usage) - size(base, sent.messages)
            heads[sent.model] = [*base, {"prefix": "x" * (4 * missing - 20)}] if missing > 0 else base
    first = heads[actual[0].model] if actual else base
    rebuilt = sum(head_tokens(heads[s.model]) + messages_tokens(s.messages) for s in actual)
    total = sum(reported(s.usage) for s in actual)
    return Fit(first, total / rebuilt if rebuilt else 1.0, {m: h for m, h in heads.items() if h is not first})


def size(head: list[Any], messages: list[Message]) -> int:
    """Tokens of a request as the cache model counts them (each message's size is cached on it)."""
    return head_tokens(head) + messages_tokens(messages)


_LAST: tuple[list[Message], list[int]] = ([], [0])
"""The messages sized last and their running tokens: the next request shares most of them (the same objects)."""


def messages_tokens(messages: list[Message]) -> int:
    """Tokens of a request's messages, only those not in the request sized before it counted anew."""
    global _LAST
    prev, running = _LAST  # one read and one write: a report sized on another thread only recounts
    same = _shared(prev, messages)
    running = running[: same + 1]
    for message in messages[same:]:
        running.append(running[-1] + _chars_tokens(message.api_size[1]))
    _LAST = (list(messages), running)
    return running[-1]


_HEADS: dict[int, tuple[list[Any], int]] = {}
"""Tokens of the heads sized lately, by identity, each kept beside its head so the id is not reused: a what-if
sweep sizes ~12,000 requests over the same few heads, and encoding the tool definitions was most of its time."""


def head_tokens(head: list[Any]) -> int:
    """Tokens of a request's head (tools, system prompt); a head is not changed once built, so it is counted once."""
    found = _HEADS.get(id(head))
    if found is None or found[0] is not head:
        if len(_HEADS) >= 32:  # heads of finished reports are let go
            _HEADS.clear()
        found = _HEADS[id(head)] = (head, sum(_tokens(part) for part in head))
    return found[1]


def bill(sent: list[Sent], fitted: Fit) -> list[Split]:
    """Each request of a run split as the API would bill it, in reported tokens (module docstring)."""
    caches: dict[str, CacheModel] = {}
    ttl, model, out = (TTL_5M, TTL_5M), sent[0].model if sent else "", []
    for request in sent:
        model, ttl = request.model or model, request.ttl or ttl_of(request.usage, ttl)
        cache = caches.get(model) or caches.setdefault(model, CacheModel(fitted.head_of(model)))
        _, read, written = cache.split(request.ts, request.messages, ttl)
        scale = fitted.scale
        w5, w1 = written.get(TTL_5M, 0) * scale, written.get(TTL_1H, 0) * scale
        uncached = min(float(request.usage.get("input_tokens", 0)), w5 + w1)  # after the last breakpoint
        first = min(uncached, w1 if ttl[1] == TTL_1H else w5)
        w5, w1 = (w5 - (uncached - first), w1 - first) if ttl[1] == TTL_1H else (w5 - first, w1 - (uncached - first))
        out.append(Split(uncached, w5, w1, read * scale))
    return out


def total(splits: list[Split]) -> Split:
    """The sum of a run's splits."""
    out = Split()
    for one in splits:
        out = out.plus(one)
    return out


class CacheModel:
    """A prompt cache over [tools, system, *messages] with writes at rhapsody's two breakpoints.

    Consecutive requests mostly share their messages (the same objects, as the history view
    extends), so running digests are kept per position and only the new tail is hashed.
    """

    def __init__(self, head: list[Any], read_mult: float = 0.1) -> None:
        self.read_mult = read_mult
        self._cache: dict[str, tuple[float, float]] = {}
        """Digest of a cached prefix → (when it was last written or read, its TTL)."""
        self._prev: list[Message] = []
        self._runs: list[str] = []
        """Running digest after each part of the previous request (head parts first)."""
        self._totals: list[int] = []
        """Tokens up to and including each part of the previous request."""
        running, total_ = "", 0
        for part in head:
            running, total_ = _digest(running + _digest(compact_json(part))), total_ + _tokens(part)
            self._runs.append(running)
            self._totals.append(total_)
        self._head = len(head)

    def split(self, ts: float, messages: list[Message],
              ttl: tuple[float, float] = (TTL_5M, TTL_5M)) -> tuple[int, int, dict[float, int]]:
        """(input tokens, tokens read, tokens written by TTL) of one request sent at `ts`, writing its system
        prompt's breakpoint with `ttl[0]` and its newest message's with `ttl[1]`."""
        same = _shared(self._prev, messages)
        runs, totals = self._runs[: self._head + same], self._totals[: self._head + same]
        for message in messages[same:]:
            digest, tokens = self._part(message)
            runs.append(_digest(runs[-1] + digest))
            totals.append(totals[-1] + tokens)
        self._prev, self._runs, self._totals = list(messages), runs, totals
        hit = next((i for i in range(len(runs) - 1, -1, -1) if self._alive(runs[i], ts)), None)
        read = totals[hit] if hit is not None else 0
        if hit is not None:  # a read refreshes the entry for its own TTL
            self._cache[runs[hit]] = (ts, self._cache[runs[hit]][1])
        head_end = totals[self._head - 1]
        written = {ttl[0]: max(0, head_end - read)}
        written[ttl[1]] = written.get(ttl[1], 0) + totals[-1] - max(read, head_end)
        for i, life in ((self._head - 1, ttl[0]), (len(runs) - 1, ttl[1])):  # the breakpoints
            kept = self._cache.get(runs[i])
            self._cache[runs[i]] = (ts, max(life, kept[1]) if kept and kept[0] + kept[1] >= ts else life)
        return totals[-1], read, written

    def price(self, ts: float, messages: list[Message], read_mult: float | None = None,
              ttl: float = TTL) -> tuple[int, float]:
        """(input tokens, billed equivalents) of one request sent at `ts`, its cache reads at `read_mult` (the
        model's rate of the request; the model's default when None), both breakpoints written with a lifetime
        of `ttl` seconds (past 5 minutes: the 1-hour cache, its writes at 2x)."""
        tokens, read, written = self.split(ts, messages, (ttl, ttl))
        mult = self.read_mult if read_mult is None else read_mult
        return tokens, sum(written.values()) * (WRITE_1H_MULT if ttl > TTL else WRITE_5M_MULT) + read * mult

    def _alive(self, digest: str, ts: float) -> bool:
        entry = self._cache.get(digest)
        return entry is not None and entry[0] + entry[1] >= ts

    def _part(self, message: Message) -> tuple[str, int]:
        return message.api_digest, _chars_tokens(message.api_size[1])


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


def served_by(records: Sequence[rec.Record]) -> list[str]:
    """The model that served each answered request, in the order `replay` yields them.

    A request record names its model; older ones do not, and then the session's model as
    of that request (its head, or the latest `model` switch before it) is the one.
    """
    current, pending, served = head_of(records).model, None, []
    for record in rec.of(records, rec.ModelSwitched, rec.RequestMade, rec.UsageRecorded):
        if isinstance(record, rec.ModelSwitched):
            current = record.model
        elif isinstance(record, rec.RequestMade):
            pending = record.model or current
        elif pending is not None:
            served.append(pending)
            pending = None
    return served


def request_rates(sent: list[Sent], read_mult: float | list[float] | None = None,
                  prices: list[Price] | None = None) -> list[Rates]:
    """Each request's rates: its own model's, with `read_mult` (one rate, or one per request) for cache reads
    when given, and `prices` (one per request) for dollars when given."""
    rates = [rates_of(s.model) for s in sent]
    if prices is not None:
        rates = [Rates(p.read_mult, usd_per_token=p.input / 1e6) for p in prices]
    if read_mult is not None:
        mults = read_mult if isinstance(read_mult, list) else [read_mult] * len(sent)
        rates = [Rates(m, r.write_5m, r.write_1h, r.usd_per_token) for r, m in zip(rates, mults)]
    return rates


def usd(splits: list[Split], rates: list[Rates]) -> float | None:
    """Dollars of a run's input; None when a request's model has no price."""
    if any(r.usd_per_token is None for r in rates):
        return None
    return sum(s.billed(r) * (r.usd_per_token or 0.0) for s, r in zip(splits, rates))


def seam_savings(records: Sequence[rec.Record], read_mult: float | list[float] | None = None,
                 prices: list[Price] | None = None, per_request: bool = False) -> dict[str, Any]:
    """Billed input as it happened beside the same requests rebuilt without any seam.

    `read_mult` is the cache-read rate for every request, or one per answered request (None: each
    request's own model's rate); `cache_read_multiplier` is then that one rate, or None when the
    requests' rates differ. With `prices` (one per answered request), each request is also priced
    in dollars at its own model: `billed_input_usd` and `billed_input_usd_without_seams`.

    With `per_request`, also each answered request's billed input as it happened and without
    seams (`billed_per_request`, `billed_per_request_without_seams`), which add up to the totals.
    """
    actual = replay(records, seams=True)
    without = replay(records, seams=False)
    rates = request_rates(actual, read_mult, prices)
    fitted = fit(records, actual)
    each = [input_equivalents(s.usage, r) for s, r in zip(actual, rates)]
    billed = sum(each)
    sim, free = bill(actual, fitted), bill(without, fitted)
    sim_billed = sum(s.billed(r) for s, r in zip(sim, rates))
    free_each = [s.billed(r) for s, r in zip(free, rates)]
    free_billed = sum(free_each)
    # A further request reads its whole prefix from cache: the seams save what they hold out of it now
    # (the strips and cuts in force, from their own records, so the figure is right at once after a seam
    # and falls to nothing after /unhandoff; the last request sent may predate either).
    held = held_out(records)
    further = _chars_tokens(held) * fitted.scale * rates[-1].read if actual and held > 0 else 0.0
    mults = {r.read for r in rates}
    dollars = {} if prices is None else {"billed_input_usd": round(_usd_of(each, rates), 4),
                                         "billed_input_usd_without_seams": round(_usd_of(free_each, rates), 4)}
    series = {"billed_per_request": each, "billed_per_request_without_seams": free_each}
    return {
        **dollars,
        **(series if per_request else {}),
        "answered_requests": len(actual),
        "seams": sum(1 for _ in rec.of(records, rec.Seam)),
        "cache_read_multiplier": mults.pop() if len(mults) == 1 else (read_mult if isinstance(read_mult, float) else None),
        "cache_write_multiplier": WRITE_5M_MULT,
        "cache_write_1h_multiplier": WRITE_1H_MULT,
        "cache_write_1h_tokens": sum(s.usage.get(WRITE_1H_KEY, 0) for s in actual),
        "input_tokens": sum(reported(s.usage) for s in actual),
        "billed_input_tokens": round(billed),
        "input_tokens_without_seams": round(sum(s.tokens for s in free)),
        "billed_input_tokens_without_seams": round(free_billed),
        "billed_input_tokens_simulated": round(sim_billed),
        "token_scale": round(fitted.scale, 4),
        "saving": round(1 - billed / free_billed, 4) if free_billed else 0.0,
        "saving_per_further_request": round(further),
    }


def _usd_of(equivalents: list[float], rates: list[Rates]) -> float:
    return sum(e * (r.usd_per_token or 0.0) for e, r in zip(equivalents, rates))


def held_out(records: Sequence[rec.Record]) -> int:
    """Bytes of request the seams and rolling cuts in force keep out of the context (undone seams excluded)."""
    undone = {r.seam for r in rec.of(records, rec.Unseam)}
    return sum(r.before.request_bytes - r.after.request_bytes for r in rec.of(records, rec.Seam, rec.Prune)
               if isinstance(r, rec.Prune) or r.seam not in undone)
