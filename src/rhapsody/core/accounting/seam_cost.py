"""Whether a seam would pay now: what the strip would take, against what the handoff adds.

A seam is a model call (the ask, the agent's field note, the harness's facts and the index
of what leaves, the agent's one-line answer) and a strip. On a short session the note can
outweigh the tool traffic the strip takes, and the context grows. `estimate` compares the
two in rhapsody's token estimate (core/accounting/tokens.py), before anything is asked:

- takes: the active context's estimate minus that of the same context stripped now;
- adds: the mean of what earlier handoffs added (a seam record's `before` minus the context
  when the handoff was asked, `asked_est_tokens`, the figure its divider shows), newest
  `SAMPLES` of this session, else of the project's other sessions, else `DEFAULT_NOTE_TOKENS`.

`estimate` is pure; `project_note_costs` reads the project's other histories for it.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rhapsody.core.session.context import Conversation, RequestSpec, measure_messages
from rhapsody.core.session.history import read_plain, sessions
from rhapsody.core.session.session import Session

DEFAULT_NOTE_TOKENS = 2_500
"""What a handoff is assumed to add when no note was written yet: the default the what-if pricing
states too (docs/performance.md); the recorded session's one handoff added ~2,939, a short one ~1,136."""
SAMPLES = 5
PROJECT_FILES = 20
"""The newest histories of the project read for note costs (the rest are older and slower to read)."""


@dataclass(frozen=True)
class SeamEstimate:
    """What a seam now would take and add, in estimated tokens, and where the note's cost came from."""

    takes: int
    adds: int
    basis: str
    """"2 notes of this session", "3 notes of this project" or "no note yet: the default"."""

    @property
    def pays(self) -> bool:
        """Whether the context would shrink."""
        return self.takes > self.adds

    @property
    def change(self) -> int:
        """The context's change across the seam (negative: it shrinks)."""
        return self.adds - self.takes

    def text(self) -> str:
        """"the strip would take ~442 tokens, the note adds ~1,136 (2 notes of this session): +694"."""
        return (f"the strip would take ~{self.takes:,} tokens and the handoff add ~{self.adds:,} "
                f"({self.basis}): the context would go {self.change:+,}")


def estimate(spec: RequestSpec, conversation: Conversation, records: list[dict[str, Any]],
             project_costs: Sequence[int] = ()) -> SeamEstimate:
    """What a seam now would take and add; `project_costs`: handoffs of the project's other sessions."""
    active = conversation.active()
    stripped = conversation.view(len(conversation.messages))
    takes = measure_messages(spec, active)[1] - measure_messages(spec, stripped)[1] if active else 0
    own = note_costs(records)
    if own:
        return SeamEstimate(takes, _mean(own), f"{_notes(len(own))} of this session")
    if project_costs:
        return SeamEstimate(takes, _mean(list(project_costs)), f"{_notes(len(project_costs))} of this project")
    return SeamEstimate(takes, DEFAULT_NOTE_TOKENS, "no note yet: the default")


def note_costs(records: list[dict[str, Any]]) -> list[int]:
    """What each handoff added, newest SAMPLES, from the seam records that know the figure when it was asked."""
    costs = [int(r["before"]["est_tokens"]) - int(r["asked_est_tokens"]) for r in records
             if r.get("kind") == "seam" and isinstance(r.get("asked_est_tokens"), int)]
    return [c for c in costs if c > 0][-SAMPLES:]


def project_note_costs(root: Path, but: str = "") -> list[int]:
    """Note costs from the project's newest other histories (session `but` left out)."""
    files = sorted((p for p in sessions(root) if p.stem != but), key=lambda p: p.stat().st_mtime)
    costs: list[int] = []
    for path in files[-PROJECT_FILES:]:
        costs += note_costs(_seam_records(path))
    return costs[-SAMPLES:]


def _seam_records(path: Path) -> list[dict[str, Any]]:
    out: list[Any] = []
    try:
        text = read_plain(path).decode("utf-8", errors="replace")  # never a link, never waiting on a pipe
    except OSError:
        return []
    for line in text.splitlines():
        if '"kind":"seam"' in line or '"kind": "seam"' in line:
            try:
                out.append(json.loads(line))
            except (ValueError, RecursionError):  # a torn line, or one a cloned project nested past the parser
                continue  # the reader tolerates it, so does this
    return [r for r in out if isinstance(r, dict) and isinstance(r.get("before"), dict)]


def _mean(values: list[int]) -> int:
    return round(sum(values) / len(values))


def _notes(n: int) -> str:
    return f"{n} note{'s' if n != 1 else ''}"


NOTE_OUTPUT_TOKENS = 600
"""The output tokens a field note is assumed to take (the what-if pricing's default too)."""


@dataclass(frozen=True)
class Payoff:
    """What a seam now would save over the requests expected before the next one, against what it costs,
    in base-input-token equivalents (`payoff` says how each is counted)."""

    saves: float
    costs: float

    @property
    def pays(self) -> bool:
        """Whether the seam saves more than it costs."""
        return self.saves > self.costs

    def fields(self) -> dict[str, int]:
        """The figures as a record holds them."""
        return {"saves": round(self.saves), "costs": round(self.costs)}


def payoff(context: int, takes: int, adds: int, ahead: float, cold: float, read: float, write: float,
           output_ratio: float, note_output: int = NOTE_OUTPUT_TOKENS) -> Payoff:
    """Whether a seam now pays, by the cache's arithmetic over the `ahead` requests expected before the next seam.

    Without the seam each of those requests reads the `context` (C) from the cache; with it the handoff's two
    requests read C, the next request writes the stripped context and the note (S + N) once at `write`, and
    every later one reads S + N. So the seam saves (ahead − 1) × (takes − adds) at the read rate, and a
    request that finds the cache cold (a `cold` share of them: the human paused past its TTL) would have
    re-written C instead of S + N, saving (takes − adds) × (write − read) more; it costs C × read (the one
    extra request over C), (S + N) × write and the note's output at `output_ratio` × input.
    """
    stripped = context - takes + adds
    per_request = (takes - adds) * (read + cold * (write - read))
    return Payoff(max(0.0, ahead - 1) * per_request, context * read + stripped * write + note_output * output_ratio)


def of_session(session: Session) -> SeamEstimate:
    """What a seam of `session` would take and add now, the project's other notes counted when it has none."""
    own = note_costs(session.records)  # with notes of its own, the project's are not read
    return estimate(session.spec, session.conversation, session.records,
                    () if own else project_note_costs(session.root, session.id))
