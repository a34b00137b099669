"""The session's figures, with one definition each, folded from its history records.

- context: rhapsody's estimate of the tokens of the request it would send now (the last
  request's estimate; a seam or a rolling cut sets it to their "after" figure, an undone
  seam adds back what the seam took). The status bar, the seam divider, `/stats` and
  `rhapsody stats` all show this figure, so after a seam it falls by what the divider says
  (the divider also shows the figure when the handoff was asked, before the note was added).
- cost: every request priced at the model that served it (a `/model` switch does not
  reprice the past).
- seams: committed seams, and how many of them were undone; seam numbers never repeat.
- usage: the tokens every request reported, summed per kind; last_usage the latest request's.

This is the one fold of these figures: the session keeps one (`Session.figures`), and the
status bar, `/stats`, `rhapsody stats`, the headless result and the `max_cost_usd` limit all
read it, so they cannot disagree.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import assert_never

from rhapsody.core.session import records as rec
from rhapsody.core.pricing import WRITE_1H_KEY, cost, price_of, priced
from rhapsody.core.window import Evidence, Window, session_window

USAGE_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
"""The usage the API reports per request; the first three together are the request's input."""


def reported_input(usage: Mapping[str, int]) -> int:
    """The input tokens a usage report counts (uncached, cache writes and cache reads)."""
    return sum(int(usage.get(k) or 0) for k in USAGE_KEYS[:3])


def usage_input(record: rec.UsageRecorded) -> int:
    """`reported_input` of a usage record."""
    return record.input_tokens + record.cache_creation_input_tokens + record.cache_read_input_tokens


