"""rhapsody's questions as `session/request_permission`, and the client's answers back as the agent's.

A call's question shows it as it will happen (an edit's diff, the exact command, why it asks) with
**Allow once**, **Always allow RULE this session** (only when a session rule can allow it) and
**Reject**; exit_plan's plan is asked the same way. The human's words with a rejection ride in the
answer's `_meta.reason` (an extension: the protocol's answer names an option only; docs/editors.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp import text_block, tool_content, tool_diff_content
from acp.interfaces import Client
from acp.schema import PermissionOption, RequestPermissionResponse, ToolCallUpdate

from rhapsody.core import events as ev
from rhapsody.core.agent import ops
from rhapsody.core.session.messages import ToolUseBlock
from rhapsody.core.toolbox.protocol import PlanReview
from rhapsody.frontends.acp.updates import kind_of, old_text, proposed_text
from rhapsody.view.render import call_title

REASON_KEY = "reason"
"""The `_meta` key of a permission answer that carries the human's words with a rejection."""

PLAN_OPTIONS = [PermissionOption(option_id="auto-edit", name="Approve, then auto-edit", kind="allow_once"),
                PermissionOption(option_id="ask", name="Approve, then ask before each write", kind="allow_once"),
                PermissionOption(option_id="reject", name="Reject the plan", kind="reject_once")]


def options(rules: tuple[str, ...]) -> list[PermissionOption]:
    """A call's answers, in the order rhapsody numbers them elsewhere: allow once, the session rules, reject."""
    offered = [PermissionOption(option_id="once", name="Allow once", kind="allow_once")]
    if rules:
        offered.append(PermissionOption(option_id="always", name=f"Always allow {', '.join(rules)} this session",
                                        kind="allow_always"))
    return offered + [PermissionOption(option_id="deny", name="Reject", kind="reject_once")]


def asked_call(question: ev.ApprovalAsked, call_id: str, root: Path) -> ToolCallUpdate:
    """The call a question is about, as it will happen: an edit's diff first, then why rhapsody asks."""
    call = ToolUseBlock(id=call_id, name=question.tool, input=question.args)
    before = old_text(call, root)
    after = proposed_text(question.tool, question.args, before)
    content: list[Any] = [tool_content(text_block(question.why))]
    if after is not None and isinstance(question.args.get("path"), str):
        content.insert(0, tool_diff_content(str((root / question.args["path"]).resolve()), after, before))
    return ToolCallUpdate(tool_call_id=call_id, title=call_title(call), kind=kind_of(question.tool),
                          status="pending", content=content)


async def permission(client: Client, session_id: str, question: ev.ApprovalAsked, call_id: str,
                     root: Path) -> ops.ApprovalAnswer:
    """Ask the client; its answer as the agent's operation (a client that fails to answer denies)."""
    answer = await client.request_permission(session_id=session_id, tool_call=asked_call(question, call_id, root),
                                             options=options(question.rules))
    return answer_of(question.id, answer, question.rules)


async def plan_review(client: Client, session_id: str, plan: str, call_id: str) -> PlanReview:
    """exit_plan's plan as a question: approve (then auto-edit or ask) or reject, with the human's words."""
    call = ToolCallUpdate(tool_call_id=call_id, title="exit_plan: the plan", kind="switch_mode", status="pending",
                          content=[tool_content(text_block(plan))])
    answer = await client.request_permission(session_id=session_id, tool_call=call, options=PLAN_OPTIONS)
    chosen = getattr(answer.outcome, "option_id", "")
    if chosen in ("auto-edit", "ask"):
        return PlanReview(True, plan=plan, mode="ask" if chosen == "ask" else "auto-edit")
    return PlanReview(False, reason=reason_of(answer))


def reason_of(answer: RequestPermissionResponse) -> str:
    """The human's words with a rejection, where the client sent them (`_meta.reason`, on the outcome or the
    answer)."""
    for meta in (getattr(answer.outcome, "field_meta", None), answer.field_meta):
        if isinstance(meta, dict) and isinstance(meta.get(REASON_KEY), str) and meta[REASON_KEY].strip():
            return str(meta[REASON_KEY])
    return ""


def answer_of(question_id: str, answer: RequestPermissionResponse, rules: tuple[str, ...]) -> ops.ApprovalAnswer:
    """The client's answer as the agent's operation: an option picked, or the dialog cancelled (a denial)."""
    chosen = getattr(answer.outcome, "option_id", None)
    if chosen == "once" or (chosen == "always" and rules):
        return ops.ApprovalAnswer(id=question_id, decision=chosen)
    return ops.ApprovalAnswer(id=question_id, decision="deny", reason=reason_of(answer))
