"""What seams placed by a policy would have cost: a session replayed as a pure function of its records.

The replay folds the history as the session happened (messages, compactions, thinking and
rolling cuts) but leaves out its own seams, and puts a seam wherever the policy says, just
before the request that finds it due: `every=N` tool calls since the last seam, `at=T`
tokens of context, `share=S` of the model's window. A seam costs what a real one costs: two
requests over the whole context (the one asking for the note, the one that returns it), the
note's output tokens, and the note with its index left in the context (the `micro_handoff`
pair, which the strip keeps). Every request is then priced by billing's cache model.

Calibration, so the figures are in the API's tokens: the first answered request's reported
input minus rhapsody's rebuild of it is a prefix the history does not hold (an imported
session's source system prompt and tools); it is kept, cached, in every replayed request.
Then one scale makes the rebuilt requests as they happened add up to the reported input.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from rhapsody.core.billing import SEAM_KINDS, CacheModel, Sent, priced, replay
from rhapsody.core import shelf
from rhapsody.core.context import Conversation, Shelf, notice
from rhapsody.core.messages import Message, compact_json
from rhapsody.core.records import parse
from rhapsody.core.strip import HANDOFF_TOOL

KINDS = ("every", "at", "share")
SWEEP = ("every=10", "every=25", "every=50", "every=100", "share=0.4", "share=0.6", "share=0.8")
DEFAULT_NOTE_ADDED = 2500
DEFAULT_NOTE_OUTPUT = 600


@dataclass(frozen=True)
class Policy:
    """Where seams go: `every` N tool calls, `at` T tokens of context, or a `share` of the window."""

    kind: str
    value: float

    @property
    def label(self) -> str:
        """The policy as written (`every=50`)."""
        return f"{self.kind}={self.value:g}"

    def threshold(self, window: int | None) -> float:
        """Context tokens at which a seam is due (`at`, `share`)."""
        if self.kind == "share":
            if not window:
                raise ValueError("the model's context window is unknown: use at=TOKENS instead of share=")
            return self.value * window
        return self.value


def parse_policy(text: str) -> Policy:
    """`every=N`, `at=TOKENS` or `share=0.6`; ValueError with one line otherwise."""
    kind, _, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if kind not in KINDS or number <= 0 or (kind == "share" and number >= 1) or (kind != "share" and number < 1):
        raise ValueError(f"what-if policy {text!r}: expected every=N (tool calls), at=TOKENS or share=S "
                         "(0 < S < 1 of the window), or sweep")
    return Policy(kind, number)


@dataclass(frozen=True)
class NoteCost:
    """What one seam adds: context tokens (ask, note, index) and output tokens (writing the note)."""

    added: int
    output: int
    basis: str
    """Where the figures come from, said in the output."""


def note_cost(histories: list[list[dict[str, Any]]]) -> NoteCost:
    """The mean cost of the notes these histories hold; the stated default when there are none.

    What a note added is best read off a seam that measured it (`before` minus `asked_est_tokens`);
    seams written before that field have the `micro_handoff` call and its result, which stay in the
    context, measured instead."""
    blocks = [b for h in histories for r in h if r["kind"] == "message" for b in r["content"] if isinstance(b, dict)]
    calls = {b.get("id"): b for b in blocks if b.get("type") == "tool_use" and b.get("name") == HANDOFF_TOOL}
    pairs = [tokens(calls[b.get("tool_use_id")]) + tokens(b) for b in blocks
             if b.get("type") == "tool_result" and b.get("tool_use_id") in calls]
    measured = [r["before"]["est_tokens"] - r["asked_est_tokens"] for h in histories for r in h
                if r["kind"] == "seam" and isinstance(r.get("asked_est_tokens"), int)]
    added, how = (measured, "seam(s) that measured it") if measured else (pairs, "field note(s) (the call and its result)")
    if not added:
        return NoteCost(DEFAULT_NOTE_ADDED, DEFAULT_NOTE_OUTPUT,
                        f"no field note written in this project yet: default {DEFAULT_NOTE_ADDED:,} tokens added to the "
                        f"context and {DEFAULT_NOTE_OUTPUT:,} output tokens per seam")
    mean = round(sum(added) / len(added))
    outputs = [tokens(c.get("input", {})) for c in calls.values()]
    out = round(sum(outputs) / len(outputs)) if outputs else DEFAULT_NOTE_OUTPUT
    return NoteCost(mean, out, f"estimated from {len(added)} {how} in this project's histories: ~{mean:,} tokens "
                               f"added to the context and ~{out:,} output tokens per seam")


@dataclass(frozen=True)
class Arm:
    """One way the session could have gone, priced."""

    label: str
    requests: int
    seams: int
    input_tokens: int
    billed_input_tokens: int
    peak_context: int
    note_output_tokens: int = 0
    shelves: int = 0
    """Times the second window moved the oldest seams' words out (core/shelf.py)."""


