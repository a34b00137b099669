"""`rhapsody export` and `/export`: a session as one self-contained HTML page or as Markdown.

The transcript is the one renderer's lines (render.record_lines, as the app rebuilds it, plus
the human's approvals); the head and the charts are the figures `rhapsody stats` computes.
The page fetches nothing: inline CSS, inline SVG, no script, and a Content-Security-Policy
that forbids any load. Every credential shape or secret value is masked (core/secrets.py).
A long output is folded and cut to INLINE_CAP characters with a note: the history holds it whole.
"""

from __future__ import annotations

import dataclasses
import re
import time
from html import escape
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import Any

from rhapsody.core.session import records as rec
from rhapsody.commands.md_escape import fenced, inert, plain, unsafe
from rhapsody.core.secrets import mask
from rhapsody.view.render import Line, record_lines

INLINE_CAP = 16_000
"""Characters of one folded body the page holds; the rest is named, not inlined."""
MD_CAP = 2_000
"""The same for Markdown, which goes into an issue (GitHub takes 65,536 characters a comment)."""
FORMATS = {"html": ".html", "md": ".md"}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;max-width:60rem;margin:1.5rem auto;padding:0 1rem;
color:#1d1d1f;background:#fbfbfa}
h1{font-size:1.3rem}.figures{color:#444;white-space:pre-wrap;font:12px/1.4 ui-monospace,monospace}
.chart{width:100%;height:auto;background:#fff;border:1px solid #ddd;margin:.5rem 0}
.chart text{font:11px sans-serif;fill:#444;stroke:none}.chart .chart-title{font-weight:600}
.chart polyline{fill:none;stroke-width:1.5}.context,.legend.context line{stroke:#2a6fdb}
.billed,.legend.billed line{stroke:#2a6fdb}.without,.legend.without line{stroke:#c2410c;stroke-dasharray:5 3}
.legend line{stroke-width:2}.axis{stroke:#888}.grid{stroke:#eee}.seam-mark line{stroke:#7c3aed;stroke-dasharray:3 3}
.seam-mark text{fill:#7c3aed}
.line{margin:.25rem 0;white-space:pre-wrap;overflow-wrap:anywhere}
.user{background:#eef4ff;border-left:3px solid #2a6fdb;padding:.3rem .6rem}
.hint{background:#fff7e6;border-left:3px solid #d97706;padding:.2rem .6rem}
.approval{color:#166534}.error,.violation{color:#b91c1c}.notice,.retry,.interrupted,.harness{color:#555}
details.line>summary{cursor:pointer;font:12.5px/1.4 ui-monospace,monospace;white-space:pre-wrap}
details pre{background:#f4f4f2;padding:.5rem;overflow-x:auto;white-space:pre-wrap;font:12px/1.35 ui-monospace,monospace}
.tool.denied>summary,.tool.error>summary{color:#b91c1c}.stripped>summary{color:#777}
.seam{margin:1rem 0;border-top:2px dashed #7c3aed;border-bottom:2px dashed #7c3aed;padding:.3rem 0;color:#5b21b6}
.cap{color:#777;font-style:italic}
"""
POLICY = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def export_text(root: Path, session_id: str | None, fmt: str) -> tuple[str, str]:
    """(session id, the page) of the session `session_id` names (see stats.session_records)."""
    from rhapsody.commands.stats import session_records
    from rhapsody.core.accounting.billing import head_of

    _, records = session_records(root, session_id)
    sid = head_of(records).session
    page = page_html(records, root, sid) if fmt == "html" else page_markdown(records, root, sid)
    return sid, page


def write_export(root: Path, session_id: str | None, fmt: str, out: Path | None) -> Path:
    """Write the export to `out`, or to `.rhapsody/exports/SESSION.html|md` (mode 0600); returns the path."""
    from rhapsody.core.session.history import private_dir, state_dir, write_private

    sid, page = export_text(root, session_id, fmt)
    if out is None:
        out = private_dir(state_dir(root) / "exports") / f"{sid}{FORMATS[fmt]}"
    write_private(out, page)
    return out


def transcript(records: Sequence[rec.Record], root: Path, sid: str) -> list[Line]:
    """The session's lines as the app shows them, with the human's approvals."""
    lines = record_lines(records, root, sid, approvals=True)  # the conversation folded from the same parse
    return [line for _, line in lines]


def head(records: Sequence[rec.Record], sid: str, per_request: bool) -> tuple[str, list[str], dict[str, Any]]:
    """The page's title, the figures `rhapsody stats` prints, and the billing figures behind them."""
    from rhapsody.commands.stats import billing, stats_lines
    from rhapsody.core.accounting.billing import head_of

    first = head_of(records)
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(records[0].ts if records else 0))
    billed = billing(records, per_request=per_request)
    title = f"rhapsody session {sid} · {first.model} · {when}"
    return title, stats_lines(records, billed), billed


def capped(text: str, cap: int = INLINE_CAP) -> tuple[str, str]:
    """(what the page inlines, a note naming what it left out, or '')."""
    if len(text) <= cap:
        return text, ""
    left = len(text) - cap
    return text[:cap], (f"… {left:,} more characters not shown here; the history file holds them whole "
                               "(recall brings back a stripped call's output)")


# -- HTML ------------------------------------------------------------------------------------


def page_html(records: Sequence[rec.Record], root: Path, sid: str) -> str:
    """The whole page: head, figures, both charts, the transcript; secrets masked."""
    from rhapsody.commands.export_charts import session_charts
    from rhapsody.sandbox.bwrap import secret_values

    title, figures, billed = head(records, sid, per_request=True)
    body = "".join(html_line(line) for line in transcript(records, root, sid))
    page = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{escape(title)}</h1><div class=\"figures\">{escape(chr(10).join(figures))}</div>"
            f"{session_charts(records, billed)}<main id=\"transcript\">{body}</main></body></html>\n")
    return mask(page, secret_values())


def html_line(line: Line) -> str:
    """One transcript line as an element: a folded call, a seam with its field note, or a line of text."""
    kind = escape(line.kind)
    if line.kind == "seam":
        return (f'<section class="seam" id="seam-{escape(line.key)}"><div>{escape(line.text)}</div>'
                f"{_folded('field note', line.body, 'note')}</section>")
    if line.kind in ("tool", "thinking", "harness", "attached") and line.body:
        css = f"line {kind} {escape(line.state)}" + (" stripped" if "· stripped" in line.text else "")
        return _folded(line.full or line.text, line.body, css)
    return f'<div class="line {kind}">{escape(line.full or line.text)}</div>'


def _folded(summary: str, body: str, css: str) -> str:
    shown, note = capped(body)
    cap = f'<div class="cap">{escape(note)}</div>' if note else ""
    return f'<details class="{css}"><summary>{escape(summary)}</summary><pre>{escape(shown)}</pre>{cap}</details>'


# -- Markdown --------------------------------------------------------------------------------


def page_markdown(records: Sequence[rec.Record], root: Path, sid: str) -> str:
    """The transcript as Markdown for an issue: calls folded in <details>, seams as rules; secrets masked, and
    transcript text inert (commands/md_escape.py): no HTML, image or link it did not already show as text."""
    from rhapsody.sandbox.bwrap import secret_values

    secrets = secret_values()
    title, figures, _ = head(records, sid, per_request=False)
    # masked before any escaping: the mask's own brackets must not meet a `(` left after it
    lines = [dataclasses.replace(line, text=mask(line.text, secrets), full=mask(line.full, secrets),
                                 body=mask(line.body, secrets)) for line in transcript(records, root, sid)]
    parts = [f"# {plain(mask(title, secrets))}", "\n".join(f"- {plain(mask(line, secrets))}" for line in figures)]
    for text_of in (inert, fenced):
        page = "\n\n".join(parts + [md_line(line, text_of) for line in lines]) + "\n"
        if not any(not _own_html(token) for token in unsafe(page)):
            break  # else a part is inert alone but not beside the others: fence every part of the model's
    return page


_OWN_HTML = re.compile(r"<details><summary>[^<]*</summary>|</details>")
"""The only HTML the Markdown export writes itself (its summary text escaped)."""


def _own_html(token: Any) -> bool:
    return token.type == "html_block" and _OWN_HTML.fullmatch(token.content.strip()) is not None


def md_line(line: Line, text_of: Callable[[str], str] = inert) -> str:
    """One transcript line as Markdown: the model's text made inert by `text_of`, every other line plain."""
    if line.kind == "seam":
        return f"---\n\n**{plain(line.text.strip('─ '))}**\n\n{_md_folded('field note', line.body)}\n\n---"
    if line.kind in ("tool", "thinking", "harness", "attached") and line.body:
        return _md_folded(line.full or line.text, line.body)
    if line.kind == "assistant":
        return text_of(line.text)
    return "> " + plain(line.full or line.text).replace("\n", "\n> ")


def _md_folded(summary: str, body: str) -> str:
    shown, note = capped(body, MD_CAP)
    fence = "`" * max(3, _longest_backticks(shown) + 1)
    tail = f"\n\n_{note}_" if note else ""
    summary = " ".join(part for part in summary.splitlines() if part.strip())  # one line: a blank one would end the HTML block early
    return (f"<details><summary>{escape(summary)}</summary>\n\n{fence}text\n{shown}\n{fence}{tail}\n\n</details>")


def _longest_backticks(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)
