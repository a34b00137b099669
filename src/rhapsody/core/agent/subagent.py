"""Sub-agents: a task the agent hands to an agent of its own, whose tool traffic never enters its context.

A sub-agent is a session of its own (its own history file, whose `session` record names the parent session
and the call), run by the same loop under the same narration rule, with the parent's tools (not `delegate`
nor `exit_plan`), a copy of its rules, its sandbox, and a permission mode never wider than the parent's. A
budget (tool calls, tokens, dollars) ends its turn with a `limit` record. The parent records it as
`subagent` records (`started`, then how it ended, with its figures); what returns to the parent's model is
its final text and what it touched (files read and changed, commands), never its calls or results.

Its events reach the front ends as `SubagentStep`s through the call's progress channel; a steering hint typed
while it runs goes to it (`Session.hint`), and the parent's approver answers its questions, which name it.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rhapsody.core.session import records as rec
from rhapsody.core.session.context import RequestSpec
from rhapsody.core.counts import counted
from rhapsody.core.events import Event, Failed, HintDelivered, LimitsExceeded, SubagentEnded, SubagentStarted, SubagentStep
from rhapsody.core.session.messages import ToolResultBlock, ToolUseBlock
from rhapsody.core.access.permissions import MODES, Mode, Rules
from rhapsody.core.agent.policy import Policy
from rhapsody.core.session.session import Session
from rhapsody.core.session.tokens import estimate_chars
from rhapsody.core.toolbox.output_caps import cap_text
from rhapsody.core.toolbox.approval import Approval, Approver
from rhapsody.core.toolbox.protocol import ToolContext
from rhapsody.core.toolbox.orchestrator import Toolbox
from rhapsody.core.agent.delegation import Budget, Delegation, Order

NOT_LENT = ("delegate", "exit_plan")
"""Tools a sub-agent does not get: it starts no sub-agent of its own, and it has no plan for the human to approve."""


@dataclass(frozen=True)
class Report:
    """What a sub-agent's run leaves: how it ended, and the text the parent's model reads."""

    id: str
    status: str
    text: str
    session: str = ""
    changed: tuple[str, ...] = ()
    """Files its calls wrote (for the parent's field note: its own runs do not show them)."""


def too_wide(asked: Mode, parent: Mode) -> str:
    """Why a sub-agent may not run in `asked` under a parent in `parent` ('' when it may)."""
    if asked == "plan":
        return "a sub-agent does not plan; ask for read-only"
    if MODES.index(asked) > MODES.index(parent):
        return f"a sub-agent may not have more permission than its parent ({parent}); ask for {parent} or less"
    return ""


async def run_subagent(delegation: Delegation, ctx: ToolContext, order: Order) -> Report:
    """Run one sub-agent to the end of its turn (or its budget, or Esc) and say what it did."""
    from rhapsody.core.agent.loop import Agent  # the loop lends sub-agents; they run the loop

    parent = ctx.session
    sid = f"sa{1 + sum(1 for r in rec.of(parent.records, rec.Subagent) if r.state == 'started')}"
    model_id = order.model or delegation.model_id or parent.spec.model
    toolbox = lent_toolbox(delegation.toolbox, order.mode, sid)
    spec = RequestSpec(model=model_id, system=f"{parent.spec.system}\n\n{delegation.prompt}".strip(),
                       tools=toolbox.specs(), max_tokens=parent.spec.max_tokens,
                       parallel_tools=parent.spec.parallel_tools, thinking=parent.spec.thinking)
    link = rec.ParentLink(session=parent.id, tool_use_id=ctx.call_id, subagent=sid)
    child = Session.start(parent.root, spec, parent=link)
    parent.append(rec.Subagent(id=sid, session=child.id, tool_use_id=ctx.call_id, state="started", model=model_id,
                               mode=order.mode, task=order.task))
    progress = ctx.progress or (lambda event: None)
    progress(SubagentStarted(sid, ctx.call_id, order.task, model_id, order.mode, child.id))
    agent = Agent(child, delegation.model, toolbox, child_policy(delegation.policy, order.budget))
    parent.delegated.append(child)
    ending: list[Event] = []
    try:
        async for event in agent.run(order.task):
            progress(_forwarded(sid, event))
            if isinstance(event, (LimitsExceeded, Failed)):
                ending.append(event)
    except asyncio.CancelledError:
        _ended(parent, child, sid, "interrupted", ctx.call_id)
        progress(SubagentEnded(sid, "interrupted", "stopped by the human"))
        raise
    except Exception:
        _ended(parent, child, sid, "failed", ctx.call_id)  # the toolbox turns it into the call's error
        raise
    finally:
        parent.delegated.remove(child)
    status, why = _status(ending)
    text = cap_text(report_text(sid, child, status, why), ctx.output_cap)
    _ended(parent, child, sid, status, ctx.call_id)
    progress(SubagentEnded(sid, status, f"{why}; {figures_line(child)}" if why else figures_line(child)))
    return Report(sid, status, text, child.id, tuple(changed_files(child.records)))


def _forwarded(sid: str, event: Event) -> Event:
    """A sub-agent's event for the parent's stream: a hint it took is the human's receipt, the rest its steps."""
    if isinstance(event, HintDelivered):
        return HintDelivered(event.hint_ids, f"to sub-agent {sid}, {event.where}")
    return SubagentStep(sid, event)


def _status(ending: list[Event]) -> tuple[rec.SubagentState, str]:
    """How the turn ended: done, limit (its budget) or failed, and why in words."""
    for event in ending:
        if isinstance(event, LimitsExceeded):
            return "limit", f"stopped at its budget: {event.limit} reached ({event.value:g} of {event.maximum:g})"
        if isinstance(event, Failed):
            return "failed", f"failed: {event.message}"
    return "done", ""


def lent_toolbox(toolbox: Toolbox, mode: Mode, sid: str) -> Toolbox:
    """The parent's tools, a copy of its rules (an allow the human gives the sub-agent stays with it), its
    sandbox, hooks and checkpoints, in `mode`; questions go to the parent's approver, naming the sub-agent."""
    rules = toolbox.rules
    lent = Toolbox([t for name, t in toolbox.tools.items() if name not in NOT_LENT], mode,
                   Rules(list(rules.allow), list(rules.deny), list(rules.session_allow), rules.parse),
                   toolbox.secrets, named(toolbox.approver, sid), toolbox.clock)
    lent.protected, lent.checkpointer, lent.hooks = toolbox.protected, toolbox.checkpointer, toolbox.hooks
    return lent


def named(approver: Approver | None, sid: str) -> Approver | None:
    """The parent's approver, its question saying which sub-agent asks."""
    if approver is None:
        return None
    asks = approver

    async def ask(tool: str, argument: str, why: str, args: dict[str, Any], rules: tuple[str, ...] = ()) -> Approval:
        return await asks(tool, argument, f"sub-agent {sid} asks: {why}", args, rules=rules)

    return ask


def child_policy(policy: Policy, budget: Budget) -> Policy:
    """The parent's loop policy with the budget as the limits, and nothing that speaks for the project's memory."""
    return dataclasses.replace(policy, max_steps_per_turn=None, max_tool_calls=budget.tool_calls,
                               max_tokens_spent=budget.tokens, max_cost_usd=budget.dollars, memory_reminder=None,
                               plan_note="")


def _ended(parent: Session, child: Session, sid: str, state: rec.SubagentState, call_id: str) -> None:
    figures = child.figures
    parent.append(rec.Subagent(id=sid, session=child.id, tool_use_id=call_id, state=state, model=child.spec.model,
                               tool_calls=figures.tool_calls, requests=figures.requests, usage=dict(figures.usage),
                               cost_usd=round(figures.cost, 6), priced=figures.priced, kept_out_tokens=kept_out(child)))


def kept_out(child: Session) -> int:
    """Estimated tokens of the sub-agent's tool traffic: what its calls and results would have added to the
    parent's context had the parent made them itself."""
    chars = sum(len(json.dumps(b.dump(), separators=(",", ":"))) for m in child.conversation.messages
                for b in m.content if isinstance(b, (ToolUseBlock, ToolResultBlock)))
    return estimate_chars(chars) if chars else 0


def report_text(sid: str, child: Session, status: str, why: str) -> str:
    """The tool result: how it ended, what it spent, what it touched, and its final text."""
    f = figures_line(child)
    head = f"Sub-agent {sid} {'finished' if status == 'done' else why}; {f}. Its history: session {child.id}."
    return "\n".join([head, *touched(child.records), "Its final text:", final_text(child) or "(it wrote none)"])


def figures_line(child: Session) -> str:
    """`model M, 3 tool calls, 1,234 tokens, $0.0100`."""
    f = child.figures
    tokens = f.tokens_spent
    cost = f"${f.cost:.4f}" if f.priced else "cost unknown"
    return f"model {child.spec.model}, {counted(f.tool_calls, 'tool call')}, {tokens:,} tokens, {cost}"


def touched(records: Sequence[rec.Record]) -> list[str]:
    """What the sub-agent's calls touched, one line each: files read, files changed, commands with their exits."""
    runs = list(rec.of(records, rec.ToolRun))
    reads = sorted({r.path for r in runs if r.op == "read" and r.path})
    writes = changed_files(records)
    commands = [f"`{_short(r.command)}` (exit {r.exit_code})" for r in runs if r.command]
    return [f"Files read: {_listed(reads)}", f"Files changed: {_listed(writes)}", f"Commands: {_listed(commands)}"]


def changed_files(records: Sequence[rec.Record]) -> list[str]:
    """The files a session's calls wrote, sorted."""
    return sorted({r.path for r in rec.of(records, rec.ToolRun) if r.op == "write" and r.path})


def _listed(items: list[str], most: int = 12) -> str:
    shown = ", ".join(items[:most]) or "none"
    return shown + (f", … {len(items) - most} more" if len(items) > most else "")


def _short(command: str, chars: int = 120) -> str:
    line = " ".join(command.split())
    return line if len(line) <= chars else line[:chars] + " …"


def final_text(child: Session) -> str:
    """The text of the sub-agent's last message that has any."""
    for message in reversed(child.conversation.messages):
        if message.role == "assistant":
            text = "\n\n".join(t for t in message.texts() if t.strip())
            if text:
                return text
    return ""
