"""The approver for front ends with a human: each question goes out as an event and waits for its answer.

The CLI makes one `HumanApprover` and gives it to the toolbox (which asks); the Agent points it at its
one event queue, where a question goes out as `ApprovalAsked`, and a front end answers with an
`ApprovalAnswer` op. A question whose asker was cancelled (Esc during the question) is dropped unanswered.
Each question carries its grace period as an awaitable (`Grace`), so a test ends it when it
says, without waiting real time.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from rhapsody.core.events import ApprovalAsked

@dataclass(frozen=True)
class Approval:
    """The human's answer to a permission question.

    `remember` holds rules (e.g. `bash:pytest *`) allowed for the rest of the session.
    """

    allow: bool
    reason: str = ""
    remember: tuple[str, ...] = ()
    words: str = ""
    """What the human typed with a denial, exactly; it reaches the model as the human's message."""


class Approver(Protocol):
    """Asks the human whether a call may run (the app and plain mode provide one).

    `args` are the call's validated arguments, so the question can show a diff or the exact command;
    `rules` are the session rules that would let it run (see core/toolbox/rule_suggestions.py), empty when no rule can.
    """

    async def __call__(self, tool: str, argument: str, why: str, args: dict[str, Any],
                       rules: tuple[str, ...] = ()) -> Approval:
        """The human's decision."""
        ...


UNASKED = "no front end reads this agent's questions"

GRACE = 0.6
"""Seconds after a question appears during which nothing typed answers it, in every front end:
keys typed then were meant for the prompt, and a lone `y` among them must never approve."""

Reply = Literal["allow", "allow_rule", "deny", "words"]
"""What a line typed at a permission question does: allow the call once, allow the offered session rules,
deny, or deny with the line's words as the reason the agent reads."""

REPLIES: dict[str, Reply] = {"y": "allow", "a": "allow_rule", "n": "deny", "": "allow"}
"""The lone hotkeys, the same in every front end; any other line is words. Nothing (Enter alone) takes
the highlighted default, allow once: the grace period keeps an Enter meant for the prompt from giving it."""


def choices(rules: tuple[str, ...]) -> tuple[Reply, ...]:
    """The answers in the order they are numbered on screen, from 1: allow once, the session rules
    (only when offered), deny."""
    return ("allow", "allow_rule", "deny") if rules else ("allow", "deny")


def picked(typed: str, rules: tuple[str, ...]) -> Reply | None:
    """The answer a lone digit picks as numbered on screen (`1` is allow once); None for anything else."""
    key = typed.strip()
    offered = choices(rules)
    if len(key) == 1 and key.isdigit() and 1 <= int(key) <= len(offered):
        return offered[int(key) - 1]
    return None


def reply_to(typed: str, rules: tuple[str, ...]) -> Reply:
    """What `typed` does at a question offering `rules`: a lone digit picks as numbered on screen, a lone
    `a` is words when no rule is offered."""
    reply = picked(typed, rules) or REPLIES.get(typed.strip().lower(), "words")
    return "words" if reply == "allow_rule" and not rules else reply


def approval_for(typed: str, rules: tuple[str, ...]) -> Approval:
    """The answer `typed` gives a question offering `rules` (see reply_to); words are kept verbatim."""
    match reply_to(typed, rules):
        case "allow":
            return Approval(True)
        case "allow_rule":
            return Approval(True, remember=rules)
        case "deny":
            return Approval(False)
        case "words":
            return Approval(False, words=typed)


Grace = Callable[[], Awaitable[object]]
"""Waits out one question's grace period; a front end takes no answer until it is over."""


def wait_grace() -> Awaitable[object]:
    """The grace period as the product has it: GRACE seconds of the event loop's clock."""
    return asyncio.sleep(GRACE)


@dataclass(frozen=True)
class Question:
    """One permission question and the future its answer goes into."""

    tool: str
    argument: str
    why: str
    reply: asyncio.Future[Approval]
    args: dict[str, Any] = field(default_factory=dict)
    """The call's arguments, so the question can show the diff or the exact command."""
    rules: tuple[str, ...] = ()
    """The session rules an "allow for this session" would add; empty when no rule can allow the call."""
    grace: Grace = wait_grace
    """Waits out the question's grace period, during which nothing typed answers it."""
    id: str = ""
    """What the `ApprovalAsked` event and the `ApprovalAnswer` op name it by."""

    @property
    def open(self) -> bool:
        """Whether the question still waits for an answer."""
        return not self.reply.done()

    def answer(self, approval: Approval | None) -> None:
        """Answer it (None: dismissed, which denies); a question no longer open is left as it is."""
        if self.open:
            self.reply.set_result(approval or Approval(False))


class HumanApprover:
    """An Approver for a human: each question goes out as an `ApprovalAsked` event on the agent's one queue and
    an `ApprovalAnswer` op answers it (`answer`)."""

    def __init__(self, grace: Grace = wait_grace) -> None:
        self.grace = grace
        """The grace period each question gets (tests pass one they end by hand)."""
        self.emit: Callable[[ApprovalAsked], None] | None = None
        """Where each question goes out as an event (the agent's one queue, set by the Agent); None: no agent
        was given this approver, and a question is denied unasked."""
        self.asked: dict[str, Question] = {}
        """The questions asked and not yet answered, by id."""
        self._ids = itertools.count(1)

    def answer(self, question_id: str, approval: Approval) -> bool:
        """Answer the open question `question_id`; False when no such question is open (answered, dropped)."""
        question = self.asked.pop(question_id, None)
        if question is None or not question.open:
            return False
        question.answer(approval)
        return True

    async def __call__(self, tool: str, argument: str, why: str, args: dict[str, Any] | None = None,
                       rules: tuple[str, ...] = ()) -> Approval:
        question = Question(tool, argument, why, asyncio.get_running_loop().create_future(), dict(args or {}),
                            tuple(rules), self.grace, f"q{next(self._ids)}")
        if self.emit is None:  # nobody could see the question: never run a call unasked
            return Approval(False, reason=UNASKED)
        self.asked[question.id] = question
        self.emit(ApprovalAsked(question.id, tool, argument, why, dict(question.args), question.rules))
        try:
            return await question.reply
        finally:
            self.asked.pop(question.id, None)  # answered, or dropped by an interruption

