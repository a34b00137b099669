"""`rhapsody stats SESSION --what-if POLICY|sweep [--json]`: what seams placed by a policy would have
cost, beside the session as it happened (the replay is core/accounting/whatif.py; nothing calls a model)."""

from __future__ import annotations

from collections.abc import Sequence

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rhapsody.core.session import records as rec
from rhapsody.core.accounting import whatif, whatif_rows
from rhapsody.core.session.context import RequestSpec, build_request, measure
from rhapsody.core.errors import HistoryError, InputError
from rhapsody.commands.stats import session_records, window_of
from rhapsody.core.accounting.billing import head_of
from rhapsody.core.session.history import read_history, sessions
from rhapsody.core.pricing import price_of, priced
from rhapsody.core.window import Window, history_window
from rhapsody.core.json_types import JsonObject

COLUMNS = ("policy", "requests", "seams", "billed input", "vs no seams", "$ input+notes", "1h cache where it pays",
           "peak context", "rhapsody's prompt", "vs no seams", "1h where it pays")


def main(root: Path, session_id: str | None, what: str, as_json: bool = False, read_mult: float | None = None,
         window: int | None = None, note_tokens: int | None = None) -> int:
    """Print the what-if table (or one JSON object); returns the exit status. `window`: --context-window;
    `note_tokens`: --note-tokens."""
    try:
        policies = [whatif.parse_policy(p) for p in (whatif.SWEEP if what == "sweep" else what.split(","))]
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if note_tokens is not None and not 1 <= note_tokens <= 100_000:
        raise InputError(f"--note-tokens {note_tokens}: a note adds between 1 and 100,000 tokens")
    path, records = session_records(root, session_id)
    model = _model(records)
    note = whatif.given_note(note_tokens) if note_tokens is not None else _note(root, path, records)
    report = figures(records, policies, note, read_mult, window_of(records, model, window),
                     own_spec(root, model))
    print(json.dumps({"session": path.stem, **report}) if as_json else render(path.stem, report))
    return 0


def _note(root: Path, path: Path, records: Sequence[rec.Record]) -> whatif.NoteCost:
    """The note cost from every history of the project, the replayed session's included."""
    histories = [records]
    for history in sessions(root):
        if history.resolve() == path.resolve():
            continue
        try:
            histories.append(read_history(history, typed=True).typed)
        except HistoryError:
            continue
    return whatif.note_cost(histories)


def own_spec(root: Path, model: str) -> RequestSpec:
    """rhapsody's own system prompt and tool definitions for this project, built as a new session's are
    (the first request's head, before any message), in the parts the what-if counts."""
    from rhapsody.config.settings import load_settings
    from rhapsody.tools import default_toolbox
    from rhapsody.wiring import new_spec

    settings = load_settings(root)
    toolbox = default_toolbox(settings.permission_mode or "auto-edit", sandbox=settings.sandbox)
    return new_spec(root, settings, model or "unknown", toolbox)


def _model(records: Sequence[rec.Record]) -> str:
    switched = rec.last(records, rec.ModelSwitched)
    return switched.model if switched else head_of(records).model


def figures(records: Sequence[rec.Record], policies: list[whatif.SeamPolicy], note: whatif.NoteCost,
            read_mult: float | None, found: Window | None = None, spec: RequestSpec | None = None) -> JsonObject:
    """Every arm priced: as it happened, without seams, one per policy, and the two alternatives; each
    request at the model that answered it, and the replay as it happened against the reported usage
    (`replay_error`). `found`: the window the session ran in (core/window.py; what the history shows when
    None). With `spec` (rhapsody's own request head), each row again with its prompt and tools in place of
    the source's."""
    model = _model(records)
    price = price_of(model)[0] if priced(model) else None
    mult = read_mult if read_mult is not None else (price.read_mult if price else 0.1)
    found = found or history_window(records, model)
    if any(p.kind == "share" for p in policies) and found.assumed:
        raise InputError(f"the context window of {model} is unknown: use at=TOKENS instead of share=, "
                         "or give it with --context-window N")
    window = found.tokens
    fit = whatif.calibrate(records, read_mult)
    base = whatif.run(records, None, note, window, read_mult, fit)
    arms = [whatif.run(records, p, note, window, read_mult, fit) for p in policies]
    happened, rebuilt = whatif.as_happened(records, read_mult, fit), whatif.replayed(records, read_mult, fit)
    prefix = fit.head[2]["prefix"] if len(fit.head) > 2 else ""
    replay = _Replay(records, note, window, read_mult, fit, price, base)
    report = {
        "model": model, "window": {"tokens": window, "source": found.source}, "cache_read_multiplier": mult,
        "note": dataclasses.asdict(note),
        "calibration": {"prefix_tokens": round(len(prefix) / 4), "scale": round(fit.scale, 4)},
        "replay_error": whatif.replay_error(happened, rebuilt),
        "replay": {"reported": happened.split.as_dict(), "replayed": rebuilt.split.as_dict()},
        "clearing": {"trigger_input_tokens": CLEARING.trigger, "keep_tool_uses": CLEARING.keep},
        "subagents": whatif_rows.subagents(records, read_mult),
        "as_happened": _row(happened, price, None),
        "without_seams": _row(base, price, None),
        "policies": [_row(arm, price, base) for arm in arms],
        "alternatives": [_alternative(replay.row(whatif_rows.compaction_arm(records, read_mult, fit))),
                         _alternative(replay.row(whatif_rows.clearing_arm(records, read_mult, fit, CLEARING)))],
    }
    report["own_prompt"] = _own_prompt(replay, spec, policies, report) if spec is not None else None
    return report


