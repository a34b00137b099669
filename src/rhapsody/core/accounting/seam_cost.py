"""Whether a seam would pay now: what the strip would take, against what the handoff adds.

A seam is a model call (the ask, the agent's field note, the harness's facts and the index
of what leaves, the agent's one-line answer) and a strip. On a short session the note can
outweigh the tool traffic the strip takes, and the context grows. `estimate` compares the
two in rhapsody's token estimate (core/session/tokens.py), before anything is asked:

- takes: the active context's estimate minus that of the same context stripped now;
- adds: the mean of what earlier handoffs added (a seam record's `before` minus the context
  when the handoff was asked, `asked_est_tokens`, the figure its divider shows), newest
  `SAMPLES` of this session, else of the project's other sessions, else `DEFAULT_NOTE_TOKENS`.

`estimate` is pure; `project_note_costs` reads the project's other histories for it.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rhapsody.core.session import records as rec
from rhapsody.core.session.context import Conversation, RequestSpec, measure_messages
from rhapsody.core.session.handoff import INDEX_CHARS
from rhapsody.core.session.history import parse_line, read_plain, sessions
from rhapsody.core.session.session import Session

NOTE_AIM_CHARS = 1_000
"""The field note the prompts ask for (prompts/handoff.md, prompts/tools/micro_handoff.md): about 1,000 characters."""
FACTS_CAP_CHARS = 2_600
"""The harness facts at most (tools/handoff.py `FACTS_CHARS` is this figure)."""
ASK_CHARS = 1_200
"""The handoff request, which stays in the context as text (prompts/handoff.md is shorter; a test holds it)."""
ANSWER_CHARS = 200
"""The agent's one-line answer after the note, and the closing line the tool's result ends with."""
DEFAULT_NOTE_TOKENS = round((2 * NOTE_AIM_CHARS + FACTS_CAP_CHARS + INDEX_CHARS + ASK_CHARS + ANSWER_CHARS) / 4)
"""What a handoff is assumed to add when no note was written yet (1,950 tokens), the what-if's default too: what
the caps let one seam leave in the context, the note twice (the call's input and the tool's result), the facts
and the index of what leaves at their caps, the ask and the answer. A ceiling: a quiet stretch's facts and
index are shorter (docs/performance.md, "The size a field note aims at")."""
NOTE_ROOM_TOKENS = 2_500
"""The room the window keeps for a first note before any was measured (core/agent/turn_end.py `note_room`): more than
the priced default, since a note request the window refuses means stripping before the note is written."""
NOTE_OUTPUT_TOKENS = round((NOTE_AIM_CHARS + ANSWER_CHARS) / 4)
"""The output tokens a field note is assumed to take (300: the note and the answer), the what-if's default too."""
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


def estimate(spec: RequestSpec, conversation: Conversation, records: Sequence[rec.Record],
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


def note_costs(records: Iterable[rec.Record]) -> list[int]:
    """What each handoff added, newest SAMPLES, from the seam records that know the figure when it was asked."""
    costs = [r.before.est_tokens - r.asked_est_tokens for r in rec.of(records, rec.Seam)
             if r.asked_est_tokens is not None]
    return [c for c in costs if c > 0][-SAMPLES:]


def project_note_costs(root: Path, but: str = "") -> list[int]:
    """Note costs from the project's newest other histories (session `but` left out)."""
    files = sorted((p for p in sessions(root) if p.stem != but), key=lambda p: p.stat().st_mtime)
    costs: list[int] = []
    for path in files[-PROJECT_FILES:]:
        costs += note_costs(_seam_records(path))
    return costs[-SAMPLES:]


def _seam_records(path: Path) -> list[rec.Record]:
    """The seam records of another history, read past anything malformed.

    The one reader outside history.py that meets raw lines, deliberately (docs/history-format.md,
    "Readers that survive a malformed file"): it looks into the project's other histories for a
    figure, where a torn, hand-edited or hostile file must cost that one figure, never the status
    line of the session at hand. So a line that is no JSON record, or no seam of the right shape,
    is skipped here instead of refusing the file as `read_history` does."""
    out: list[rec.Record] = []
    try:
        data = read_plain(path)  # never a link, never waiting on a pipe
    except OSError:
        return []
    for line in data.split(b"\n"):
        if b'"kind":"seam"' in line or b'"kind": "seam"' in line:
            raw = parse_line(line)  # None: a torn line, or one a cloned project nested past the parser
            try:
                out += [rec.parse(raw)] if raw is not None else []
            except rec.InvalidRecord:
                continue
    return out


def _mean(values: list[int]) -> int:
    return round(sum(values) / len(values))


def _notes(n: int) -> str:
    return f"{n} note{'s' if n != 1 else ''}"


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
    """Whether a seam now pays, by the cache's arithmetic over a horizon of `ahead` requests (`horizon`).

    Without the seam each of those requests reads the `context` (C) from the cache; with it the handoff's two
    requests read C, the next request writes the stripped context and the note (S + N) once at `write`, and
    every later one reads S + N. So the seam saves `ahead` × (takes − adds) at the read rate, and a request
    that finds the cache cold (a `cold` share of them: the human paused past its TTL) would have re-written C
    instead of S + N, saving (takes − adds) × (write − read) more; it costs C × read (the one extra request
    over C), (S + N) × write and the note's output at `output_ratio` × input.
    """
    stripped = context - takes + adds
    per_request = (takes - adds) * (read + cold * (write - read))
    return Payoff(max(0.0, ahead) * per_request, context * read + stripped * write + note_output * output_ratio)


def horizon(sizes: Sequence[float]) -> float:
    """The requests a seam's saving is counted over: how many requests the traffic since the last seam has
    already been carried, each weighted by its share of that traffic (`sizes`: the context of each request
    since the last seam, the one about to go last; fewer than two, or none grown: 0).

    This is rent-or-buy: the strip is bought once carrying what it would take has cost as much as the strip
    does, which never spends more than twice what the best choice, made knowing the future, would, and
    needs no guess of how many requests are still to come. Traffic that grew steadily over k requests counts
    k / 2; one large result that came a request ago counts 1, so a turn end right after it does not seam for
    requests that may never come; a large result that came right after the last seam counts for every request
    since, so a boundary soon after it seams (docs/performance.md, "How the checkpoint policy judges")."""
    if len(sizes) < 2 or sizes[-1] <= sizes[0]:
        return 0.0
    return sum(max(0.0, s - sizes[0]) for s in sizes[1:]) / (sizes[-1] - sizes[0])


def of_session(session: Session) -> SeamEstimate:
    """What a seam of `session` would take and add now, the project's other notes counted when it has none."""
    own = note_costs(session.records)  # with notes of its own, the project's are not read
    return estimate(session.spec, session.conversation, session.records,
                    () if own else project_note_costs(session.root, session.id))
