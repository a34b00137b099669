"""The status line, the spinner that shows the app is alive, and the welcome of an empty session."""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len

if TYPE_CHECKING:  # the figures load after the first frame
    from rhapsody.core.session.session_figures import SessionFigures
    from rhapsody.core.access.permissions import Mode

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
MODEL_WAIT = "waiting for the model"
"""A request is out and nothing has streamed yet (the model is not said to think unless thinking streams)."""
MODEL_STATES = (MODEL_WAIT, "thinking", "writing")
CHARS_PER_TOKEN = 4
DEFAULT_MODE: Mode = "ask"


class Liveness:
    """What runs now (the model or a tool), since when, and how many tokens streamed.

    The clock stops while a permission question waits for the human, so the time shown
    is the work's own.
    """

    def __init__(self) -> None:
        self.what = ""
        self.started = 0.0
        self.paused_at = 0.0
        self.chars = 0
        self.active = False

    def start(self, what: str) -> None:
        """Something new runs: the model (MODEL_WAIT, a request just sent) or a tool."""
        self.what, self.started, self.active, self.paused_at = what, time.monotonic(), True, 0.0
        if what == MODEL_WAIT:
            self.chars = 0

    def writing(self) -> None:
        """Visible text streams: the model is writing."""
        if self.what in MODEL_STATES:
            self.what = "writing"

    def thinking(self) -> None:
        """Thinking streams: the model thinks (only then is it said to)."""
        if self.what in MODEL_STATES:
            self.what = "thinking"

    def streamed(self, chars: int) -> None:
        """Count streamed characters (shown as approximate tokens)."""
        self.chars += chars

    def pause(self) -> None:
        """The human is being asked: stop the clock."""
        self.paused_at = time.monotonic()

    def resume(self) -> None:
        """The human answered: the clock goes on from where it stopped."""
        if self.paused_at:
            self.started += time.monotonic() - self.paused_at
            self.paused_at = 0.0

    def stop(self) -> None:
        """Nothing runs."""
        self.active = False

    def text(self, now: float | None = None) -> str:
        """"⠹ bash 2.4 s" or "⠹ writing 1.2 s · ↓ ~310 tokens"."""
        now = now if now is not None else time.monotonic()
        if self.paused_at:
            return "waiting for you"
        elapsed = max(0.0, now - self.started)
        frame = SPINNER[int(elapsed * 8) % len(SPINNER)]
        tokens = f" · ↓ ~{self.chars // CHARS_PER_TOKEN:,} tokens" if self.chars and self.what in MODEL_STATES else ""
        return f"{frame} {self.what} {elapsed:.1f} s{tokens}"


def status_line(figures: SessionFigures, session: Any, git: str, state: str, width: int, mode: Mode | None = None) -> str:
    """state · context · what a seam would do · cost · model · seams · git · cache · violations · cwd, cut to fit
    `width`.

    Fields are dropped least useful first (cwd, violations, cache, git, the seam figure), never the
    state, the context or the cost.
    """
    cache = figures.cache_ratio
    cwd = tilde(session.root)
    fields = [  # (drop order: higher goes first, text)
        (0, state),
        (1, mode if mode and mode != DEFAULT_MODE else ""),  # a mode other than the default is always in view
        (0, figures.context_text()),
        (4, seam_text(session)),
        (1, figures.spend_text(sum(child.figures.cost for child in getattr(session, "delegated", ())))),
        (3, session.spec.model),
        (2, figures.seams_text()),
        (5, git),
        (2, "cache cold") if figures.cache_cold(time.time()) else (6, f"cache {cache:.0%}" if cache is not None
                                                                  else "cache —"),
        (7, f"violations {figures.violations}"),
        (8, cwd),
    ]
    fields = [f for f in fields if f[1].strip()]
    while len(fields) > 4 and _width(fields) > width - 1:
        fields.remove(max(fields, key=lambda f: f[0]))
    line = " " + " │ ".join(text for _, text in fields)
    return line if cell_len(line) < width else line[: max(1, width - 2)] + "…"  # never a cut field or a dangling │


def seam_text(session: Any) -> str:
    """"seam ~−12k": how a seam now would change the context (core/accounting/seam_cost.py); "" with nothing to strip."""
    return _seam_text(session, len(session.records))


@lru_cache(maxsize=2)
def _seam_text(session: Any, _records: int) -> str:  # keyed on the record count: records only grow
    from rhapsody.core.accounting.seam_cost import estimate

    worth = estimate(session.spec, session.conversation, session.records, _project_costs(session.root, session.id))
    if worth.takes <= 0:
        return ""
    return f"seam ~{signed_k(worth.change)}"


@lru_cache(maxsize=4)
def _project_costs(root: Path, session_id: str) -> tuple[int, ...]:
    """The project's other notes, read once per session (they change only when another session seams)."""
    from rhapsody.core.accounting.seam_cost import project_note_costs

    return tuple(project_note_costs(root, session_id))


def signed_k(tokens: int) -> str:
    """−12k, −1.5k, +694: a change in tokens, short."""
    sign = "−" if tokens < 0 else "+"
    size = abs(tokens)
    if size >= 10_000:
        return f"{sign}{size / 1000:.0f}k"
    return f"{sign}{size / 1000:.1f}k" if size >= 1000 else f"{sign}{size}"


def _width(fields: list[tuple[int, str]]) -> int:
    return 1 + sum(cell_len(t) for _, t in fields) + 3 * (len(fields) - 1)


def tilde(path: Path) -> str:
    """`path` with the home folder written as ~."""
    return str(path).replace(str(Path.home()), "~")


def welcome_text(agent: Any, settings: Any, extra: str = "") -> str:
    """What an empty session shows: where, which model, which permissions, and the keys that matter."""
    return decided_welcome(agent.session.root, agent.session.spec.model, agent.permission_mode, settings, extra)


def decided_welcome(root: Path, model: str, mode: str, settings: Any, extra: str = "") -> str:
    """The welcome of a session with this model and permission mode under these settings: what
    `welcome_text` says of the agent built from them, known before it is built."""
    from rhapsody.sandbox.bwrap import status

    sandbox_text = status(settings.sandbox).removeprefix("sandbox ")
    facts = (model, f"{mode} (/permissions to see or switch)", f"{sandbox_text} (bash and git)")
    return _welcome(root, facts, extra)


def starting_text(root: Path, extra: str = "") -> str:
    """The welcome of the first frame, drawn before the settings are read and the session opens."""
    return _welcome(root, ("…", "…", "…"), extra)


def _welcome(root: Path, facts: tuple[str, str, str], extra: str) -> str:
    model, permissions, sandbox = facts
    lines = [
        "rhapsody: a coding agent that narrates each step",
        "",
        f"  project      {tilde(root)}",
        f"  model        {model}",
        f"  permissions  {permissions}",
        f"  sandbox      {sandbox}",
        "",
        "  enter   send; while the agent works: a hint for its next step",
        "  ctrl+o  micro-handoff: a field note, then tool traffic leaves context",
        "  esc     interrupt the agent (what streamed is kept); ctrl+c too",
        "  ctrl+c  idle: clear the input; twice on an empty one quits",
        "  /help   commands and keys · ctrl+p palette",
    ]
    if extra:  # the demo's lines: its ctrl+c line goes (the footer says ^c Quit), so it all fits 80x24
        lines = [line for line in lines if not line.startswith("  ctrl+c")] + ["", extra]
    return "\n".join(lines)
