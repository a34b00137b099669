"""How the loop behaves, and the limits that end a turn.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from dataclasses import dataclass

from rhapsody.core.events import LimitsExceeded
from rhapsody.core.session.rolling import RollingPolicy
from rhapsody.core.session.session import Session
from rhapsody.core.session import records as rec


@dataclass(frozen=True)
class Policy:
    """How the loop behaves; the texts come from prompts/."""

    narration_rule: str
    handoff_request: str
    handoff_reminder: str
    continue_after_handoff: str
    window_request: str
    """What the agent is told after a strip at the window (str.format: reason, seam, index)."""
    window_note: str = "{reason}\n{index}"
    """What the agent is told when the oldest calls left to make room for its note at the window (str.format:
    reason, index)."""
    narration_min_words: int = 8
    parallel_tools: bool = False
    handoff_at_tokens: int | None = None
    handoff_at_share: float | None = None
    """Ask for a seam when the context reaches this share of the window (core/window.py); None: off."""
    checkpoint_seams: bool = True
    """The `checkpoint` policy: a seam at the first natural pause once it pays (core/accounting/natural_seam.py); the
    share or token threshold stays the hard net. False: only the threshold."""
    cache_ttl: str = "auto"
    """The prompt cache's lifetime: "auto" (the one that pays, core/accounting/cache_ttl.py), "5m" or "1h"."""
    context_window: int | None = None
    """The model's window in tokens, when the table's figure is not the one to use."""
    bash_timeout: float = 120.0
    output_cap: int = 30000
    exact_tokens: bool = False
    rolling: RollingPolicy | None = None
    max_steps_per_turn: int | None = None
    """Requests one turn may send; the turn ends with LimitsExceeded before the next one."""
    max_cost_usd: float | None = None
    """The session's estimated cost, its sub-agents' included, at which turns end with LimitsExceeded before a request."""
    max_tool_calls: int | None = None
    """Tool calls the session may make; its turn ends with LimitsExceeded before the next request (a sub-agent's budget)."""
    max_tokens_spent: int | None = None
    """Tokens (input, cache and output, as reported) the session may use before its turn ends (a sub-agent's budget)."""
    memory_reminder: str | None = None
    """Sent once at the end of a task that used tools, when project memory is on (seed 001)."""
    memory_path: str = "docs/memory"
    """The memory folder: a task that already wrote there is not reminded."""
    plan_note: str = ""
    """What plan mode asks of the agent (prompts/plan_mode.md): sent once, with the human's next message, after
    the session is switched into plan mode (a session started in it has it in its system prompt)."""


def limit_reached(policy: Policy, session: Session, steps: int) -> LimitsExceeded | None:
    """The limit that forbids the next request after `steps` requests this turn (recorded); None when it may go."""
    if policy.max_steps_per_turn is not None and steps >= policy.max_steps_per_turn:
        return _limit(session, "max_steps_per_turn", steps, policy.max_steps_per_turn)
    figures = session.figures
    if policy.max_tool_calls is not None and figures.tool_calls >= policy.max_tool_calls:
        return _limit(session, "max_tool_calls", figures.tool_calls, policy.max_tool_calls)
    if policy.max_tokens_spent is not None and figures.tokens_spent >= policy.max_tokens_spent:
        return _limit(session, "max_tokens_spent", figures.tokens_spent, policy.max_tokens_spent)
    # each request priced at the model that served it, as the status bar does
    if policy.max_cost_usd is not None and figures.priced:  # no price, no guessed limit
        spent = figures.cost + figures.delegated_cost  # its sub-agents' spend counts too
        if spent >= policy.max_cost_usd:
            return _limit(session, "max_cost_usd", round(spent, 4), policy.max_cost_usd)
    return None


def _limit(session: Session, name: str, value: float, maximum: float) -> LimitsExceeded:
    session.append(rec.Limit(limit=name, value=value, maximum=maximum))
    return LimitsExceeded(name, value, maximum)
