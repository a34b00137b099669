"""The prompt cache's lifetime that pays: 5 minutes or 1 hour, chosen from the session's own pauses.

A cache entry lives 5 minutes by default (`cache_control: {"type": "ephemeral"}`), or an hour
(`"ttl": "1h"`); each read refreshes it. A 5-minute write bills 1.25× base input, a 1-hour
write 2×, a read 0.1× (the model's rate; FACTS.md). So a person who pauses longer than five
minutes between turns pays a full re-write of the context at 1.25× after every pause with the
5-minute cache, where the 1-hour one reads it back; against that, every write, the growing
tail of each request included, costs 2× instead of 1.25×.

The rule (`choose`): price the requests this session has sent so far under both lifetimes,
each request reading what the one before it left cached when it came within the lifetime
(and did not shrink: a seam re-writes), and writing the rest; the 1-hour cache is used from
the next request on when it would have billed less. With no pause past five minutes it never
does (its writes only cost more); with enough of them it does, and it goes back when the
pauses stop paying for it. The `cache_ttl` setting fixes one instead (`5m`, `1h`; `auto`:
this rule). Each request record says `cache_ttl: "1h"` when it went with the hour, so every
figure about the session knows what was sent.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import Sequence

from rhapsody.core.pricing import WRITE_1H_MULT, WRITE_5M_MULT
from rhapsody.core.session.session_figures import usage_input
from rhapsody.core.session import records as rec

FIVE_MINUTES = "5m"
ONE_HOUR = "1h"
SECONDS = {FIVE_MINUTES: 300.0, ONE_HOUR: 3600.0}
WRITES = {FIVE_MINUTES: WRITE_5M_MULT, ONE_HOUR: WRITE_1H_MULT}


class Ledger:
    """The same requests billed under both lifetimes, one request at a time."""

    def __init__(self, read_mult: float = 0.1) -> None:
        self.read_mult = read_mult
        self.totals = dict.fromkeys(SECONDS, 0.0)
        self._last: tuple[float, int] | None = None

    def add(self, ts: float, size: int) -> None:
        """One more request of `size` input tokens sent at `ts`."""
        for ttl in SECONDS:
            warm = self._last is not None and ts - self._last[0] <= SECONDS[ttl] and size >= self._last[1]
            read = self._last[1] if warm and self._last is not None else 0
            self.totals[ttl] += read * self.read_mult + (size - read) * WRITES[ttl]
        self._last = (ts, size)

    def cheaper(self) -> str:
        """The lifetime that billed less so far (the 5-minute one on a tie or with no request)."""
        return ONE_HOUR if self.totals[ONE_HOUR] < self.totals[FIVE_MINUTES] else FIVE_MINUTES


def billed(requests: Sequence[tuple[float, int]], ttl: str, read_mult: float = 0.1) -> float:
    """Base-input equivalents of these (time, input tokens) requests with every entry of lifetime `ttl`."""
    ledger = Ledger(read_mult)
    for ts, size in requests:
        ledger.add(ts, size)
    return ledger.totals[ttl]


def choose(requests: Sequence[tuple[float, int]], read_mult: float = 0.1) -> str:
    """The lifetime that would have billed these requests less (the 5-minute one on a tie or with none)."""
    ledger = Ledger(read_mult)
    for ts, size in requests:
        ledger.add(ts, size)
    return ledger.cheaper()


class TtlChoice:
    """The live choice: folds the session's request records as they grow and answers `choose` for them."""

    def __init__(self, setting: str = "auto", read_mult: float = 0.1) -> None:
        self.setting = setting
        self.ledger = Ledger(read_mult)
        self._seen = 0
        self._pending: tuple[float, int] | None = None

    def ttl(self, records: Sequence[rec.Record]) -> str:
        """The lifetime for the next request (the setting when it fixes one)."""
        if self.setting in SECONDS:
            return self.setting
        for record in rec.of(records[self._seen:], rec.RequestMade, rec.UsageRecorded):  # answered requests, at the input
            if isinstance(record, rec.RequestMade):                               # the API reported where it did
                self._pending = (record.ts, record.est_tokens)
            elif self._pending is not None:
                self.ledger.add(self._pending[0], usage_input(record) or self._pending[1])
                self._pending = None
        self._seen = len(records)
        return self.ledger.cheaper()

    def seconds(self, records: Sequence[rec.Record]) -> float:
        """The lifetime for the next request, in seconds."""
        return SECONDS[self.ttl(records)]

