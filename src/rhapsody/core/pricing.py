"""Model prices and context windows, in one table, and the cost of reported usage.

Prices in USD per million tokens, from the Claude platform's pricing and model pages
(read 2026-11-29). Cache writes cost 1.25x base input with the 5-minute TTL and 2x with the
1-hour one (usage names the 1-hour part `cache_creation_1h_input_tokens`); cache reads cost
`read_mult` x base input, which differs on the newest models. A model that is not Claude
bills no write premium (OpenAI caches on its own: what is not read is plain input). A model missing from the
table is priced by the first prefix that matches, and said to be an estimate. Bedrock
(`us.anthropic.claude-...-v1:0`) and Vertex (`claude-...@20250929`) ids are read in their
Claude API form. A model that is not Claude at all (a local model behind the openai
provider) has no price: `priced()` says so and front ends show "unknown", never a guess.

Imports: stdlib only.
"""

from __future__ import annotations

import re
from functools import lru_cache
from dataclasses import dataclass

WRITE_5M_MULT = 1.25
WRITE_1H_MULT = 2.0
WRITE_1H_KEY = "cache_creation_1h_input_tokens"
"""A 1-hour cache write, per base input token (FACTS: 1h write = 2×)."""


@dataclass(frozen=True)
class Price:
    """Base prices and cache-read multiplier of one model."""

    input: float
    output: float
    read_mult: float = 0.1
    window: int = 1_000_000


PRICES: dict[str, Price] = {
    "claude-fable-5-1": Price(10.0, 50.0, 0.025),
    "claude-mythos-5-1": Price(10.0, 50.0, 0.025),
    "claude-fable-5": Price(10.0, 50.0),
    "claude-mythos-5": Price(10.0, 50.0),
    "claude-opus-5-5": Price(4.0, 20.0, 0.05),
    "claude-sonnet-5-5": Price(2.0, 10.0, 0.05),
    "claude-haiku-5-5": Price(0.10, 0.50),
    "claude-opus-5": Price(5.0, 25.0),
    "claude-sonnet-5": Price(2.0, 10.0),
    "claude-opus-4-8": Price(5.0, 25.0),
    "claude-opus-4-7": Price(5.0, 25.0),
    "claude-opus-4-6": Price(5.0, 25.0),
    "claude-sonnet-4-6": Price(3.0, 15.0),
    "claude-opus-4-5": Price(5.0, 25.0, window=200_000),
    "claude-sonnet-4-5": Price(3.0, 15.0, window=200_000),
    "claude-haiku-4-5": Price(1.0, 5.0, window=200_000),
}
FAMILY_FALLBACK = {"fable": "claude-fable-5-1", "mythos": "claude-mythos-5-1", "opus": "claude-opus-5-5",
                   "sonnet": "claude-sonnet-5-5", "haiku": "claude-haiku-5-5"}


_PLATFORM = re.compile(r"^(?:[a-z]{2,4}\.)?anthropic\.")


def canonical(model: str) -> str:
    """A Bedrock or Vertex model id in the Claude API's form (`claude-sonnet-4-5-20250929`)."""
    return _PLATFORM.sub("", model).replace("@", "-").removesuffix("-v1:0").removesuffix("-v1")


def priced(model: str) -> bool:
    """Whether the table has a price for this model (exact or by family); False for non-Claude models."""
    model = canonical(model)
    return "claude" in model and (any(model.startswith(k) for k in PRICES) or any(f in model for f in FAMILY_FALLBACK))


def price_of(model: str) -> tuple[Price, bool]:
    """(price, exact) for a model id; exact is False when a family fallback was used."""
    model = canonical(model)
    if model in PRICES:
        return PRICES[model], True
    for known in sorted(PRICES, key=len, reverse=True):
        if model.startswith(known):
            return PRICES[known], True
    for family, known in FAMILY_FALLBACK.items():
        if family in model:
            return PRICES[known], False
    return PRICES["claude-sonnet-5-5"], False


@dataclass(frozen=True)
class Rates:
    """What one request's input tokens cost, as multiples of base input, and base input in dollars per token."""

    read: float
    write_5m: float = WRITE_5M_MULT
    write_1h: float = WRITE_1H_MULT
    usd_per_token: float | None = None
    """None for a model the table has no price for."""


@lru_cache(maxsize=256)
def rates_of(model: str, read_mult: float | None = None) -> Rates:
    """The rates of `model`'s requests; `read_mult` overrides its cache-read rate (kept per model: the what-if
    asks once per request of every row, and the table does not change)."""
    if not priced(model):
        return Rates(0.1 if read_mult is None else read_mult, 1.0, 1.0)
    price = price_of(model)[0]
    return Rates(price.read_mult if read_mult is None else read_mult, usd_per_token=price.input / 1e6)


def input_equivalents(usage: dict[str, int], rates: Rates) -> float:
    """Base-input-token equivalents of one request's reported input (or a sum of them)."""
    hour = min(usage.get(WRITE_1H_KEY, 0), usage.get("cache_creation_input_tokens", 0))
    return (usage.get("input_tokens", 0) + (usage.get("cache_creation_input_tokens", 0) - hour) * rates.write_5m
            + hour * rates.write_1h + usage.get("cache_read_input_tokens", 0) * rates.read)


def cost(model: str, usage: dict[str, int]) -> float:
    """Dollars for one usage record (or a sum of them)."""
    price, _ = price_of(model)
    rates = Rates(price.read_mult)
    return input_equivalents(usage, rates) * price.input / 1e6 + usage.get("output_tokens", 0) * price.output / 1e6
