"""`rhapsody stats [SESSION] [--json]`: every seam of a session as a table, with session totals and
the billed input with and without the seams (core/accounting/billing.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from collections.abc import Sequence
from dataclasses import dataclass

from rhapsody.core.session import records as rec
from rhapsody.core.accounting.billing import head_of, seam_savings, served_by
from rhapsody.core.errors import InputError
from rhapsody.core.session.history import named_session, read_session
from rhapsody.core.pricing import price_of, priced
from rhapsody.core.session.session_figures import SessionFigures, figures as fold_figures, usage_input
from rhapsody.core.window import Window, history_window
from rhapsody.core.accounting.subagent_figures import spent, spent_line
from rhapsody.core.json_types import JsonObject


STATS_COLUMNS = ("seam", "context ~tokens", "note added", "note bytes", "strip took", "bytes", "tool calls",
                 "API input: before → after")
STATS_NOTE = ("context: rhapsody's estimate of the request it would send (the figure the status bar and the seam "
              "divider show), when the handoff was asked → just after the strip. note added: what the request for "
              "the note, the note and its index added before the strip (the handoff's own blocks only: tool "
              "results that came in while it waited are counted before it); note bytes: the field note as "
              "saved; strip took: what the strip removed, and its "
              "share of the context just before it. API input: what the API reported for the last request before "
              "the seam and the first one after it, which also carries the field note and every message since, so "
              "it can be higher than before: it is not the context. Messages and thinking blocks: --json.")


def seam_rows(records: Sequence[rec.Record]) -> list[tuple[rec.Seam, SeamRow]]:
    """One row per seam: the seam record, with the API-reported input just after, whether it was undone and
    the size of its note."""
    rows = []
    for i, record in enumerate(records):
        if not isinstance(record, rec.Seam):
            continue
        after_usage = rec.first(records[i + 1 :], rec.UsageRecorded)
        undone = any(r.seam == record.seam for r in rec.of(records[i + 1 :], rec.Unseam))
        rows.append((record, SeamRow(usage_input(after_usage) if after_usage else None, undone,
                                     note_bytes(records, record.seam))))
    return rows


@dataclass(frozen=True)
class SeamRow:
    """What the table says of a seam beside its own record."""

    reported_input_after: int | None
    undone: bool
    note_bytes: int | None


def note_bytes(records: Sequence[rec.Record], seam: int) -> int | None:
    """The size of seam `seam`'s field note as saved (its `noted` record says; None: no note, or a history
    written before the figure was recorded)."""
    sizes = [r.note_bytes for r in rec.of(records, rec.Handoff) if r.state == "noted" and r.seam == seam
             and r.note_bytes is not None]
    return sizes[-1] if sizes else None


def billing(records: Sequence[rec.Record], read_mult: float | None = None, per_request: bool = False) -> JsonObject:
    """What the seams saved in billed input; each request is priced at the model that served it, its cache
    reads at that model's rate unless `read_mult` is given (`per_request`: each request's figures too, as
    core.accounting.billing.seam_savings gives them)."""
    switched = rec.last(records, rec.ModelSwitched)
    model = switched.model if switched else head_of(records).model
    served = served_by(records)
    # A model without a price gets null dollars, not a guess.
    prices = [price_of(m)[0] for m in served] if all(priced(m) for m in served) and priced(model) else None
    figures = seam_savings(records, read_mult, prices, per_request)
    return {"model": model, "billed_input_usd": None, "billed_input_usd_without_seams": None, **figures}


def saving_line(figures: JsonObject) -> str:
    """One line: billed input with the seams beside without them; with no seam, only the billed input."""
    mult = figures["cache_read_multiplier"]
    reads = f"cache reads {mult}×" if mult is not None else "cache reads at each request's model rate"
    hour = f", 1-hour writes {figures['cache_write_1h_multiplier']}×" if figures.get("cache_write_1h_tokens") else ""
    writes = f"writes {figures['cache_write_multiplier']}×{hour}"
    head = f"billed input ({reads}, {writes}): {figures['billed_input_tokens']:,}"
    if not figures["seams"]:
        return f"{head}; no seams yet, so nothing saved"
    saving = figures["saving"]
    return (f"{head} with seams, {figures['billed_input_tokens_without_seams']:,} without ("
            + (f"saved {saving:.1%}" if saving >= 0 else f"{-saving:.1%} more so far")
            + f"; each further request saves ~{figures['saving_per_further_request']:,})")


def window_of(records: Sequence[rec.Record], model: str, flag: int | None = None) -> Window:
    """The window the session ran in: `--context-window`, else RHAPSODY_CONTEXT_WINDOW, else what the
    history shows (core/window.py); a setting that is not a number of tokens is an InputError."""
    if flag is not None:
        if flag < 1000:
            raise InputError(f"--context-window {flag}: a window is at least 1,000 tokens")
        return history_window(records, model, flag, "--context-window")
    raw = os.environ.get("RHAPSODY_CONTEXT_WINDOW", "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1000:
            raise InputError(f"RHAPSODY_CONTEXT_WINDOW={raw!r}: not a window in tokens (at least 1000)")
        return history_window(records, model, int(raw), "RHAPSODY_CONTEXT_WINDOW")
    return history_window(records, model)


def session_records(root: Path, session_id: str | None) -> tuple[Path, list[rec.Record]]:
    """The history a command names (an id or prefix, a .jsonl file, or the latest) and its records, typed."""
    path = named_session(root, session_id)
    return path, read_session(path, typed=True).typed


def _json_row(seam: rec.Seam, row: SeamRow) -> JsonObject:
    """A seam's row for `--json`: its figures under the record's own field names."""
    return {"seam": seam.seam, "before": seam.before.model_dump(), "after": seam.after.model_dump(),
            "reported_input_before": seam.reported_input_before, "reported_input_after": row.reported_input_after,
            "undone": row.undone, "stripped_calls": seam.stripped_calls, "stripped_sha256": seam.stripped_sha256,
            "asked_est_tokens": seam.asked_est_tokens, "note_bytes": row.note_bytes}


def print_stats(root: Path, session_id: str | None, as_json: bool = False, read_mult: float | None = None,
                window: int | None = None) -> int:
    """Print the seam table and the billed input with and without seams; returns the exit status."""
    path, records = session_records(root, session_id)
    figures = billing(records, read_mult)
    found = window_of(records, figures["model"], window)
    folded = fold_figures(records)
    totals = folded.usage
    counts = {"request": folded.requests, "tool_run": folded.tool_calls, "violation": folded.violations,
              "hint": folded.hints}
    if as_json:
        rows = [_json_row(seam, row) for seam, row in seam_rows(records)]
        # One definition of "requests", as the text line and headless: every request sent, answered or not.
        print(json.dumps({"session": path.stem, **figures, "requests": counts["request"], "usage": totals,
                          "window": {"tokens": found.tokens, "source": found.source},
                          "cost_usd": round(folded.cost, 6) if folded.priced else None,
                          "counts": counts, "seam_rows": rows, "subagents": spent(records).as_json()}))
        return 0
    _print_table(path, records, totals, counts)
    print(f"cost {folded.cost_text()} (each request at the model that served it)")
    share = f" (context ~{folded.context:,}, {folded.context / found.tokens:.1%} of it)" if found.tokens else ""
    print(f"window {found.tokens:,} tokens: {found.source}{share}")
    print(saving_line(figures))
    delegated = spent_line(spent(records))
    if delegated:
        print(delegated)
    return 0


def _print_table(path: Path, records: Sequence[rec.Record], totals: dict[str, int], counts: dict[str, int]) -> None:
    from rich.console import Console

    console = Console()
    rows = seam_rows(records)
    if not rows:  # a header with no rows reads as a failure to show them
        console.print(f"no seams in session {path.stem}")
    else:
        _print_seams(console, path, rows)
    console.print(
        f"requests {counts['request']}, tool calls {counts['tool_run']}, narration violations {counts['violation']}, "
        f"hints {counts['hint']}; tokens in {totals['input_tokens']:,}, cache write "
        f"{totals['cache_creation_input_tokens']:,}, cache read {totals['cache_read_input_tokens']:,}, "
        f"out {totals['output_tokens']:,}"
    )


def _print_seams(console: Any, path: Path, rows: list[tuple[rec.Seam, SeamRow]]) -> None:
    from rich.table import Table

    table = Table(title=f"seams of session {path.stem}")
    # "context" is the one figure the status bar, the seam divider and /stats show (rhapsody/core/session/session_figures.py);
    # the API's reported input is the request before the seam and the next one, which also holds new messages.
    for column in STATS_COLUMNS:
        table.add_column(column, justify="right", no_wrap=column == "seam")
    for seam, row in rows:
        b, a = seam.before, seam.after
        asked = seam.asked_est_tokens
        start = asked if asked is not None else b.est_tokens  # as the seam divider (render.seam_line)
        took = b.est_tokens - a.est_tokens
        after_api = "—" if row.reported_input_after is None else f"{row.reported_input_after:,}"
        table.add_row(
            f"{seam.seam}{' (undone)' if row.undone else ''}",
            f"~{start:,} → ~{a.est_tokens:,}",
            f"~{b.est_tokens - asked:,}" if asked is not None else "—",
            "—" if row.note_bytes is None else f"{row.note_bytes:,}",
            f"~{took:,} ({took / b.est_tokens if b.est_tokens else 0:.0%})",
            f"{b.request_bytes:,} → {a.request_bytes:,}",
            f"{b.tool_use} → {a.tool_use}",
            f"{seam.reported_input_before or 0:,} → {after_api}",
        )
    console.print(table)
    console.print(STATS_NOTE)


def stats_lines(records: Sequence[rec.Record], figures_billed: JsonObject | None = None,
                folded: SessionFigures | None = None) -> list[str]:
    """Seams and counters of a session as plain lines (/stats, and the head of an export);
    `figures_billed`: `billing(records)` when the caller has it already; `folded`: the session's own figures."""
    from rhapsody.view.render import seam_line

    rows = seam_rows(records)
    lines = [seam_line(seam) + ("" if row.note_bytes is None else f", note {row.note_bytes:,} bytes")
             + (" (undone)" if row.undone else "") for seam, row in rows] or ["no seams yet"]
    f = folded or fold_figures(records)
    lines.append(f"requests {f.requests}, tool calls {f.tool_calls}, narration violations {f.violations}, "
                 f"{f.seams_text()}, context ~{f.context:,} tokens, cost {f.cost_text()}")
    if f.requests:
        lines.append(saving_line(figures_billed or billing(records)))
    delegated = spent_line(spent(records))
    return [*lines, delegated] if delegated else lines
