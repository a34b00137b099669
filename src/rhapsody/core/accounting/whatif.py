"""What seams placed by a policy would have cost: a session replayed as a pure function of its records.

The replay folds the history as the session happened (messages, compactions, thinking and
rolling cuts) but leaves out its own seams, and puts a seam wherever the policy says, just
before the request that finds it due (a seam row is not given the source's compactions: where
its own context grows as large as the source's was when it compacted, it seams there instead):
`every=N` tool calls since the last seam, `at=T` tokens of context, `share=S` of the model's
window, or `checkpoint` (rhapsody's default: at the first natural boundary where the seam pays,
core/accounting/natural_seam.py, with `share=0.4` as the net; `checkpoint=S` for another net). A seam costs what a real one costs: two
requests over the whole context (the one asking for the note, the one that returns it), the
note's output tokens, and the note with its index left in the context (the `micro_handoff`
pair, which the strip keeps). Every request is then priced by billing's cache model, at the
model that answered it, with the cache TTL its usage shows (a seam's two requests: the TTL
of the request they precede), cache entries expiring by the request timestamps.

Calibration (core/accounting/billing.py `fit`), so the figures are in the API's tokens: in an imported
history, each model's first request's reported input minus rhapsody's rebuild of it is a
prefix the history does not hold (the source's system prompt and tools); it is kept,
cached, in every replayed request of that model. Then one scale makes the rebuilt requests
as they happened add up to the reported input. `replayed` is that replay of the session as
it happened, to set beside the usage the API reported (its error says how far to trust the
other rows). `Calibration` is that fit with where the source compacted (`compacted_at`); a
row run with rhapsody's own prompt (`run(..., head=prompt_head(...))`) carries it in place of
every model's prefix. After a replayed seam that leaves more than half the window, the
oldest seams' words move out as rhapsody's second window moves them (core/session/shelf.py). What one seam
costs (the note) is core/accounting/whatif_note.py, re-exported here.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import Sequence

import dataclasses
from dataclasses import dataclass
from typing import Any

from rhapsody.core.session import shelf
from rhapsody.core.accounting.billing import (TTL_5M, SEAM_RECORDS, Fit, Sent, Split, bill, fit as fit_replay, replay,
                                              reported, request_rates, served_by, size, split_of, total, ttl_of, usd,
                                              head_of, usage_of as billing_usage_of)
from rhapsody.core.accounting.cache_ttl import ONE_HOUR, Ledger
from rhapsody.core.session.context import Conversation, Shelf, notice
from rhapsody.core.pricing import WRITE_1H_KEY, WRITE_5M_MULT, input_equivalents
from rhapsody.core.session.messages import Message, ToolResultBlock, ToolUseBlock
from rhapsody.core.accounting.natural_seam import Boundaries, Boundary, cold_share
from rhapsody.core.accounting.seam_cost import horizon, payoff
from rhapsody.core.accounting.whatif_note import DEFAULT_NOTE_ADDED as DEFAULT_NOTE_ADDED
from rhapsody.core.accounting.whatif_note import DEFAULT_NOTE_OUTPUT as DEFAULT_NOTE_OUTPUT
from rhapsody.core.accounting.whatif_note import NoteCost as NoteCost
from rhapsody.core.accounting.whatif_note import given_note as given_note
from rhapsody.core.accounting.whatif_note import note_cost as note_cost
from rhapsody.core.accounting.whatif_note import tokens as tokens
from rhapsody.core.session import records as rec
from rhapsody.core.session.strip import HANDOFF_TOOL

KINDS = ("every", "at", "share", "checkpoint")
SWEEP = ("every=10", "every=25", "every=50", "every=100", "share=0.4", "share=0.6", "share=0.8", "checkpoint")
CHECKPOINT_NET = 0.4
"""The net of the `checkpoint` policy: the share of the window at which a seam comes wherever the work is (the
live default, `handoff_at_share`)."""
OUTPUT_RATIO = 5.0
"""Output price over input price: 5 on every Claude model of the table; what the note's output costs."""
TTL = 300.0
"""The 5-minute cache the checkpoint policy's payoff is judged with in the replay."""


