"""A short recap of a session, for the terminal's scrollback when the app ends and for `--plain --resume`.

The last exchange (what the human asked, the end of what the agent said), the files the agent
changed, the seams, the cost and how to come back; every figure is read from the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rhapsody.core.session import records as rec
from rhapsody.core.attachments import shown as attachment
from rhapsody.core.session.messages import TextBlock, ToolResultBlock
from rhapsody.core.counts import counted
from rhapsody.view.render import dollars, one_line, spoken_by

if TYPE_CHECKING:
    from rhapsody.core.session.session_figures import SessionFigures

WIDTH = 100
"""Columns a recap line is cut to, at most (a narrower terminal: its width)."""


def _width() -> int:
    import shutil

    return min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns - 1)


def _texts(record: rec.MessageAdded) -> str:
    """The message's words; of a user message, only those the human wrote (never rhapsody's own
    `[rhapsody] …` messages or an imported tool's, `render.spoken_by`), and never an attached file's or
    folder's text (the human's words name it)."""
    human = record.role != "user"
    texts = [b.text for b in record.content if isinstance(b, TextBlock)]
    return " ".join(t for t in texts if (human or spoken_by(t) == "human") and attachment(t) is None).strip()


def last_exchange(records: Sequence[rec.Record]) -> tuple[str, str]:
    """The human's last typed message and the agent's last words after it ('' when none)."""
    asked, said = "", ""
    for record in rec.of(records, rec.MessageAdded):
        text = _texts(record)
        if typed(record) and text:
            asked, said = text, ""
        elif record.role == "assistant" and text:
            said = text
    return asked, said


def first_typed(records: Sequence[rec.Record]) -> str:
    """The first message the human typed ('' when none)."""
    return next((text for r in rec.of(records, rec.MessageAdded) if typed(r) and (text := _texts(r))), "")


def typed(record: rec.MessageAdded) -> bool:
    """Whether a message record is one the human typed: a user message without tool results, and not one an
    imported session marks as its tool's own (Claude Code's meta messages, a compaction's summary)."""
    return (record.role == "user" and not rec.extra(record, "meta") and not rec.extra(record, "compact_summary")
            and not any(isinstance(b, ToolResultBlock) for b in record.content))


def changed_files(records: Sequence[rec.Record]) -> list[str]:
    """Files the agent's writes and edits changed, in the order first changed."""
    paths = [r.path for r in rec.of(records, rec.ToolRun) if r.op == "write" and r.path and not r.is_error
             and not r.refused]
    return list(dict.fromkeys(paths))


def recap_lines(records: Sequence[rec.Record], folded: SessionFigures | None = None) -> list[str]:
    """The recap, one fact per line; `folded`: the session's own figures, when it has them (else folded here)."""
    from rhapsody.core.session.session_figures import figures

    asked, said = last_exchange(records)
    width = _width()
    lines = [f"  you: {one_line(asked, width - 7)}"] if asked else []
    lines += [f"  agent: {one_line(said, width - 9)}"] if said else []
    files = changed_files(records)
    if files:
        lines.append(f"  files changed: {one_line(', '.join(files), width - 17)}")
    f = folded or figures(records)
    cost = dollars(f.cost) if f.priced else "unknown (a model without a price)"
    lines.append(f"  {counted(f.requests, 'request')}, {counted(f.tool_calls, 'tool call')}, seams {f.seams}, cost {cost}")
    return lines


def recap_text(records: Sequence[rec.Record], session_id: str, folded: SessionFigures | None = None) -> str:
    """The recap printed to the scrollback when the app ends; '' for a session without a message."""
    if rec.first(records, rec.MessageAdded) is None:
        return ""
    return "\n".join([f"rhapsody session {session_id}:", *recap_lines(records, folded)]) + "\n"
