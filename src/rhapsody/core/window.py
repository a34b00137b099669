"""The context window a session runs in: its size and where it came from, when the automatic seam is
due, and whether a request fits.

One figure for the status bar, the automatic seam, the request check, `rhapsody stats` and
the what-if (`session_window`), found in this order and stated with its source:

1. the `context_window` setting (`--context-window N`, `RHAPSODY_CONTEXT_WINDOW`, config);
2. the window the source reported (a Codex rollout's `model_context_window`);
3. a model id that names the 1M context (`…[1m]`, `…-1m`);
4. a request whose reported input passed 200k: the 1M context was on;
5. an automatic compaction (an imported Claude Code `compact_boundary`, trigger not
   `manual`): the window it compacted in, 200k for `preTokens` up to 200k (Claude Code
   compacts on its own at about 167k of 200k);
6. an imported Claude Code session: 200k, Claude Code's standard window for Claude models
   unless the 1M context is turned on (which 3-5 would show);
7. the model table (core/pricing.py: Claude models 1M, the 4.5 generation 200K), else
   `OTHER_WINDOW` for a model the table does not know (a local model behind openai).

The automatic seam is asked for when the context has filled `handoff_at_share` of the room
the last seam left (of the whole window before any seam; default 0.4, docs/performance.md
says why), so a context a seam left large (much text) is not handed off again after every
turn. `handoff_at_tokens` replaces the share when set (core/agent/turn_end.py).

Whether a request fits is judged on rhapsody's own estimate (core/session/tokens.py) calibrated by
the last request the API reported usage for: the estimate of the request about to go, times
the ratio of reported to estimated tokens of that earlier request. The estimate pads for
the newer tokenizer; the calibration takes the padding out where the model does not need it.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rhapsody.core.session import records as rec
from rhapsody.core.pricing import price_of, priced

OTHER_WINDOW = 128_000
"""The window assumed for a model the table does not know; set `context_window` for yours."""
ONE_MILLION = 1_000_000
STANDARD = 200_000
"""The standard window of Claude models run without the 1M context (Claude Code's default)."""
_ONE_M = re.compile(r"(?:\[1m\]|[-_:]1m)(?:$|[-_@\]])", re.IGNORECASE)


@dataclass(frozen=True)
class Window:
    """A context window in tokens and where the figure came from (said wherever it is shown)."""

    tokens: int
    source: str
    assumed: bool = False
    """True for the figure assumed for a model nothing says anything about."""


@dataclass
class Evidence:
    """What a history says about its window, folded record by record (core/session/session_figures.py)."""

    imported: str = ""
    """The source format of an imported history (`claude-code`, `codex`), else empty."""
    reported: int = 0
    """The window the source reported (Codex `model_context_window`)."""
    compacted_at: int = 0
    """The largest context a source compaction started from (`preTokens`)."""
    peak: int = 0
    """The largest input a request reported."""

    def add(self, record: rec.Record) -> None:
        """Fold one record (the others say nothing of the window)."""
        if isinstance(record, rec.UsageRecorded):
            self.peak = max(self.peak, record.input_tokens + record.cache_creation_input_tokens
                            + record.cache_read_input_tokens)
        elif isinstance(record, rec.Import):
            self.imported = record.format
            window = rec.extra(record, "context_window")
            self.reported = window if isinstance(window, int) and not isinstance(window, bool) else 0
        elif isinstance(record, rec.Compaction):
            pre, trigger = rec.extra(record, "pre_tokens"), rec.extra(record, "trigger")
            if isinstance(pre, int) and trigger != "manual":
                # a compaction the source made on its own came near its window; one a person asked for says nothing
                self.compacted_at = max(self.compacted_at, pre)


_INPUT = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def session_window(model: str, evidence: Evidence, setting: int | None = None,
                   setting_source: str = "the context_window setting") -> Window:
    """The window a session runs (or ran) in, and why (module docstring)."""
    if setting:
        return Window(setting, setting_source)
    if evidence.reported:
        return Window(evidence.reported, "the window the source reported (model_context_window)")
    if _ONE_M.search(model):
        return Window(ONE_MILLION, f"the model id {model} names the 1M context")
    if evidence.peak > STANDARD:
        return Window(ONE_MILLION, f"a request of {evidence.peak:,} tokens: more than 200k, so the 1M context was on")
    if evidence.compacted_at:
        size = STANDARD if evidence.compacted_at <= STANDARD else ONE_MILLION
        return Window(size, f"the source compacted on its own at {evidence.compacted_at:,} tokens (compaction "
                            f"preTokens): a {size // 1000:,}k window")
    if evidence.imported == "claude-code" and "claude" in model:
        return Window(STANDARD, "Claude Code's standard window for Claude models (no sign of the 1M context)")
    if priced(model):
        return Window(price_of(model)[0].window, f"the model table's window for {model}")
    return Window(OTHER_WINDOW, f"{model or 'the model'} is not in the model table: the window assumed for others",
                  assumed=True)


def history_window(records: Sequence[rec.Record], model: str, setting: int | None = None,
                   setting_source: str = "the context_window setting") -> Window:
    """`session_window` of a whole history."""
    evidence = Evidence()
    for record in records:
        evidence.add(record)
    return session_window(model, evidence, setting, setting_source)


def context_window(model: str, override: int | None = None) -> int:
    """The context window of `model` in tokens: the setting, a 1M id, the table, else OTHER_WINDOW."""
    if override:
        return override
    if _ONE_M.search(model):
        return ONE_MILLION
    return price_of(model)[0].window if priced(model) else OTHER_WINDOW


def share_limit(share: float, window: int, after_last_seam: int) -> int:
    """The context size at which the automatic seam is asked for: `share` of the room the last seam left."""
    return after_last_seam + int(share * (window - after_last_seam))


def expected_tokens(records: Sequence[rec.Record], estimate: int) -> int:
    """`estimate` calibrated by the last request whose usage was reported (as is when none was)."""
    reported, estimated = 0, 0
    for record in rec.of(reversed(records), rec.UsageRecorded, rec.RequestMade):
        if isinstance(record, rec.UsageRecorded) and not reported:
            reported = record.input_tokens + record.cache_creation_input_tokens + record.cache_read_input_tokens
        elif isinstance(record, rec.RequestMade) and reported:
            estimated = record.est_tokens
            break
    if not reported or not estimated:
        return estimate
    return round(estimate * reported / estimated)


def too_long(tokens: int, window: int) -> str:
    """The refusal in the API's own words, for a request rhapsody will not send."""
    return f"prompt is too long: {tokens} tokens > {window} maximum (rhapsody's estimate; not sent)"