@dataclass(frozen=True)
class Calibration:
    """The prefix the history does not hold, and the scale from rebuilt tokens to reported ones."""

    head: list[Any]
    scale: float
    compacted_at: dict[int, float] = dataclasses.field(default_factory=dict)
    """Context tokens (scaled) of the replay as it happened where each source compaction fired, by its seq:
    another arm compacts (or seams) there only where its own context has grown as large."""


def calibrate(records: list[dict[str, Any]], read_mult: float) -> Calibration:
    """Fit the rebuilt requests as they happened to what the API reported (module docstring)."""
    head = _head(records)
    actual = replay(records, seams=True)
    if not actual:
        return Calibration(head, 1.0)
    first = sum(actual[0].usage.values()) - context_tokens(head, actual[0].messages)
    if first > 0:
        head = [*head, {"prefix": "x" * (4 * first - 20)}]
    rebuilt = sum(context_tokens(head, s.messages) for s in actual)
    reported = sum(sum(s.usage.values()) for s in actual)
    scale = reported / rebuilt if rebuilt else 1.0
    return Calibration(head, scale, _compaction_points(records, head, scale))


def _compaction_points(records: list[dict[str, Any]], head: list[Any], scale: float) -> dict[int, float]:
    conv, points = Conversation(), {}
    for record in records:
        if record["kind"] == "compaction":
            points[int(record.get("seq", -1))] = context_tokens(head, conv.active()) * scale
        if record["kind"] not in SEAM_KINDS:
            conv.apply(parse(record))
    return points


def run(records: list[dict[str, Any]], policy: Policy | None, note: NoteCost, window: int | None,
        read_mult: float, fit: Calibration, head: list[Any] | None = None) -> Arm:
    """The session with seams placed by `policy` (None: no seam at all), priced; with `head`, every request
    carries that system prompt and those tools instead of the source's (`own_head`)."""
    fit = fit if head is None else dataclasses.replace(fit, head=head)
    sent, seams, shelves = _plan(records, policy, note, window, fit)
    model = CacheModel(fit.head, read_mult)
    priced_ = [model.price(s.ts, s.messages) for s in sent]
    return Arm(policy.label if policy else "no seams", len(sent), seams,
               round(sum(t for t, _ in priced_) * fit.scale), round(sum(c for _, c in priced_) * fit.scale),
               round(max((t for t, _ in priced_), default=0) * fit.scale), seams * note.output, shelves)


def as_happened(records: list[dict[str, Any]], read_mult: float, fit: Calibration) -> Arm:
    """The session as the API reported it (the seams it really had)."""
    actual = replay(records, seams=True)
    return Arm("as it happened", len(actual), sum(1 for r in records if r["kind"] == "seam"),
               sum(sum(s.usage.values()) for s in actual), round(sum(priced(s.usage, read_mult) for s in actual)),
               max((sum(s.usage.values()) for s in actual), default=0))