@dataclass(frozen=True)
class SeamPolicy:
    """Where seams go: `every` N tool calls, `at` T tokens of context, a `share` of the window, or at a
    `checkpoint` that pays (value: its net, a share of the window)."""

    kind: str
    value: float

    @property
    def label(self) -> str:
        """The policy as written (`every=50`; `checkpoint` with its default net)."""
        if self.kind == "checkpoint" and self.value == CHECKPOINT_NET:
            return "checkpoint"
        return f"{self.kind}={self.value:g}"

    def threshold(self, window: int | None) -> float:
        """Context tokens at which a seam is due (`at`, `share`; a checkpoint's net, none on an unknown window)."""
        if self.kind == "checkpoint":
            return self.value * window if window else float("inf")
        if self.kind == "share":
            if not window:
                raise ValueError("the model's context window is unknown: use at=TOKENS instead of share=")
            return self.value * window
        return self.value


def parse_policy(text: str) -> SeamPolicy:
    """`every=N`, `at=TOKENS`, `share=0.6` or `checkpoint[=NET]`; ValueError with one line otherwise."""
    if text == "checkpoint":
        return SeamPolicy("checkpoint", CHECKPOINT_NET)
    kind, _, value = text.partition("=")
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    shares = ("share", "checkpoint")
    if kind not in KINDS or number <= 0 or (kind in shares and number >= 1) or (kind not in shares and number < 1):
        raise ValueError(f"what-if policy {text!r}: expected every=N (tool calls), at=TOKENS, share=S "
                         "(0 < S < 1 of the window), checkpoint or checkpoint=S (its net), or sweep")
    return SeamPolicy(kind, number)


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
    input_usd: float | None = None
    """The input in dollars, each request at the model that answered it (None: a model without a price)."""
    split: Split = Split()
    """The input tokens as billed: uncached, 5-minute and 1-hour writes, reads."""
    billed_ttl_choice: int = 0
    """The same requests with rhapsody's choice of cache lifetime (core/accounting/cache_ttl.py: the hour once the
    pauses so far make it cheaper), in place of the lifetime each request's usage shows."""
    one_hour_requests: int = 0
    """Of those, the requests that went with the 1-hour cache."""
    shelves: int = 0
    """Times the second window moved the oldest seams' words out (core/session/shelf.py)."""


@dataclass(frozen=True)
class Calibration(Fit):
    """billing's fit (each model's missing prefix, the scale), with where the source compacted."""

    compacted_at: dict[int, float] = dataclasses.field(default_factory=dict)
    """Context tokens (scaled) of the replay as it happened where each source compaction fired, by its seq:
    another arm compacts (or seams) there only where its own context has grown as large."""

    def own(self, head: list[Any] | None) -> Calibration:
        """This calibration with `head` (rhapsody's own prompt and tools) in place of every model's prefix."""
        return self if head is None else dataclasses.replace(self, head=head, heads={})


def calibrate(records: Sequence[rec.Record], read_mult: float | None = None) -> Calibration:
    """Fit the rebuilt requests as they happened to what the API reported (module docstring)."""
    fitted = fit_replay(records)
    return Calibration(fitted.head, fitted.scale, fitted.heads, _compaction_points(records, fitted))


def _compaction_points(records: Sequence[rec.Record], fitted: Fit) -> dict[int, float]:
    conv, points, model = Conversation(), {}, session_model(records)
    for record in records:
        model = model_of(record, model)
        if isinstance(record, rec.Compaction):
            points[record.seq] = context_tokens(fitted.head_of(model), conv.active()) * fitted.scale
        if not isinstance(record, SEAM_RECORDS):
            conv.apply(record)
    return points


def session_model(records: Sequence[rec.Record]) -> str:
    """The model a history's session record names ("" when it has none)."""
    return head_of(records).model


def model_of(record: rec.Record, current: str) -> str:
    """The model the next request goes to after `record` (a request names its own; a `model` record switches)."""
    return (record.model or current) if isinstance(record, (rec.ModelSwitched, rec.RequestMade)) else current


