"""Model prices and context windows, in one table, and the cost of reported usage.

Prices in USD per million tokens, from the Claude platform's pricing and model pages
(read 2026-11-29). Cache writes (5-minute TTL) cost 1.25x base input; cache reads cost
`read_mult` x base input, which differs on the newest models. A model missing from the
table is priced by the first prefix that matches, and said to be an estimate. Bedrock
(`us.anthropic.claude-...-v1:0`) and Vertex (`claude-...@20250929`) ids are read in their
Claude API form. A model that is not Claude at all (a local model behind the openai
provider) has no price: `priced()` says so and front ends show "unknown", never a guess.

Imports: stdlib only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WRITE_5M_MULT = 1.25
WRITE_1H_MULT = 2.0
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


def cost(model: str, usage: dict[str, int]) -> float:
    """Dollars for one usage record (or a sum of them)."""
    price, _ = price_of(model)
    per = price.input / 1e6
    return (
        usage.get("input_tokens", 0) * per
        + usage.get("cache_creation_input_tokens", 0) * per * WRITE_5M_MULT
        + usage.get("cache_read_input_tokens", 0) * per * price.read_mult
        + usage.get("output_tokens", 0) * price.output / 1e6
    )
