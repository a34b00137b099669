"""A short recap of a session, for the terminal's scrollback when the app ends and for `--plain --resume`.

The last exchange (what the human asked, the end of what the agent said), the files the agent
changed, the seams, the cost and how to come back; every figure is read from the history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rhapsody.core.attachments import shown as attachment
from rhapsody.core.counts import counted
from rhapsody.view.render import dollars, one_line, spoken_by

if TYPE_CHECKING:
    from rhapsody.core.session.session_figures import Figures

WIDTH = 100
"""Columns a recap line is cut to, at most (a narrower terminal: its width)."""


def _width() -> int:
    import shutil

    return min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns - 1)


def _texts(record: dict[str, Any]) -> str:
    """The message's words; of a user message, only those the human wrote (never rhapsody's own
    `[rhapsody] …` messages or an imported tool's, `render.spoken_by`), and never an attached file's or
    folder's text (the human's words name it)."""
    human = record.get("role") != "user"
    texts = [str(b.get("text", "")) for b in record.get("content", []) if b.get("type") == "text"]
    return " ".join(t for t in texts if (human or spoken_by(t) == "human") and attachment(t) is None).strip()


def last_exchange(records: list[dict[str, Any]]) -> tuple[str, str]:
    """The human's last typed message and the agent's last words after it ('' when none)."""
    asked, said = "", ""
    for record in records:
        if record["kind"] != "message":
            continue
        text = _texts(record)
        if typed(record) and text:
            asked, said = text, ""
        elif record.get("role") == "assistant" and text:
            said = text
    return asked, said


def first_typed(records: list[dict[str, Any]]) -> str:
    """The first message the human typed ('' when none)."""
    return next((text for r in records if r["kind"] == "message" and typed(r) and (text := _texts(r))), "")


def typed(record: dict[str, Any]) -> bool:
    """Whether a message record is one the human typed: a user message without tool results, and not one an
    imported session marks as its tool's own (Claude Code's meta messages, a compaction's summary)."""
    return (record.get("role") == "user" and not record.get("meta") and not record.get("compact_summary")
            and not any(b.get("type") == "tool_result" for b in record.get("content", [])))


def changed_files(records: list[dict[str, Any]]) -> list[str]:
    """Files the agent's writes and edits changed, in the order first changed."""
    paths = [str(r["path"]) for r in records if r["kind"] == "tool_run" and r.get("op") == "write"
             and r.get("path") and not r.get("is_error") and not r.get("refused")]
    return list(dict.fromkeys(paths))


def recap_lines(records: list[dict[str, Any]], folded: Figures | None = None) -> list[str]:
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


def recap_text(records: list[dict[str, Any]], session_id: str, folded: Figures | None = None) -> str:
    """The recap printed to the scrollback when the app ends; '' for a session without a message."""
    if not any(r["kind"] == "message" for r in records):
        return ""
    return "\n".join([f"rhapsody session {session_id}:", *recap_lines(records, folded)]) + "\n"
