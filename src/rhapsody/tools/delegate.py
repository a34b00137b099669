"""The `delegate` tool: the agent hands a task to a sub-agent (core/agent/subagent.py).

The sub-agent runs in a permission mode never wider than the parent's (read-only unless the call asks for
more), on the call's model or the `subagent_model` setting, within a budget no larger than the settings'.
What the tool returns is the sub-agent's final text and what it touched; its traffic stays in its own history.
Read-only calls in one round run at the same time (`concurrent`); the call `streams` the sub-agent's steps.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, Field

from rhapsody.core.agent.delegation import Budget, Delegation, Order
from rhapsody.core.agent.subagent import run_subagent, too_wide
from rhapsody.core.session import records as rec
from rhapsody.core.toolbox.protocol import Tool, ToolContext, ToolOutcome
from rhapsody.prompts import load

NOT_HERE = "No sub-agents here: this agent was not given any to start (a sub-agent starts none of its own)."


class DelegateInput(BaseModel):
    task: str = Field(min_length=1)
    mode: Literal["read-only", "ask", "auto-edit", "yolo"] = "read-only"
    model: str = ""
    max_tool_calls: int | None = Field(None, ge=1)
    max_tokens: int | None = Field(None, ge=1)
    max_cost_usd: float | None = Field(None, gt=0)


class Delegate(Tool):
    """Hand a task to a sub-agent; what returns is its final text and what it touched."""

    name: ClassVar[str] = "delegate"
    description: ClassVar[str] = load("tools/delegate")
    Input: ClassVar[type[BaseModel]] = DelegateInput
    writes: ClassVar[bool] = False
    """The sub-agent's own toolbox permits each of its calls, in a mode never wider than this one's."""
    reads_files: ClassVar[bool] = False
    streams: ClassVar[bool] = True

    def argument_of(self, args: DelegateInput) -> str:
        """The task, as approval and the transcript show it."""
        return args.task

    def concurrent(self, args: DelegateInput) -> bool:
        """Read-only sub-agents may run at once: none of them writes."""
        return args.mode == "read-only"

    async def run(self, args: DelegateInput, ctx: ToolContext) -> ToolOutcome:
        if not isinstance(ctx.delegation, Delegation):
            return ToolOutcome(NOT_HERE, is_error=True)
        wide = too_wide(args.mode, ctx.mode)
        if wide:
            return ToolOutcome(f"Not started: {wide}.", is_error=True)
        budget = Budget(args.max_tool_calls, args.max_tokens, args.max_cost_usd).within(ctx.delegation.budget)
        report = await run_subagent(ctx.delegation, ctx, Order(args.task, args.mode, args.model, budget))
        return ToolOutcome(report.text, is_error=report.status == "failed",
                           facts=rec.DelegateFacts(subagent=report.id, subagent_status=report.status,
                                                   subagent_session=report.session,
                                                   subagent_changed=list(report.changed)))
