"""Two charts of a session, drawn as inline SVG for an export (no script, nothing fetched).

- the context per request: rhapsody's estimate of each request it sent (core/session/session_figures.py's
  "context"), with the seams drawn where they fell, so their sawtooth shows;
- the billed input, cumulative, as it happened beside the same requests without seams
  (core/accounting/billing.py's figures, as `rhapsody stats` prints their totals).

Imports: stdlib and rhapsody's figures only.
"""

from __future__ import annotations

from collections.abc import Sequence

from dataclasses import dataclass, field
from html import escape
from typing import Any

from rhapsody.core.session import records as rec
from rhapsody.core.session.session_figures import SessionFigures

WIDTH, HEIGHT = 880, 260
LEFT, RIGHT, TOP, BOTTOM = 72, 16, 28, 36


@dataclass
class Series:
    """Per-request points of a history and where its seams fell (x: requests before the seam)."""

    context: list[tuple[float, float]] = field(default_factory=list)
    """(request number, context); a seam or a cut adds its before and after between two requests."""
    requests: int = 0
    seams_at_request: list[tuple[float, str]] = field(default_factory=list)
    seams_at_answer: list[tuple[float, str]] = field(default_factory=list)


def series(records: Sequence[rec.Record]) -> Series:
    """The context after each request (the figure the status bar showed), and the seams' places."""
    figures, seen, out = SessionFigures(), [], Series()
    answered, pending = 0, False
    undone = {r.seam for r in rec.of(records, rec.Unseam)}
    for record in records:
        seen.append(record)
        figures.fold(seen)
        if isinstance(record, rec.RequestMade):
            out.requests += 1
            out.context.append((out.requests, figures.context))
            pending = True
        elif isinstance(record, rec.UsageRecorded) and pending:
            answered, pending = answered + 1, False
        elif isinstance(record, (rec.Seam, rec.Prune)):  # the drop itself, as the status bar showed it
            out.context += [(out.requests + 0.5, record.before.est_tokens), (out.requests + 0.5, figures.context)]
        if isinstance(record, rec.Seam):
            label = f"seam {record.seam}" + (" (undone)" if record.seam in undone else "")
            out.seams_at_request.append((out.requests + 0.5, label))
            out.seams_at_answer.append((answered + 0.5, label))
    return out


def cumulative(values: list[float]) -> list[tuple[float, float]]:
    """Running sums, as points from x = 1."""
    total, out = 0.0, []
    for i, value in enumerate(values):
        total += value
        out.append((i + 1.0, total))
    return out


def chart(title: str, lines: list[tuple[str, str, list[tuple[float, float]]]], seams: list[tuple[float, str]],
          x_label: str, chart_id: str) -> str:
    """One SVG line chart: `lines` are (css class, legend, (x, y) points, x from 1); seams are dashed verticals."""
    n = max([x for _, _, points in lines for x, _ in points[-1:]] + [at for at, _ in seams] + [0.0])
    top = max((max(y for _, y in points) for _, _, points in lines if points), default=0.0) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: float) -> float:
        return LEFT + (i - 1) / max(1, n - 1) * plot_w

    def y(v: float) -> float:
        return TOP + plot_h - v / top * plot_h

    parts = [f'<svg id="{chart_id}" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'xmlns="http://www.w3.org/2000/svg"><title>{escape(title)}</title>',
             f'<text class="chart-title" x="{LEFT}" y="18">{escape(title)}</text>']
    parts += _axes(top, n, x, y, x_label)
    for at, label in seams:
        sx = f"{x(at):.1f}"
        anchor = "end" if x(at) > WIDTH - RIGHT - 40 else "middle"  # a seam at the end keeps its label in view
        parts.append(f'<g class="seam-mark"><title>{escape(label)}</title><line x1="{sx}" x2="{sx}" y1="{TOP}" '
                     f'y2="{TOP + plot_h}"/><text x="{sx}" y="{TOP - 4}" text-anchor="{anchor}">{escape(label)}</text></g>')
    for i, (css, legend, points) in enumerate(lines):
        drawn = " ".join(f"{x(px):.1f},{y(py):.1f}" for px, py in points)
        parts.append(f'<polyline class="{css}" points="{drawn}"><title>{escape(legend)}</title></polyline>')
        lx = LEFT + 8 + i * 300
        parts.append(f'<g class="legend {css}"><line x1="{lx}" x2="{lx + 18}" y1="{HEIGHT - 6}" '
                     f'y2="{HEIGHT - 6}"/><text x="{lx + 24}" y="{HEIGHT - 2}">{escape(legend)}</text></g>')
    return "".join(parts) + "</svg>"


def _axes(top: float, n: float, x: Any, y: Any, x_label: str) -> list[str]:
    bottom = y(0)
    parts = [f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{bottom:.1f}" y2="{bottom:.1f}"/>']
    for share in (0.0, 0.5, 1.0):
        value = top * share
        parts.append(f'<text class="tick" x="{LEFT - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{value:,.0f}</text>')
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}"/>')
    parts.append(f'<text class="tick" x="{WIDTH - RIGHT}" y="{bottom + 16:.1f}" text-anchor="end">'
                 f'{escape(x_label)} 1–{int(n):,}</text>')
    return parts


def session_charts(records: Sequence[rec.Record], billed: dict[str, Any]) -> str:
    """Both charts of a history; `billed` is `stats.billing(records, per_request=True)`."""
    found = series(records)
    context = chart("context per request (~tokens, rhapsody's estimate)",
                    [("context", "context of each request", found.context)],
                    found.seams_at_request, "request", "chart-context")
    with_seams = cumulative(billed.get("billed_per_request", []))
    without = cumulative(billed.get("billed_per_request_without_seams", []))
    cost = chart("billed input, cumulative (base-input-token equivalents)",
                 [("billed", "as it happened", with_seams), ("without", "the same requests without seams", without)],
                 found.seams_at_answer, "answered request", "chart-billed")
    return context + cost
