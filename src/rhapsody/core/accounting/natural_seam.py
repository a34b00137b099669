"""The `checkpoint` seam policy: a seam at the first natural pause in the work once it pays.

A natural boundary is a point where the work pauses, read off the history records:

- `turn_end`: the model ended its turn (an assistant message with no tool call);
- `human`: the human's next message (a user message with words that are not the harness's own
  and no tool result: a new turn, a hint delivered at the end of one, an imported prompt);
- `commit`: a `git commit` that succeeded: a shell tool's `tool_run` whose command runs `git …
  commit` where a command starts (the line's start or after `;`, `&&`, `||`, `|`, `(`, past
  `VAR=value`, `timeout N`, `uv run` and the like: `GIT_COMMIT`) and whose exit code is 0 (an imported run with no exit code: not an
  error);
- `tests_pass`: a test run passing after failures: a shell command matching `TEST_RUNNER`
  (pytest, `python -m unittest`, tox, nox, npm/pnpm/yarn/bun test, jest, vitest, mocha, cargo
  test, go test, make test/check, ctest, rspec, phpunit, mvn test, gradle test, dotnet test,
  mix test; where a command starts, as for a commit, a path before the runner's name allowed:
  `.venv/bin/pytest`) whose outcome goes from failing to passing (nonzero → zero, or error → not);
- `todo_done`: a todo item completed. rhapsody has no todo tool yet, so no native session
  produces it; a tool that records the fact `todo_completed: true` on its `tool_run` will. In
  imported sessions a todo list call (Claude Code's TodoWrite, Codex's update_plan) whose
  list holds more completed items than the one before produces it.

At a boundary the seam is asked for when it pays by rhapsody's own cost model
(core/accounting/seam_cost.py `payoff`); a boundary where it does not pay passes, and the next one is
judged afresh, so a seam never lands mid-task. The share of the window stays the hard net
(core/agent/turn_end.py `HandoffThreshold`). The live loop (core/agent/loop.py) and the what-if replay
(core/accounting/whatif.py) place seams with the same `Boundaries` fold and the same `payoff`.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

from rhapsody.core.session import handoff_state
from rhapsody.core.session import records as rec
from rhapsody.core.session.checkpoints import HARNESS_PREFIX
from rhapsody.core.session.context import measure_messages
from rhapsody.core.session.handoff import stripped_calls
from rhapsody.core.pricing import WRITE_1H_MULT, WRITE_5M_MULT, price_of
from rhapsody.core.accounting.seam_cost import (Payoff, SeamEstimate, estimate, horizon, note_costs, payoff,
                                     project_note_costs)
from rhapsody.core.session.messages import TextBlock, ToolResultBlock, ToolUseBlock
from rhapsody.core.session.session import Session

_AT_COMMAND = (r"(?:^|[;&|(]\s*)(?:\w+=\S*\s+)*"  # where a command starts, after any VAR=value
               r"(?:(?:timeout\s+\S+|uv\s+run|poetry\s+run|pipenv\s+run|env|time|nice|sudo)\s+)*")
GIT_COMMIT = re.compile(_AT_COMMAND + r"git(?:\s+-[cC]\s+\S+|\s+--?[\w-]+(?:=\S+)?)*\s+commit\b")
TEST_RUNNER = re.compile(
    _AT_COMMAND + r"(?:\S*/)?(?:pytest|py\.test|python[\d.]*\s+-m\s+(?:pytest|unittest)|tox|nox"
    r"|(?:npm|pnpm|yarn|bun)\s+(?:run\s+)?test|npx\s+(?:jest|vitest|mocha)|jest|vitest|mocha"
    r"|cargo\s+(?:test|nextest)|go\s+test|make\s+(?:test|check)|ctest|rspec|phpunit|mvn\s+(?:test|verify)"
    r"|\S*gradlew?\s+test|dotnet\s+test|mix\s+test)(?:\s|$)")
SHELL_TOOLS = frozenset({"bash", "Bash", "shell", "local_shell", "shell_command", "exec_command"})
TODO_TOOLS = frozenset({"TodoWrite", "todo_write", "update_plan"})


class Boundary(StrEnum):
    """A natural pause in the work (module docstring: how each is detected)."""

    TURN_END = "turn_end"
    HUMAN = "human"
    COMMIT = "commit"
    TODO_DONE = "todo_done"
    TESTS_PASS = "tests_pass"


class Boundaries:
    """Folds history records in order and names the boundary each one makes (None: not one)."""

    def __init__(self) -> None:
        self.failing = False
        """The last test run failed."""
        self.done_todos = 0
        self._todos: dict[str, int] = {}
        """Completed items of each todo list call, by tool_use id."""

    def see(self, record: rec.Record) -> Boundary | None:
        """The boundary `record` makes, if any."""
        if isinstance(record, rec.MessageAdded):
            return self._message(record)
        if isinstance(record, rec.ToolRun):
            return self._run(record)
        return None

    def _message(self, record: rec.MessageAdded) -> Boundary | None:
        blocks = record.content
        if record.role == "assistant":
            calls = [b for b in blocks if isinstance(b, ToolUseBlock)]
            for call in calls:
                if call.name in TODO_TOOLS:
                    self._todos[call.id] = _completed(call.input)
            return None if calls or not blocks else Boundary.TURN_END
        if any(isinstance(b, ToolResultBlock) for b in blocks):
            return None
        words = [b.text for b in blocks if isinstance(b, TextBlock) and b.text.strip()]
        return Boundary.HUMAN if any(not text.startswith(HARNESS_PREFIX) for text in words) else None

    def _run(self, record: rec.ToolRun) -> Boundary | None:
        if record.refused:
            return None
        ok = record.exit_code == 0 if record.exit_code is not None else not record.is_error
        if record.todo_completed and ok:
            return Boundary.TODO_DONE
        if record.tool_use_id in self._todos:
            return self._todo(self._todos.pop(record.tool_use_id), ok)
        command = record.command or ""
        if record.name not in SHELL_TOOLS or not command:
            return None
        if GIT_COMMIT.search(command) and ok:
            return Boundary.COMMIT
        if TEST_RUNNER.search(command):
            passed_after_failing = ok and self.failing
            self.failing = not ok
            return Boundary.TESTS_PASS if passed_after_failing else None
        return None

    def _todo(self, completed: int, ok: bool) -> Boundary | None:
        if not ok:
            return None
        more, self.done_todos = completed > self.done_todos, completed
        return Boundary.TODO_DONE if more else None


def _completed(arguments: Any) -> int:
    """Items marked completed in a todo list call's input (`todos` or Codex's `plan`)."""
    if not isinstance(arguments, dict):
        return 0
    items = arguments.get("todos") or arguments.get("plan") or []
    return sum(1 for i in items if isinstance(i, dict) and i.get("status") == "completed") if isinstance(items, list) else 0


def cold_share(times: Sequence[float], ttl: float) -> float:
    """The share of requests that found the cache cold: sent more than `ttl` seconds after the one before
    (the first is not counted: it follows no pause; fewer than two: 0)."""
    gaps = [b - a for a, b in zip(times, times[1:])]
    return sum(1 for g in gaps if g > ttl) / len(gaps) if gaps else 0.0


class CheckpointSeam:
    """The live `checkpoint` policy: at each natural boundary, asks for a seam when it pays.

    It folds the session's records as they grow; a boundary is judged once, at the point the
    loop reaches it (after the tool calls of a round, when the model ends its turn, before the
    human's message is sent), and passes when the seam would not pay there.
    """

    def __init__(self, ttl: Callable[[Session], float] = lambda _s: 300.0) -> None:
        self.boundaries = Boundaries()
        self.seen = 0
        self.pending: Boundary | None = None
        self.ttl = ttl
        """The cache TTL in effect, in seconds (core/accounting/cache_ttl.py chooses it)."""
        self._project_costs: list[int] | None = None

    def fold(self, session: Session) -> Boundary | None:
        """Fold the records not seen yet; the latest boundary since the last seam, not yet judged."""
        for record in session.records[self.seen:]:
            if isinstance(record, (rec.Seam, rec.Unseam)):  # a boundary before a seam is spent
                self.pending = None
            else:
                self.pending = self.boundaries.see(record) or self.pending
        self.seen = len(session.records)
        return self.pending

    def check(self, session: Session, boundary: Boundary | None = None) -> bool:
        """Judge the boundary just reached (`boundary`: one the records do not hold yet, the human's message
        about to be sent); asks for the handoff and returns True when the seam pays there."""
        folded = self.fold(session)
        reached = boundary or folded
        self.pending = None
        if reached is None or session.handoff.pending or not stripped_calls(session):
            return False
        worth = self.payoff(session)
        if not worth.pays:
            return False
        return handoff_state.want(session, at=reached.value, **worth.fields())

    def payoff(self, session: Session) -> Payoff:
        """What a seam of `session` now would save and cost (core/accounting/seam_cost.py `payoff`)."""
        estimate = self._estimate(session)
        requests = list(rec.of(session.records, rec.RequestMade, rec.Seam))
        last_seam = max((i for i, r in enumerate(requests) if isinstance(r, rec.Seam)), default=-1)
        times = [r.ts for r in rec.of(requests, rec.RequestMade)]
        context = measure_messages(session.spec, session.messages())[1]
        sizes = [float(r.est_tokens) for r in rec.of(requests[last_seam + 1:], rec.RequestMade)] + [float(context)]
        price = price_of(session.spec.model)[0]
        ttl = self.ttl(session)
        write = WRITE_1H_MULT if ttl > 300 else WRITE_5M_MULT
        return payoff(context, estimate.takes, estimate.adds, horizon(sizes), cold_share(times, ttl),
                      price.read_mult, write, price.output / price.input if price.input else 5.0)

    def _estimate(self, session: Session) -> SeamEstimate:
        if note_costs(session.records):
            return estimate(session.spec, session.conversation, session.records)
        if self._project_costs is None:  # the project's other notes do not change while this session runs
            self._project_costs = project_note_costs(session.root, session.id)
        return estimate(session.spec, session.conversation, session.records, self._project_costs)