def _alternative(row: JsonObject) -> JsonObject:
    """A row instead of seams: the cache lifetime choice is priced for seam rows only, so it is left out."""
    return {k: v for k, v in row.items() if k not in ("billed_ttl_choice", "one_hour_requests")}


CLEARING = whatif_rows.Clearing()
"""The server-side clearing the alternatives row prices (the API's defaults)."""


@dataclass(frozen=True)
class _Replay:
    """What every arm of one report shares."""

    records: Sequence[rec.Record]
    note: whatif.NoteCost
    window: int | None
    mult: float | None
    """The cache-read rate given on the command line (None: each model's own)."""
    fit: whatif.Calibration
    price: Any
    base: whatif.Arm

    def row(self, arm: whatif.Arm) -> JsonObject:
        """The arm as a row, compared with the replay without seams."""
        return _row(arm, self.price, self.base)

    def own(self, arm: whatif.Arm) -> JsonObject:
        """The arm with rhapsody's own prompt, as a row's `own_prompt`."""
        row = self.row(arm)
        own = {"billed_input_tokens": arm.billed_input_tokens, "usd": row["usd"], "saving": row.get("saving")}
        if arm.billed_ttl_choice:  # a seam row: the same requests with rhapsody's choice of cache lifetime
            own |= {"billed_ttl_choice": arm.billed_ttl_choice, "one_hour_requests": arm.one_hour_requests}
        return own


def _own_prompt(replay: _Replay, spec: RequestSpec, policies: list[whatif.SeamPolicy],
                report: JsonObject) -> JsonObject:
    """Each row again with rhapsody's own prompt and tools in place of the source's prefix, put beside the
    row (`own_prompt`, never in its fields); returns what that prompt weighs."""
    own = whatif.prompt_head(spec.system, spec.tools)
    r = replay
    report["without_seams"]["own_prompt"] = r.own(whatif.run(r.records, None, r.note, r.window, r.mult, r.fit, own))
    for row, policy in zip(report["policies"], policies):
        row["own_prompt"] = r.own(whatif.run(r.records, policy, r.note, r.window, r.mult, r.fit, own))
    report["alternatives"][1]["own_prompt"] = r.own(whatif_rows.clearing_arm(r.records, r.mult, r.fit, CLEARING, own))
    request_bytes, est_tokens = measure(build_request(spec, []))
    return {"request_bytes": request_bytes, "est_tokens": est_tokens,
            "tokens": round(sum(whatif.tokens(part) for part in own) * r.fit.scale)}


def _row(arm: whatif.Arm, price: Any, base: whatif.Arm | None) -> JsonObject:
    row: JsonObject = dataclasses.asdict(arm)
    row["split"] = arm.split.as_dict()
    row["usd"] = (round(arm.input_usd + arm.note_output_tokens * price.output / 1e6, 4)
                  if price and arm.input_usd is not None else None)
    if base is not None:
        row["saving"] = round(1 - arm.billed_input_tokens / base.billed_input_tokens, 4) if base.billed_input_tokens else 0.0
    return row


