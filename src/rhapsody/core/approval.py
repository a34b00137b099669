"""The approver for front ends with a human: questions wait in a queue until answered.

The CLI makes one `HumanApprover` and passes it both to the toolbox (which asks) and to
the front end (which answers), so neither is patched into the other after construction.
A question whose asker was cancelled (Esc during the question) is dropped unanswered.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from rhapsody.core.tools import Approval

GRACE = 0.6
"""Seconds after a question appears during which nothing typed answers it, in every front end:
keys typed then were meant for the prompt, and a lone `y` among them must never approve."""


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

    @property
    def open(self) -> bool:
        """Whether the question still waits for an answer."""
        return not self.reply.done()

    def answer(self, approval: Approval | None) -> None:
        """Answer it (None: dismissed, which denies); a question no longer open is left as it is."""
        if self.open:
            self.reply.set_result(approval or Approval(False))


class HumanApprover:
    """An Approver whose questions a front end takes with `next_question` and answers."""

    def __init__(self) -> None:
        self._questions: asyncio.Queue[Question] | None = None

    @property
    def questions(self) -> asyncio.Queue[Question]:
        """The queue, made in the running event loop on first use."""
        if self._questions is None:
            self._questions = asyncio.Queue()
        return self._questions

    async def __call__(self, tool: str, argument: str, why: str, args: dict[str, Any] | None = None,
                       rules: tuple[str, ...] = ()) -> Approval:
        question = Question(tool, argument, why, asyncio.get_running_loop().create_future(), dict(args or {}),
                            tuple(rules))
        self.questions.put_nowait(question)
        return await question.reply

    async def next_question(self) -> Question:
        """The next open question, waiting for one to be asked."""
        while True:
            question = await self.questions.get()
            if question.open:
                return question