def run(records: Sequence[rec.Record], policy: SeamPolicy | None, note: NoteCost, window: int | None,
        read_mult: float | None, fit: Calibration, head: list[Any] | None = None) -> Arm:
    """The session with seams placed by `policy` (None: no seam at all), priced; `read_mult` overrides
    every model's cache-read rate; with `head`, every request of every model carries that system prompt and
    those tools instead of the source's (`prompt_head`)."""
    fit = fit.own(head)
    sent, seams, shelves = _plan(records, policy, note, window, fit, read_mult)
    served = with_ttls(with_models(sent, records))
    arm = priced_arm(policy.label if policy else "no seams", served, seams, fit, read_mult, seams * note.output)
    chosen, hours = _with_ttl_choice(served, seams, fit, read_mult)
    return dataclasses.replace(arm, billed_ttl_choice=chosen, one_hour_requests=hours, shelves=shelves)


def _with_ttl_choice(sent: list[Sent], seams: int, fit: Calibration, read_mult: float | None) -> tuple[int, int]:
    """Billed input of these requests with the cache lifetime chosen before each as rhapsody chooses it live
    (over the requests before it), and how many went with the hour: each request's usage is steered to say
    that lifetime, as the API's would."""
    ledger, steered, hours = Ledger(0.1 if read_mult is None else read_mult), [], 0
    for request in sent:
        hour = ledger.cheaper() == ONE_HOUR
        ledger.add(request.ts, round(context_tokens(fit.head_of(request.model), request.messages) * fit.scale))
        written = max(1, int(request.usage.get("cache_creation_input_tokens", 0)))
        usage = {**request.usage, "cache_creation_input_tokens": written, WRITE_1H_KEY: written if hour else 0}
        steered.append(dataclasses.replace(request, usage=usage))
        hours += hour
    return priced_arm("", steered, seams, fit, read_mult, 0).billed_input_tokens, hours


def with_models(sent: list[Sent], records: Sequence[rec.Record]) -> list[Sent]:
    """The planned requests with the model of each: a real one's own, a seam's that of the request before."""
    models, model, out = iter(served_by(records)), "", []
    for request in sent:
        model = next(models, model) if request.usage else model  # a seam's requests have no usage
        out.append(dataclasses.replace(request, model=model))
    return out


def with_ttls(sent: list[Sent]) -> list[Sent]:
    """A seam's two requests given the cache lifetimes of the request they precede: they go out at its moment,
    under the lifetime in effect then (the request before may be an hour earlier, across a pause)."""
    ttls, ttl = [], (TTL_5M, TTL_5M)
    for request in sent:
        ttl = ttl_of(request.usage, ttl)
        ttls.append(ttl)
    out, after = list(sent), None
    for k in reversed(range(len(sent))):
        if sent[k].usage:
            after = ttls[k]
        elif after is not None:
            out[k] = dataclasses.replace(sent[k], ttl=after)
    return out


def replayed(records: Sequence[rec.Record], read_mult: float | None, fit: Calibration) -> Arm:
    """The replay of the session as it happened (its own seams in place), to set beside the reported usage."""
    return priced_arm("replayed as it happened", replay(records, seams=True),
                   sum(1 for _ in rec.of(records, rec.Seam)), fit, read_mult, 0)


def priced_arm(label: str, sent: list[Sent], seams: int, fit: Calibration, read_mult: float | None,
               note_output: int) -> Arm:
    """Planned requests (each with its model) billed by billing's cache model, as one arm."""
    splits, rates = bill(sent, fit), request_rates(sent, read_mult)
    cost = usd(splits, rates)
    return Arm(label, len(sent), seams, round(sum(s.tokens for s in splits)),
               round(sum(s.billed(r) for s, r in zip(splits, rates))), round(max((s.tokens for s in splits), default=0)),
               note_output, cost, total(splits))


