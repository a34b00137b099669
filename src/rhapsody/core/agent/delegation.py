"""What an agent lends the sub-agents it starts, and what one call asks of a sub-agent.

Apart from `subagent.py`, which runs them, so that the loop can hold a delegation without importing
the loop that a sub-agent runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rhapsody.core.agent.policy import Policy
from rhapsody.core.model import Model
from rhapsody.core.access.permissions import Mode
from rhapsody.core.toolbox.orchestrator import Toolbox


@dataclass(frozen=True)
class Budget:
    """What one sub-agent may spend before its turn ends (None: no limit of that kind)."""

    tool_calls: int | None = 40
    tokens: int | None = 2_000_000
    dollars: float | None = 2.0

    def within(self, other: Budget) -> Budget:
        """This budget, no larger than `other` anywhere (a call may ask for less than the settings, never more)."""
        return Budget(*(_least(mine, theirs) for mine, theirs in
                        zip(dataclasses.astuple(self), dataclasses.astuple(other))))


def _least(mine: Any, theirs: Any) -> Any:
    return theirs if mine is None else mine if theirs is None else min(mine, theirs)


@dataclass
class Delegation:
    """What an agent lends the sub-agents it starts: its model adapter, policy and toolbox, and the defaults."""

    model: Model
    policy: Policy
    toolbox: Toolbox
    prompt: str
    """What the sub-agent's system prompt adds to the parent's (prompts/subagent.md)."""
    model_id: str = ""
    """The sub-agents' model (the `subagent_model` setting); '' for the parent's."""
    budget: Budget = field(default_factory=Budget)


@dataclass(frozen=True)
class Order:
    """One call's task, and what it asks for: a mode, a model ('' for the default), a budget."""

    task: str
    mode: Mode = "read-only"
    model: str = ""
    budget: Budget = field(default_factory=Budget)
