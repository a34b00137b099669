"""Transcript entries built from history records, for resume and for live events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rhapsody.core.context import Conversation
from rhapsody.core.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from rhapsody.render import seam_line, tool_line
from rhapsody.tui.widgets import Entry


def tool_entry(call: ToolUseBlock, output: str, is_error: bool, ms: int, code: int | None, stripped: str = "") -> Entry:
    """One compact, expandable line per tool call."""
    mark = "✗" if is_error else "⏺"
    title = f"{mark} {tool_line(call, is_error, ms, code)}"
    if stripped:
        title = f"⊘ stripped · recall {stripped} · {title}"
    return Entry("tool", output, title=title, classes="error" if is_error else "", key=call.id)


def seam_entry(record: dict[str, Any], root: Path) -> Entry:
    """A divider carrying the seam's figures; expanding it shows the field note."""
    note = ""
    if record.get("note_path"):
        path = root / record["note_path"]
        note = path.read_text(encoding="utf-8") if path.is_file() else f"(note {path} is missing)"
    return Entry("seam", note, title=f"──── {seam_line(record)} ────")


def hint_text(hint_id: str, text: str, state: str) -> str:
    """How a hint shows: pending, or where it landed."""
    return f"✎ {hint_id} [{state}] {text}"


def from_records(records: list[dict[str, Any]], root: Path, session_id: str, conversation: Conversation) -> list[Entry]:
    """Every entry of a recorded session, seams and stripped calls included.

    `conversation` is the session's own, folded from the same records: its messages are
    validated already, and it knows what the latest seam and the rolling cuts took out.
    """
    boundary, pruned, parsed = conversation.boundary(), conversation.pruned, conversation.messages
    hints = {r["id"]: r["text"] for r in records if r["kind"] == "hint"}
    delivered: dict[int, dict[str, str]] = {}
    for r in records:
        if r["kind"] == "hint_delivered":
            delivered.setdefault(r["message_seq"], {}).update({hints.get(i, ""): i for i in r["ids"]})
    runs = {r["tool_use_id"]: r for r in records if r["kind"] == "tool_run"}
    results = {
        b.tool_use_id: b for m in parsed if m.role == "user" for b in m.content if isinstance(b, ToolResultBlock)
    }
    entries: list[Entry] = []
    index = 0
    for record in records:
        kind = record["kind"]
        if kind == "message":
            stripped = index < boundary
            entries += _message_entries(parsed[index], delivered.get(record["seq"], {}), results, runs,
                                        session_id, stripped, pruned)
            index += 1
        elif kind == "seam":
            entries.append(seam_entry(record, root))
        elif kind == "violation":
            entries.append(Entry("violation", f"✗ {record['name']} not run: {record['words']} words of narration, "
                                              f"{record['required']} required"))
        elif kind == "interrupted":
            entries.append(Entry("notice", "⏹ interrupted: what streamed so far is kept"))
        elif kind == "notice":
            entries.append(Entry("notice", f"! {record['text']}"))
        elif kind == "hint" and not any(record["id"] in d.values() for d in delivered.values()):
            entries.append(Entry("hint", hint_text(record["id"], record["text"], "pending"), key=record["id"],
                                 extra={"text": record["text"]}))
    return entries


def _message_entries(message: Message, hints: dict[str, str], results: dict[str, ToolResultBlock],
                     runs: dict[str, dict[str, Any]], session_id: str, stripped: bool, pruned: set[str]) -> list[Entry]:
    out: list[Entry] = []
    for block in message.content:
        if isinstance(block, TextBlock) and message.role == "user":
            if block.text in hints:
                out.append(Entry("hint", hint_text(hints[block.text], block.text, "delivered")))
            elif block.text.startswith("[rhapsody]"):
                out.append(Entry("notice", block.text))
            else:
                out.append(Entry("user", f"› {block.text}"))
        elif isinstance(block, TextBlock):
            out.append(Entry("assistant", block.text))
        elif isinstance(block, ThinkingBlock):
            out.append(Entry("thinking", block.thinking, title="thinking"))
        elif isinstance(block, ToolUseBlock):
            result = results.get(block.id)
            run = runs.get(block.id, {})
            gone = (stripped or block.id in pruned) and block.name != "micro_handoff"
            recall_id = f"{session_id}:{block.id}" if gone else ""
            out.append(tool_entry(block, result.text() if result else "(no result)", bool(result and result.is_error),
                                  run.get("duration_ms", 0), run.get("exit_code"), recall_id))
    return out