def render(session: str, report: JsonObject) -> str:
    """The table a person reads, with the note estimate, the calibration and rhapsody's own prompt said plainly."""
    rows = [report["as_happened"], report["without_seams"], *report["policies"]]
    cells = [COLUMNS] + [_cells(row) for row in rows] + [_cells(row) for row in report["alternatives"]]
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    table = ["  ".join(c[i].rjust(widths[i]) if i else c[i].ljust(widths[i]) for i in range(len(c))) for c in cells]
    table.insert(len(rows) + 1, "instead of seams (no seams; the source's prefix):")
    cal, own, clear = report["calibration"], report["own_prompt"], report["clearing"]
    window = f"{report['window']['tokens']:,}"
    writes = "writes 1.25× (1-hour 2×)" if report["as_happened"]["usd"] is not None else "no write premium (not Claude)"
    return "\n".join([
        f"window {window} tokens: {report['window']['source']}.",
        f"what-if seams for session {session} ({report['model']}, window {window}, cache reads "
        f"{report['cache_read_multiplier']}×, {writes}, each request at the model that answered it)",
        *table,
        f"note: {report['note']['basis']}.",
        f"replayed requests are rhapsody's rebuild of each request, with ~{cal['prefix_tokens']:,} tokens the history "
        f"does not hold (the first request's reported input minus the rebuild: a source's own system prompt and "
        f"tools) and scaled ×{cal['scale']} to the reported input; 'vs no seams' compares with the replay without seams.",
        "'1h cache where it pays': the same requests' billed input with rhapsody's choice of cache lifetime "
        "(the 1-hour cache, writes 2×, from the request on which the pauses so far make it cheaper; "
        "requests that went with it in brackets).",
        f"the replay as it happened bills {report['replay_error']:+.1%} against the usage the API reported "
        f"(uncached, 5-minute and 1-hour writes, reads: {_split(report['replay']['replayed'])} replayed, "
        f"{_split(report['replay']['reported'])} reported): that is how far to trust the rows above.",
        *([] if own is None else [
            f"the first 'vs no seams' is the seams alone (the source's prefix); 'rhapsody's prompt' is the same row "
            f"with rhapsody's own system prompt and tools ({own['request_bytes']:,} bytes, ~{own['tokens']:,} tokens) "
            "in place of that prefix, also against the replay without seams with the source's prefix."]),
        *_subagent_line(report["subagents"]),
        "a source compaction the session had happens in a seam row only where that row's context grew as large; "
        "there rhapsody seams instead. 'source's compaction' adds each compaction's own request and summary, "
        f"which the transcript does not report; 'clear tool results' is the API's clearing of all tool results but "
        f"the newest {clear['keep_tool_uses']} once a request reaches {clear['trigger_input_tokens']:,} input tokens.",
    ])


def _subagent_line(sub: dict[str, Any]) -> list[str]:
    """What the session's subagents billed, said beside the rows (none: nothing said)."""
    if not sub["requests"]:
        return []
    dollars = "" if sub["usd"] is None else f" (${sub['usd']:,.2f})"
    return [f"its subagents (sidechains) sent {sub['requests']:,} requests the file reports, billing "
            f"{sub['billed_input_tokens']:,} input tokens{dollars} as they happened: the same in every row, so not in them."]


def _split(split: dict[str, int]) -> str:
    return " / ".join(f"{split[k]:,}" for k in ("uncached", "write_5m", "write_1h", "read"))


def _cells(row: JsonObject) -> tuple[str, ...]:
    saving = row.get("saving")
    own = row.get("own_prompt")
    return (row["label"], f"{row['requests']:,}", f"{row['seams']:,}", f"{row['billed_input_tokens']:,}",
            "" if saving is None else f"{-saving:+.0%}", "—" if row["usd"] is None else f"${row['usd']:,.2f}",
            _ttl_cell(row), f"{row['peak_context']:,}", "" if own is None else f"{own['billed_input_tokens']:,}",
            "" if own is None or own["saving"] is None else f"{-own['saving']:+.0%}",
            "" if own is None or "billed_ttl_choice" not in own else _ttl_cell({**own, "label": row["label"]}))


def _ttl_cell(row: JsonObject) -> str:
    """"1,803,311 (212)": billed input with the cache lifetime rhapsody chooses; "" for a row without one."""
    if "billed_ttl_choice" not in row or row["label"] == "as it happened":
        return ""
    return f"{row['billed_ttl_choice']:,} ({row['one_hour_requests']:,})"
