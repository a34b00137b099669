"""The model's context window: its size, when the automatic seam is due, and whether a request fits.

Sizes come from the one model table (core/pricing.py: Claude models 1M, the 4.5 generation
200K); an id that names a 1M variant (`…[1m]`, `…-1m`) is 1M whatever the table says; a
model the table does not know (a local model behind the openai provider) gets
`OTHER_WINDOW`. The `context_window` setting overrides all of these.

The automatic seam is asked for when the context has filled `handoff_at_share` of the room
the last seam left (of the whole window before any seam; default 0.4, docs/performance.md
says why), so a context a seam left large (much text) is not handed off again after every
turn. `handoff_at_tokens` replaces the share when set (core/turn_end.py).

Whether a request fits is judged on rhapsody's own estimate (core/tokens.py) calibrated by
the last request the API reported usage for: the estimate of the request about to go, times
the ratio of reported to estimated tokens of that earlier request. The estimate pads for
the newer tokenizer; the calibration takes the padding out where the model does not need it.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import re
from typing import Any

from rhapsody.core.pricing import price_of, priced
from rhapsody.core.session_figures import reported_input

OTHER_WINDOW = 128_000
"""The window assumed for a model the table does not know; set `context_window` for yours."""
ONE_MILLION = 1_000_000
_ONE_M = re.compile(r"(?:\[1m\]|[-_:]1m)(?:$|[-_@\]])", re.IGNORECASE)


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


def expected_tokens(records: list[dict[str, Any]], estimate: int) -> int:
    """`estimate` calibrated by the last request whose usage was reported (as is when none was)."""
    reported, estimated = 0, 0
    for record in reversed(records):
        if record["kind"] == "usage" and not reported:
            reported = reported_input(record)
        elif record["kind"] == "request" and reported:
            estimated = int(record.get("est_tokens") or 0)
            break
    if not reported or not estimated:
        return estimate
    return round(estimate * reported / estimated)


def too_long(tokens: int, window: int) -> str:
    """The refusal in the API's own words, for a request rhapsody will not send."""
    return f"prompt is too long: {tokens} tokens > {window} maximum (rhapsody's estimate; not sent)"