@dataclass
class SessionFigures:
    """Running figures of one session."""

    model: str = ""
    context: int = 0
    cost: float = 0.0
    exact_price: bool = True
    priced: bool = True
    """False once any request ran on a model the price table does not know (cost unknown)."""
    seams: int = 0
    undone: int = 0
    requests: int = 0
    tool_calls: int = 0
    violations: int = 0
    hints: int = 0
    usage: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_KEYS, 0))
    last_usage: dict[str, int] = field(default_factory=dict)
    last_request_tokens: int = 0
    """The estimate of the last request sent (a seam does not change it)."""
    last_request_at: float = 0.0
    """When the last request went (0: none yet)."""
    cache_lifetime: float = 300.0
    """Seconds the cache entries of the last request live: 300, or 3600 when it went with the 1-hour cache."""
    seam_after: dict[int, tuple[int, int]] = field(default_factory=dict)
    after_last_seam: int = 0
    """The estimated context the latest seam left (0 with no seam): where a window share is measured from."""
    folded: int = 0
    answering: str = ""
    """The model the latest request went to: its usage is priced at that model (an imported session mixes them)."""
    evidence: Evidence = field(default_factory=Evidence)
    """What the history says about the window it runs in (core/window.py)."""
    window_setting: int | None = None
    """The `context_window` setting, when the session has one (the loop sets it)."""
    delegated_cost: float = 0.0
    """What the session's sub-agents spent, each at its own model (their `subagent` records): `max_cost_usd`
    counts it with the session's own cost."""

    @property
    def tokens_spent(self) -> int:
        """Every token the session's requests used, as reported: input, cache writes and reads, output."""
        return sum(int(self.usage.get(k) or 0) for k in USAGE_KEYS)

    @property
    def window(self) -> int:
        """The context window the session runs in (core/window.py)."""
        return self.window_found().tokens

    def window_found(self) -> Window:
        """The window the session runs in, with where the figure came from."""
        return session_window(self.model, self.evidence, self.window_setting)

    @property
    def cache_ratio(self) -> float | None:
        """Share of the last request's input read from the cache; None before any usage."""
        reported = reported_input(self.last_usage)
        return self.last_usage.get("cache_read_input_tokens", 0) / reported if reported else None

    def cache_cold(self, now: float) -> bool:
        """Whether the prompt cache the last request left has expired by `now` (the next request writes it again)."""
        return bool(self.requests) and now - self.last_request_at > self.cache_lifetime

    def context_tokens(self) -> int:
        """The best figure for the active context: API-reported when fresh, else estimated."""
        return reported_input(self.last_usage) or self.last_request_tokens

    def fold(self, records: Sequence[rec.Record]) -> SessionFigures:
        """Fold the records not seen yet (records only ever grow)."""
        for record in records[self.folded:]:
            self.add(record)
        return self

    def add(self, record: rec.Record) -> None:
        """Fold one more record."""
        self.folded += 1
        match record:  # the kinds a history holds most of come first: each case is an isinstance check
            case rec.MessageAdded():
                pass
            case rec.RequestMade():
                self.requests += 1
                self.context = self.last_request_tokens = record.est_tokens
                self.last_request_at, self.cache_lifetime = record.ts, 3600.0 if record.cache_ttl == "1h" else 300.0
                self.answering = record.model or self.model
                if self.answering != self.model:  # a request to another model than the session's (imported)
                    self.exact_price = self.exact_price and price_of(self.answering)[1]
                    self.priced = self.priced and priced(self.answering)
            case rec.UsageRecorded():
                used = {k: getattr(record, k) for k in USAGE_KEYS}
                if record.cache_creation_1h_input_tokens:  # billed at 2x, not 1.25x
                    used[WRITE_1H_KEY] = record.cache_creation_1h_input_tokens
                self._used(used)
                self.evidence.add(record)
            case rec.ToolRun():
                self.tool_calls += 1
            case rec.Subagent():
                if record.state != "started":  # at its own model (0 for a model without a price)
                    self.delegated_cost += record.cost_usd
            case rec.SessionStarted() | rec.ModelSwitched():
                self._priced_at(record.model or self.model)
            case rec.Seam():
                self.context = record.after.est_tokens
                self.seams += 1
                self.seam_after[record.seam] = (record.before.est_tokens, record.after.est_tokens)
                self.after_last_seam = record.after.est_tokens
            case rec.Prune():
                self.context = record.after.est_tokens
            case rec.Shelve():  # the second window: what the latest seam left is now smaller
                self.context = self.after_last_seam = record.after_tokens
            case rec.Unseam():
                self.undone += 1
                before, after = self.seam_after.get(record.seam, (0, 0))
                self.context += before - after
            case rec.ConversationRewind():
                if record.est_tokens is not None:  # the context fell back with the conversation
                    self.context = record.est_tokens
            case rec.Violation():
                self.violations += 1
            case rec.Hint():
                self.hints += 1
            case (rec.Retry() | rec.HintsDelivered() | rec.Permission() | rec.PermissionMode()
                  | rec.Denial() | rec.Todo() | rec.MemoryReminder() | rec.Handoff() | rec.LegacyHandoffAsked() | rec.SeamTokens()
                  | rec.SeamFailed() | rec.HandoffAbandoned() | rec.ThinkingCut() | rec.SeamNote() | rec.Tools()
                  | rec.NoticeShown() | rec.TurnInterrupted() | rec.Limit() | rec.Error() | rec.Resumed() | rec.Hook()
                  | rec.Checkpoint() | rec.CheckpointFailed() | rec.Restore() | rec.KeptAside() | rec.Other()):
                pass
            case rec.Import() | rec.Compaction():
                self.evidence.add(record)
            case _:
                assert_never(record)

    def _priced_at(self, model: str) -> None:
        self.model, self.answering = model, ""
        self.exact_price = self.exact_price and price_of(model)[1]
        self.priced = self.priced and priced(model)

    def _used(self, usage: dict[str, int]) -> None:
        self.cost += cost(self.answering or self.model, usage)
        self.last_usage = usage
        for key, value in usage.items():
            self.usage[key] = self.usage.get(key, 0) + value

    def seams_text(self) -> str:
        """"seams 2" or "seams 2 (1 undone)"."""
        return f"seams {self.seams}" + (f" ({self.undone} undone)" if self.undone else "")

    def context_text(self) -> str:
        """"ctx ~4,592 (2.3%)" of the window the session runs in; no share for a model whose window is unknown
        (not in the price table, and no setting)."""
        share = f" ({self.context / self.window:.1%})" if (self.priced or self.window_setting) and self.window else ""
        return f"ctx ~{self.context:,}{share}"

    def cost_text(self) -> str:
        """"$0.12", with "?" when a model was priced by its family; "cost unknown" for unpriced models."""
        if not self.priced:
            return "cost unknown"
        return f"${self.cost:.2f}" + ("" if self.exact_price else "?")

    def spend_text(self, running: float = 0.0) -> str:
        """The cost with what sub-agents spent, theirs named: "$0.15 (sub-agents $0.03)"; `running`: the spend of
        sub-agents under way (their records are written when they end)."""
        theirs = self.delegated_cost + running
        if not self.priced or theirs <= 0:
            return self.cost_text()
        return f"${self.cost + theirs:.2f}" + ("" if self.exact_price else "?") + f" (sub-agents ${theirs:.2f})"


def figures(records: Sequence[rec.Record]) -> SessionFigures:
    """The figures of a whole history."""
    return SessionFigures().fold(records)
