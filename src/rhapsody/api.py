"""rhapsody from Python: open a session in a project, send turns and hints, read the events.

    from rhapsody.api import Agent, Answer, as_json

    async with Agent.open("path/to/project", on_approval=lambda q: Answer.deny("not that file")) as agent:
        async for event in agent.send("fix the failing test"):
            print(event.json_name, as_json(event))
        print(agent.figures().cost_usd)

An `Agent` here is the CLI's own agent, built by the CLI's own assembly (rhapsody.wiring) from the same
settings layers (user and project config, environment, the keyword flags given), so a script sees the
same tools, rules, sandbox, history file and seams as `rhapsody -p`. Everything it does goes through
the agent's typed way in (`submit` of an operation, core/agent/ops.py) and everything it learns comes
off the agent's one event queue: the very events the headless JSON lines print (`as_json` is that
serialiser). docs/python-api.md is the guide.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from rhapsody.core import events as ev
from rhapsody.core.agent import ops
from rhapsody.core.agent.loop import Agent as _Loop
from rhapsody.core.event_json import as_json
from rhapsody.core.events import ApprovalAsked, Event, PlanReviewAsked
from rhapsody.core.access.permissions import Mode
from rhapsody.wiring import Wiring

__all__ = ["Agent", "Answer", "ApprovalAsked", "Event", "Figures", "OnApproval", "OnPlan", "PlanDecision",
           "PlanReviewAsked", "RewindResult", "as_json", "events", "run"]

events = ev
Q = TypeVar("Q")
A = TypeVar("A")
"""The event classes (`rhapsody.api.events.ToolFinished`, …); each has a fixed `json_name`."""


@dataclass(frozen=True)
class Answer:
    """The answer to a permission question: allow once, allow always (with the question's rules), or deny
    with a reason the agent reads as the human's own words."""

    decision: Literal["once", "always", "deny"]
    reason: str = ""

    @classmethod
    def allow(cls) -> Answer:
        """Allow this call once."""
        return cls("once")

    @classmethod
    def always(cls) -> Answer:
        """Allow this call and add the session rules the question offered."""
        return cls("always")

    @classmethod
    def deny(cls, reason: str = "") -> Answer:
        """Refuse the call; `reason` reaches the agent verbatim."""
        return cls("deny", reason)


@dataclass(frozen=True)
class PlanDecision:
    """The answer to a plan `exit_plan` proposes in plan mode: approve it (as proposed, or as `plan` when given)
    and go on in `mode`, or reject it with feedback the agent reads as the human's own words (plan mode stays)."""

    approved: bool
    plan: str = ""
    mode: Mode = "auto-edit"
    feedback: str = ""

    @classmethod
    def approve(cls, mode: Mode = "auto-edit", plan: str = "") -> PlanDecision:
        """Approve the plan (`plan`: an edited one; empty for as proposed); the work goes on in `mode`."""
        return cls(True, plan, mode)

    @classmethod
    def reject(cls, feedback: str = "") -> PlanDecision:
        """Reject the plan; `feedback` reaches the agent verbatim, and plan mode stays."""
        return cls(False, feedback=feedback)


@dataclass(frozen=True)
class RewindResult:
    """What `Agent.rewind` did: whether it went back, the line to show, the rewound message (to send again), and
    when it refused to overwrite them, the files changed outside rhapsody (`force=True` overwrites them)."""

    ok: bool
    text: str
    prompt: str = ""
    outside: tuple[str, ...] = ()


OnApproval = Callable[[ApprovalAsked], "Answer | Awaitable[Answer]"]
OnPlan = Callable[[PlanReviewAsked], "PlanDecision | Awaitable[PlanDecision]"]
"""Answers a permission question; may be a plain function or a coroutine function."""


@dataclass(frozen=True)
class Figures:
    """The session's figures now: tokens billed, cost, and the context against its window."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float
    context_tokens: int
    context_window: int
    requests: int
    tool_calls: int
    seams: int

    @property
    def context_share(self) -> float:
        """How full the context window is, 0 to 1."""
        return self.context_tokens / self.context_window if self.context_window else 0.0


class Agent:
    """One rhapsody session opened from Python; open it with `Agent.open`, end it with `close`."""

    def __init__(self, wiring: Wiring, on_approval: OnApproval | None = None, on_plan: OnPlan | None = None) -> None:
        self._wiring = wiring
        self._loop: _Loop = wiring.agent
        self._on_approval = on_approval
        self._on_plan = on_plan

    @classmethod
    def open(cls, project: str | Path = ".", *, resume: str | None = None, on_approval: OnApproval | None = None,
             on_plan: OnPlan | None = None, **flags: Any) -> Agent:
        """Open a new session in `project`, or resume the one whose id is `resume`.

        `flags` are the CLI's settings by name (`model`, `permission_mode`, `sandbox`, `context_window`, …),
        layered over the config files and environment as the CLI's flags are. With `on_approval` an unset
        permission mode is `ask` and every question goes to it; without, it is `auto-edit` and a call that
        would ask is refused, as headless. With `on_plan`, each plan `exit_plan` proposes (in plan mode) goes to
        it, and its `PlanDecision` approves or rejects the plan; without, exit_plan tells the model no human can
        approve, as headless. Raises `rhapsody.core.errors.RhapsodyError` with a one-line reason
        for a project that is not a folder, bad settings, or a session that cannot be found.
        """
        from rhapsody.config.settings import load_settings
        from rhapsody.core.toolbox.approval import HumanApprover
        from rhapsody.providers.pick import make_model
        from rhapsody.wiring import build

        from rhapsody.core.errors import ConfigError

        root = Path(project).expanduser().resolve()
        if not root.is_dir():  # as the CLI's --cwd: nothing is written for a folder that is not there
            raise ConfigError(f"{root} is not a directory")
        settings = load_settings(root, flags)
        model_id = settings.model
        if model_id is None and resume is None:
            from rhapsody.providers.lazy import default_model

            model_id = default_model()
        approver = HumanApprover(grace=_no_grace) if on_approval is not None else None
        # Without on_plan no one reviews plans: exit_plan says no human can approve, as headless (docs/python-api.md).
        wiring = build(root, settings, make_model(settings), model_id, resume=resume, approver=approver,
                       reviews_plans=on_plan is not None)
        return cls(wiring, on_approval, on_plan)

    @property
    def session_id(self) -> str:
        """The session's id: `Agent.open(project, resume=id)` and `rhapsody -r ID` open it again."""
        return self._loop.session.id

    @property
    def history_path(self) -> Path:
        """The session's history file (docs/history-format.md)."""
        return self._loop.session.path

    @property
    def working(self) -> bool:
        """Whether a turn is under way."""
        return self._loop.working

    def send(self, text: str) -> AsyncIterator[Event]:
        """Send the human's message and iterate the turn's events until it is over (the last is `Idle`)."""
        return self._until_idle(ops.UserTurn(text=text))

    def hint(self, text: str, *, queue: bool = False) -> str:
        """A hint for the running turn: at the next tool boundary, or (`queue`) at the turn's end; its id."""
        return self._loop.submit(ops.AddHint(text=text, mode="queue" if queue else "steer")).id

    def handoff(self) -> AsyncIterator[Event]:
        """Ask for the micro-handoff. Idle: it runs as a turn whose events this iterates. During a turn (from
        inside `send`'s loop) it happens at the next tool boundary and this iterates nothing."""
        return self._until_idle(ops.RequestHandoff())

    def rewind_points(self) -> list[str]:
        """The points `rewind` goes back to, one line each as `/rewind` lists them (point N is the N-th); empty
        when checkpoints are off."""
        from rhapsody.rewind.rewinder import CheckpointRewinder

        rewinder = self._loop.rewinder
        return [p.line() for p in rewinder.points(self._loop.session)] if isinstance(rewinder, CheckpointRewinder) else []

    def rewind(self, point: int, what: Literal["files", "conversation", "both"] = "both", *,
               force: bool = False) -> RewindResult:
        """Go back to before message `point` (from 1, as `rewind_points` lists them): files, conversation or both;
        files changed outside rhapsody since then are overwritten only with `force` (refused, they are named)."""
        done = self._loop.submit(ops.Rewind(point=point, what=what, force=force))
        return RewindResult(done.ok, done.text, done.refill, done.outside)

    def interrupt(self) -> bool:
        """Stop the running turn as Esc does; False when none runs."""
        return self._loop.submit(ops.Interrupt()).ok

    def figures(self) -> Figures:
        """The session's figures now (tokens, cost, context)."""
        f = self._loop.session.figures
        return Figures(input_tokens=f.usage.get("input_tokens", 0), output_tokens=f.usage.get("output_tokens", 0),
                       cache_read_tokens=f.usage.get("cache_read_input_tokens", 0),
                       cache_write_tokens=f.usage.get("cache_creation_input_tokens", 0),
                       cost_usd=f.cost, context_tokens=f.context_tokens(), context_window=f.window,
                       requests=f.requests, tool_calls=f.tool_calls, seams=f.seams)

    async def close(self) -> None:
        """Stop a running turn and what the tools started (MCP servers); the history is already on disk."""
        if self._loop.working:
            self.interrupt()
            async for _ in self._drain():
                pass
        await self._wiring.close()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def _until_idle(self, op: ops.Op) -> AsyncIterator[Event]:
        receipt = self._loop.submit(op)
        if not receipt.ok:
            raise RuntimeError(receipt.text or f"{op.kind} refused")
        if not receipt.started:
            return
        async for event in self._drain():
            yield event

    async def _drain(self) -> AsyncIterator[Event]:
        """The queue's events up to and with `Idle`, each question answered by the callback on its way."""
        async for event in self._loop.events():
            # The documented place events are picked out with isinstance (tests/test_event_dispatch.py): the
            # questions are answered here and every event is passed on whole.
            if isinstance(event, ApprovalAsked):
                await self._answer(event)
            elif isinstance(event, PlanReviewAsked):
                await self._review(event)
            yield event
            if isinstance(event, ev.Idle):
                return

    async def _answer(self, question: ApprovalAsked) -> None:
        assert self._on_approval is not None  # questions are asked only with a callback to answer them
        denied = ops.ApprovalAnswer(id=question.id, decision="deny", reason="the approval callback failed")
        answer = await self._called(self._on_approval, question, denied)
        self._loop.submit(ops.ApprovalAnswer(id=question.id, decision=answer.decision, reason=answer.reason))

    async def _review(self, plan: PlanReviewAsked) -> None:
        assert self._on_plan is not None  # plans are put out only with a callback to review them
        rejected = ops.PlanAnswer(id=plan.id, decision="reject", feedback="the plan callback failed")
        decision = await self._called(self._on_plan, plan, rejected)
        self._loop.submit(ops.PlanAnswer(id=plan.id, decision="approve" if decision.approved else "reject",
                                         plan=decision.plan, mode=decision.mode, feedback=decision.feedback))

    async def _called(self, callback: Callable[[Q], A | Awaitable[A]], question: Q, failed: ops.Op) -> A:
        """The callback's answer to `question`, awaited if it is a coroutine. If it raises, `failed` answers the
        question first (it must not stay open: the turn would wait on it for ever), then the error comes out."""
        try:
            given = callback(question)
            return await given if inspect.isawaitable(given) else given
        except BaseException:
            self._loop.submit(failed)
            raise


def run(text: str, project: str | Path = ".", *, resume: str | None = None, on_approval: OnApproval | None = None,
        **flags: Any) -> tuple[str, list[Event]]:
    """One turn from a script with no event loop of its own: open, send `text`, close; the session's id (to
    resume it) and the turn's events."""
    async def turn() -> tuple[str, list[Event]]:
        async with Agent.open(project, resume=resume, on_approval=on_approval, **flags) as agent:
            return agent.session_id, [event async for event in agent.send(text)]

    return asyncio.run(turn())


async def _no_grace() -> None:
    """No grace period: the 0.6 s guard is for keys typed at a terminal, and a callback types none."""
