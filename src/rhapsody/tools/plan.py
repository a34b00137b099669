"""The `exit_plan` and `todo_write` tools: a plan the human approves, and the agent's todo list.

`exit_plan` ends plan mode: the human approves the plan (edited or not) and picks the mode the
work goes on in, or rejects it with a reason. Either way the human's answer reaches the model as
their own text after the tool results (`ToolOutcome.words`), so the approved plan is authored
text that every seam keeps, and the tool's result (which a seam strips) only says what happened.

`todo_write` states the whole list each call; it is a `todo` record the session folds
(core/session/todo.py), and a call that completes an item says so on its `tool_run` (`todo_completed`),
a natural boundary for the automatic seam.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field

from rhapsody.core.session import todo
from rhapsody.core.session.records import TodoItem
from rhapsody.core.toolbox.protocol import TodoWritten, Tool, ToolContext, ToolOutcome
from rhapsody.prompts import load
from rhapsody.core.session import records as rec

NOT_PLANNING = "Not in plan mode: there is no plan to exit. Carry on with the task."
NO_HUMAN = ("No human can approve a plan here (headless): nothing was approved and the mode stays plan. "
            "End your turn with the plan as your answer.")


class PlanInput(BaseModel):
    plan: str = Field(min_length=1)


class ExitPlan(Tool):
    """Propose the plan to the human; approved, the session leaves plan mode for the mode they pick."""

    name: ClassVar[str] = "exit_plan"
    description: ClassVar[str] = load("tools/exit_plan")
    Input: ClassVar[type[BaseModel]] = PlanInput
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = False

    async def run(self, args: PlanInput, ctx: ToolContext) -> ToolOutcome:
        if ctx.mode != "plan":
            return ToolOutcome(NOT_PLANNING, is_error=True)
        if ctx.reviewer is None:
            return ToolOutcome(NO_HUMAN, is_error=True, facts=rec.PlanFacts(plan=args.plan, plan_verdict="unanswered"))
        review = await ctx.reviewer(args.plan)
        if not review.approved:
            return _rejected(args.plan, review.reason)
        plan = review.plan.strip() or args.plan
        edited = plan != args.plan.strip()
        said = (f"I approve this plan{' as I edited it' if edited else ''}; the permission mode is now "
                f"{review.mode}. The approved plan:\n\n{plan}")
        content = (f"The human approved the plan{' with edits' if edited else ''}; the permission mode is now "
                   f"{review.mode}. The approved plan follows in their message: carry it out.")
        return ToolOutcome(content, words=said, mode=review.mode,
                           facts=rec.PlanFacts(plan=plan, plan_verdict="approved", plan_edited=edited))


def _rejected(plan: str, reason: str) -> ToolOutcome:
    """A rejection: the reason goes to the model as the human's own words; the mode stays plan."""
    given = reason.strip()
    why = "their reason follows in their own words" if given else "they gave no reason"
    return ToolOutcome(f"The human rejected the plan; {why}. Stay in plan mode: investigate what the reason "
                       "asks, then propose a revised plan with exit_plan.", is_error=True, words=given,
                       facts=rec.PlanFacts(plan=plan, plan_verdict="rejected"))


class TodoInput(BaseModel):
    todos: list[TodoItem] = Field(description="Every item, in order.")


class TodoWrite(Tool):
    """Write the agent's todo list, whole."""

    name: ClassVar[str] = "todo_write"
    description: ClassVar[str] = load("tools/todo_write")
    Input: ClassVar[type[BaseModel]] = TodoInput
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = False

    async def run(self, args: TodoInput, ctx: ToolContext) -> ToolOutcome:
        session = ctx.session
        before = todo.done(session.todos.items())
        session.append(rec.Todo(items=list(args.todos), at=len(session.conversation.messages),
                       tool_use_id=ctx.call_id))
        items = tuple(args.todos)
        text = "\n".join([f"Todo list saved: {todo.summary(items)}.", *todo.lines(items)])
        facts = rec.TodoFacts(todo_completed=True) if todo.done(items) > before else None
        return TodoWritten(text, facts=facts, items=items)