def as_happened(records: Sequence[rec.Record], read_mult: float | None, fit: Calibration) -> Arm:
    """The session as the API reported it (the seams it really had), each request at its own model."""
    actual = replay(records, seams=True)
    rates = request_rates(actual, read_mult)
    splits = [split_of(s.usage) for s in actual]
    cost = usd(splits, rates)
    return Arm("as it happened", len(actual), sum(1 for _ in rec.of(records, rec.Seam)),
               sum(reported(s.usage) for s in actual), round(sum(input_equivalents(s.usage, r) for s, r in zip(actual, rates))),
               max((reported(s.usage) for s in actual), default=0), 0, cost, total(splits))


def replay_error(happened: Arm, rebuilt: Arm) -> float:
    """How far the replay as it happened is from the reported bill, as a share (dollars where priced)."""
    if happened.input_usd and rebuilt.input_usd is not None:
        return round(rebuilt.input_usd / happened.input_usd - 1, 4)
    return round(rebuilt.billed_input_tokens / happened.billed_input_tokens - 1, 4) if happened.billed_input_tokens else 0.0


def _plan(records: Sequence[rec.Record], policy: SeamPolicy | None, note: NoteCost, window: int | None,
          fit: Calibration, read_mult: float | None = None) -> tuple[list[Sent], int, int]:
    conv = Conversation()
    sent: list[Sent] = []
    pending: Sent | None = None
    calls = seams = added = shelves = 0
    limit = policy.threshold(window) if policy and policy.kind != "every" else None
    checkpoints = (_Checkpoints(note, fit, 0.1 if read_mult is None else read_mult)
                   if policy and policy.kind == "checkpoint" else None)
    full = skip_summary = False
    model = session_model(records)
    for record in records:
        model = model_of(record, model)
        head = fit.head_of(model)
        if isinstance(record, rec.RequestMade):
            view = conv.active()
            due = policy is not None and (full or (calls >= policy.value if limit is None
                                                   else context_tokens(head, view) * fit.scale >= limit))
            if checkpoints is not None:
                due = checkpoints.due(conv, view, head, record.ts) or due
            if due and calls:
                ts = record.ts
                sent += _seam(conv, ts, note, seams)
                calls, seams, added, full = 0, seams + 1, added + 2, False
                shelves += second_window(conv, head, fit.scale, window)
                view = conv.active()
                if checkpoints is not None:
                    checkpoints.seamed(context_tokens(head, view) * fit.scale)
            pending = Sent(record.ts, view, {})
        elif isinstance(record, rec.UsageRecorded):
            if pending is not None:
                sent.append(dataclasses.replace(pending, usage=usage_of(record)))
            pending = None
        elif isinstance(record, rec.Compaction) and policy is not None:
            # Seams instead of the source's compaction: where this arm's context reached the source's, the
            # window would have been full here too, and rhapsody seams (its window net) rather than compact.
            full = full or reached(fit, head, conv.active(), record)
            skip_summary = True
        elif isinstance(record, rec.MessageAdded) and skip_summary and rec.extra(record, "compact_summary"):
            skip_summary = False  # the summary of a compaction this arm did not make
        elif not isinstance(record, SEAM_RECORDS):
            if isinstance(record, (rec.ThinkingCut, rec.Compaction)):  # their boundary counts the real messages only
                record = record.model_copy(update={"boundary": record.boundary + added})
            conv.apply(record)
            if checkpoints is not None:
                checkpoints.see(record)
            if isinstance(record, rec.MessageAdded) and record.role == "assistant":
                calls += sum(1 for b in record.content if isinstance(b, ToolUseBlock))
    return sent, seams, shelves


def second_window(conv: Conversation, head: list[Any], scale: float, window: int | None) -> int:
    """rhapsody's second window after a replayed seam (core/session/shelf.py's rule, in the replay's units: `head`
    and `scale` the calibration's): 1 when the oldest seams' words left, else 0. The notes stay (the rule
    for notes alone filling half the window is not replayed)."""
    if not window or context_tokens(head, conv.active()) * scale <= shelf.SHELF_AT * window:
        return 0
    done = conv.shelf.boundary if conv.shelf else 0
    found = None
    for seam in conv.seams[: max(0, len(conv.seams) - shelf.KEEP_SEAMS)]:
        if seam.boundary > done:
            found = Shelf(seam.boundary, notice(shelf.notice_text(seam.seam, seam.boundary, 0)))
            if context_tokens(head, conv.view(conv.boundary(), shelf=found)) * scale <= shelf.SHELF_TO * window:
                break
    if found is None:
        return 0
    conv.apply(rec.Shelve(boundary=found.boundary, seams=0, text=found.notice.texts()[0]))
    return 1


