"""What a typed line means, decided once for the app and plain mode: a `!command`, a slash command, a hint
while the agent works, or a new turn; and what a command's `Outcome` asks, done in one place.

The controller turns the line into operations (core/agent/ops.py) submitted to the agent, and into
effects on the front end's `Surface`: what it shows and asks the human. Work an operation starts
(a turn, the human's shell command) is read by the front end from the agent's one event queue
until `Idle` (`Surface.work_began`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, Protocol

from rhapsody.commands.slash import Outcome, is_command, run_command
from rhapsody.core.agent import ops
from rhapsody.core.agent.loop import Agent
from rhapsody.core.toolbox.approval import Approval, approval_for
from rhapsody.core.toolbox.protocol import PlanReview
from rhapsody.core.session import records as rec
from rhapsody.frontends.shell_mode import shell_command
from rhapsody.view.render import undo_text

NoteKind = Literal["notice", "error", "command"]


class Surface(Protocol):
    """What a front end does for the controller: show, ask, and read the work an operation started."""

    async def note(self, text: str, kind: NoteKind) -> object:
        """Show a line for the human and keep it in the history (an `AddNotice`)."""

    async def hinted(self, receipt: ops.Receipt, text: str, mode: str) -> None:
        """Show a hint (or a queued message) now pending, as the receipt names it."""

    async def work_began(self, op: ops.Op) -> None:
        """Work began: read the agent's events until `Idle`."""

    async def reload(self) -> None:
        """The history changed under the front end: rebuild what it shows from it."""

    async def in_history(self, text: str) -> None:
        """Show a command's answer already on record (a reload draws it where one redraws from history)."""

    async def confirm(self, outcome: Outcome, then: Callable[[bool], Awaitable[None]]) -> None:
        """Ask the outcome's yes/no question; `then` gets the answer."""

    def refill(self, text: str) -> None:
        """Put text back in the prompt."""

    def quit(self) -> None:
        """Leave rhapsody."""


class Controller:
    """Turns what the human typed into operations and effects, the same in every front end with a prompt."""

    def __init__(self, agent: Agent, surface: Surface, keys: tuple[tuple[str, str], ...] | None = None) -> None:
        """`keys`: the front end's keys, as /help lists them (None: the app's)."""
        self.agent = agent
        self.surface = surface
        self.keys = keys

    async def line(self, text: str, queued: bool = False) -> None:
        """One line as typed: `queued` (ctrl+n, `>>`) waits for the end of the turn when the agent works."""
        command = shell_command(text)
        if command is not None:
            await self.shell(command)
        elif is_command(text):
            await self.command(text)
        elif text.strip() and self.agent.working:
            mode: Literal["steer", "queue"] = "queue" if queued else "steer"
            await self.surface.hinted(self.agent.submit(ops.AddHint(text=text, mode=mode)), text, mode)
        elif text.strip():
            await self.turn(text)

    async def turn(self, text: str | None, typed: str | None = None, shell: bool = False) -> None:
        """A new turn on `text` (None: only what is pending; `shell`: a custom command's `` !`command` ``s run first)."""
        op = ops.UserTurn(text=text or "", typed=typed, shell=shell)
        if self.agent.submit(op).started:
            await self.surface.work_began(op)

    async def shell(self, command: str) -> None:
        """The human's `!command`; its output comes as a `ShellRan` event."""
        op = ops.ShellCommand(command=command)
        if self.agent.submit(op).started:
            await self.surface.work_began(op)

    async def command(self, text: str, echo: bool = True) -> None:
        """Run a slash command and act on its outcome (`echo`: typed or picked, not a key such as ctrl+o)."""
        if echo:
            await self.surface.note(text.strip(), "command")
        session = self.agent.session
        outcome = run_command(self.agent, text, self.keys)
        if echo and self.agent.session is not session:  # /clear: the new session begins with the command that made it
            self.agent.submit(ops.AddNotice(text=text.strip(), command=True))
        await self.act(outcome)

    async def act(self, outcome: Outcome) -> None:
        """Do what a command's outcome asks: the one place an `Outcome` is read."""
        if outcome.quit:
            self.surface.quit()
            return
        if outcome.reload:
            await self.surface.reload()
        if outcome.text and outcome.in_history:
            await self.surface.in_history(outcome.text)
        elif outcome.text:
            await self.surface.note(outcome.text, "error" if outcome.error else "notice")
        if outcome.refill:
            self.surface.refill(outcome.refill)
        if outcome.op is not None:
            await self.submit(outcome.op)
        if outcome.confirm:
            await self.surface.confirm(outcome, lambda yes: self._confirmed(outcome, yes))
        elif outcome.prompt and self.agent.working:  # a custom command's prompt, typed while the agent works
            text = outcome.prompt
            await self.surface.hinted(self.agent.submit(ops.QueueMessage(text=text, typed=outcome.typed)), text,
                                      "queue")
        elif outcome.prompt:
            await self.turn(outcome.prompt, outcome.typed, shell=True)

    async def submit(self, op: ops.Op) -> None:
        """Submit a command's operation: its receipt shown (an undone seam's record as the history draws it), the
        work it starts read."""
        receipt = self.agent.submit(op)
        if receipt.reload:
            await self.surface.reload()
        if isinstance(receipt.record, rec.Unseam):
            await self.surface.in_history(undo_text(receipt.record))
        elif receipt.text:
            await self.surface.note(receipt.text, "notice" if receipt.ok else "error")
        if receipt.started:
            await self.surface.work_began(op)

    async def _confirmed(self, outcome: Outcome, yes: bool) -> None:
        if yes:
            await self.command(outcome.then, echo=False)
        else:
            await self.surface.note(outcome.declined, "notice")


def answer_for(question_id: str, typed: str, rules: tuple[str, ...]) -> ops.ApprovalAnswer:
    """The operation `typed` sends to the question `question_id` offering `rules` (see core/toolbox/approval.py reply_to)."""
    return answer_of(question_id, approval_for(typed, rules))


def answer_of(question_id: str, approval: Approval | None) -> ops.ApprovalAnswer:
    """An answer a front end's dialog gave (None: dismissed, which denies) as the operation that sends it."""
    if approval is None or not approval.allow:
        return ops.ApprovalAnswer(id=question_id, decision="deny", reason=approval.words if approval else "")
    return ops.ApprovalAnswer(id=question_id, decision="always" if approval.remember else "once")


def plan_answer(question_id: str, review: PlanReview) -> ops.PlanAnswer:
    """A front end's answer to the plan `PlanReviewAsked(id=question_id)` put, as the operation that sends it."""
    return ops.PlanAnswer(id=question_id, decision="approve" if review.approved else "reject", plan=review.plan,
                          mode=review.mode, feedback=review.reason)