def _plan(records: list[dict[str, Any]], policy: Policy | None, note: NoteCost, window: int | None,
          fit: Calibration) -> tuple[list[Sent], int, int]:
    conv = Conversation()
    sent: list[Sent] = []
    pending: Sent | None = None
    calls = seams = added = shelves = 0
    limit = policy.threshold(window) if policy and policy.kind != "every" else None
    full = skip_summary = False
    for record in records:
        kind = record["kind"]
        if kind == "request":
            view = conv.active()
            due = policy is not None and (full or (calls >= policy.value if limit is None
                                                   else context_tokens(fit.head, view) * fit.scale >= limit))
            if due and calls:
                ts = float(record.get("ts", 0.0))
                sent += _seam(conv, ts, note, seams)
                calls, seams, added, full = 0, seams + 1, added + 2, False
                shelves += second_window(conv, fit, window)
                view = conv.active()
            pending = Sent(float(record.get("ts", 0.0)), view, {})
        elif kind == "usage" and pending is not None:
            sent.append(pending)
            pending = None
        elif kind == "compaction" and policy is not None:
            # Seams instead of the source's compaction: where this arm's context reached the source's, the
            # window would have been full here too, and rhapsody seams (its window net) rather than compact.
            full = full or reached(fit, fit.head, conv.active(), record)
            skip_summary = True
        elif kind == "message" and skip_summary and record.get("compact_summary"):
            skip_summary = False  # the summary of a compaction this arm did not make
        elif kind not in SEAM_KINDS:
            if kind in ("thinking_cut", "compaction"):  # their boundary counts the real messages only
                record = {**record, "boundary": record["boundary"] + added}
            conv.apply(parse(record))
            if kind == "message" and record["role"] == "assistant":
                calls += sum(1 for b in record["content"] if isinstance(b, dict) and b.get("type") == "tool_use")
    return sent, seams, shelves


def second_window(conv: Conversation, fit: Calibration, window: int | None) -> int:
    """rhapsody's second window after a replayed seam (core/shelf.py's rule, in the replay's units): 1 when
    the oldest seams' words left, else 0. The notes stay (the rule for notes alone filling half the window
    is not replayed)."""
    if not window or context_tokens(fit.head, conv.active()) * fit.scale <= shelf.SHELF_AT * window:
        return 0
    done = conv.shelf.boundary if conv.shelf else 0
    found = None
    for seam in conv.seams[: max(0, len(conv.seams) - shelf.KEEP_SEAMS)]:
        if seam.boundary > done:
            found = Shelf(seam.boundary, notice(shelf.notice_text(seam.seam, seam.boundary, 0)))
            if context_tokens(fit.head, conv.view(conv.boundary(), shelf=found)) * fit.scale <= shelf.SHELF_TO * window:
                break
    if found is None:
        return 0
    conv.apply(parse({"kind": "shelve", "boundary": found.boundary, "seams": 0, "text": found.notice.texts()[0]}))
    return 1


def _seam(conv: Conversation, ts: float, note: NoteCost, number: int) -> list[Sent]:
    """The two requests a handoff sends over the whole context, then the note pair and the strip."""
    before = conv.active()
    call_id = f"toolu_whatif_{number}"
    call = {"type": "tool_use", "id": call_id, "name": HANDOFF_TOOL, "input": {"note": "n" * (4 * note.output)}}
    result = {"type": "tool_result", "tool_use_id": call_id, "content": "r" * (4 * max(0, note.added - note.output))}
    conv.apply(parse({"kind": "message", "role": "assistant", "content": [call]}))
    conv.apply(parse({"kind": "message", "role": "user", "content": [result]}))
    asked = Sent(ts, before, {})
    answered = dataclasses.replace(asked, ts=ts + 1, messages=conv.active())
    conv.apply(parse({"kind": "seam", "boundary": len(conv.messages), "before": {}, "after": {}}))
    return [asked, answered]


def reached(fit: Calibration, head: list[Any], view: list[Message], compaction: dict[str, Any]) -> bool:
    """Whether this context has grown as large as the source's had where it compacted (`compaction`)."""
    at = fit.compacted_at.get(int(compaction.get("seq", -1)), float("inf"))
    return context_tokens(head, view) * fit.scale >= at


def _head(records: list[dict[str, Any]]) -> list[Any]:
    head = records[0] if records and records[0].get("kind") == "session" else {}
    return prompt_head(head.get("system", ""), head.get("tools", []))


def prompt_head(system: str, tools: list[Any]) -> list[Any]:
    """A system prompt and tool definitions as the parts of a request the what-if counts and caches."""
    return [tools, [{"type": "text", "text": system}]]


def context_tokens(head: list[Any], messages: list[Message]) -> int:
    """Tokens of a request as the cache model counts them (each message's size is cached on it)."""
    return sum(tokens(part) for part in head) + sum(max(1, -(-m.api_size[1] // 4)) for m in messages)


def tokens(part: Any) -> int:
    """Tokens of one part of a request as the what-if counts them (compact JSON characters / 4)."""
    return max(1, -(-len(compact_json(part)) // 4))