class _Checkpoints:
    """The `checkpoint` policy in the replay: the live policy's boundaries and payoff (core/accounting/natural_seam.py),
    judged before each request over the replayed sizes."""

    def __init__(self, note: NoteCost, fit: Calibration, read_mult: float) -> None:
        self.note, self.fit, self.read_mult = note, fit, read_mult
        self.fold = Boundaries()
        self.boundary: Boundary | None = None
        self.times: list[float] = []
        self.last_seam = 0
        """The index in `sizes` of the first request after the last seam."""
        self.sizes: list[float] = []
        """The context of each request judged so far, in the replay's tokens."""

    def seamed(self, context: float) -> None:
        """A seam was placed before the request just judged, which goes with `context` instead."""
        self.sizes[-1], self.last_seam = context, len(self.sizes) - 1

    def see(self, record: rec.Record) -> None:
        """Fold one record of the session as it happened."""
        self.boundary = self.fold.see(record) or self.boundary

    def due(self, conv: Conversation, view: list[Message], head: list[Any], ts: float) -> bool:
        """Whether the boundary reached since the last request (if any) pays a seam now; it is judged once."""
        self.times.append(ts)
        self.sizes.append(context_tokens(head, view) * self.fit.scale)
        reached, self.boundary = self.boundary, None
        if reached is None:
            return False
        context = context_tokens(head, view) * self.fit.scale
        stripped = context_tokens(head, conv.view(len(conv.messages))) * self.fit.scale
        since = self.sizes[self.last_seam:]
        worth = payoff(round(context), round(context - stripped), self.note.added, horizon(since),
                       cold_share(self.times, TTL), self.read_mult, WRITE_5M_MULT, OUTPUT_RATIO, self.note.output)
        return worth.pays


def _seam(conv: Conversation, ts: float, note: NoteCost, number: int) -> list[Sent]:
    """The two requests a handoff sends over the whole context, then the note pair and the strip."""
    before = conv.active()
    call_id = f"toolu_whatif_{number}"
    call = ToolUseBlock(id=call_id, name=HANDOFF_TOOL, input={"note": "n" * (4 * note.output)})
    result = ToolResultBlock(tool_use_id=call_id, content="r" * (4 * max(0, note.added - note.output)))
    conv.apply(rec.MessageAdded(role="assistant", content=[call]))
    conv.apply(rec.MessageAdded(role="user", content=[result]))
    asked = Sent(ts, before, {})
    answered = dataclasses.replace(asked, ts=ts + 1, messages=conv.active())
    conv.apply(rec.Seam(boundary=len(conv.messages), before=rec.Shape(), after=rec.Shape()))
    return [asked, answered]


def reached(fit: Calibration, head: list[Any], view: list[Message], compaction: rec.Compaction) -> bool:
    """Whether this context has grown as large as the source's had where it compacted (`compaction`)."""
    at = fit.compacted_at.get(compaction.seq, float("inf"))
    return context_tokens(head, view) * fit.scale >= at


def prompt_head(system: str, tools: list[Any]) -> list[Any]:
    """A system prompt and tool definitions as the parts of a request the what-if counts and caches."""
    return [tools, [{"type": "text", "text": system}]]


def context_tokens(head: list[Any], messages: list[Message]) -> int:
    """Tokens of a request as the cache model counts them (each message's size is cached on it)."""
    return size(head, messages)


def usage_of(record: rec.UsageRecorded) -> dict[str, int]:
    """A usage record's input figures, as billing's replay keeps them."""
    return billing_usage_of(record)
