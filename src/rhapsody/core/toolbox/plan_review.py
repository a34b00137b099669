"""The plan reviewer for front ends with a human: a plan goes out as an event, the answer comes back as an op.

`exit_plan` (tools/plan.py) awaits the reviewer; this one puts a `PlanReviewAsked` on the agent's one event
queue (set by the Agent once work is submitted, as the approver's questions are) and waits until a
`PlanAnswer` op with the same id settles it (`answer`). A plan whose turn is interrupted is dropped
unanswered. Where no human can answer (headless, the Python API) the toolbox has no reviewer at all, and
`exit_plan` says so to the model.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable

from rhapsody.core.events import PlanReviewAsked
from rhapsody.core.toolbox.protocol import PlanReview

UNASKED = "no front end was reading the agent's events to ask the human"


class HumanReviewer:
    """A PlanReviewer whose questions are events (`PlanReviewAsked`) and whose answers are ops (`PlanAnswer`)."""

    def __init__(self) -> None:
        self.emit: Callable[[PlanReviewAsked], None] | None = None
        """Where each plan goes out as an event (the agent's one queue); None until work is submitted."""
        self.asked: dict[str, asyncio.Future[PlanReview]] = {}
        """The plans asked about and not yet answered, by id."""
        self._ids = itertools.count(1)

    async def __call__(self, plan: str) -> PlanReview:
        if self.emit is None:  # the loop driven without a reader of its events: the call fails, nothing is approved
            raise RuntimeError(UNASKED)
        question_id = f"p{next(self._ids)}"
        reply: asyncio.Future[PlanReview] = asyncio.get_running_loop().create_future()
        self.asked[question_id] = reply
        self.emit(PlanReviewAsked(question_id, plan))
        try:
            return await reply
        finally:
            self.asked.pop(question_id, None)  # answered, or dropped by an interruption

    def answer(self, question_id: str, review: PlanReview) -> bool:
        """Answer the open plan `question_id`; False when none is open (answered, dropped)."""
        reply = self.asked.pop(question_id, None)
        if reply is None or reply.done():
            return False
        reply.set_result(review)
        return True
