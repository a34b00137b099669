"""Recall: a full-text index of a session's tool calls and results, in rhapsody's state folder.

The index is an sqlite3 FTS5 database `recall/<session>-KEY.recall.sqlite` in the user's state
folder (core/userstate.py; never beside the history, where a cloned project could plant one
that a search would trust), rebuilt from the
history whenever it is missing or older than the history (it stores the history's size in
bytes when it was built, so checking costs a stat, not a read). Ids are permanent: `<session id>:<tool_use id>`. Within the current session only
calls a seam stripped are searched (the rest are still in context); earlier sessions are
searched whole.

A recall id comes from the model, so it is checked, never joined into a path: its session
part must have the session id's shape and name a history file of this project
(`history_of`). In read-only mode the index is built in memory and nothing is written.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import Sequence

import json
import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rhapsody.core.session import records as rec
from rhapsody.core.session.context import Conversation
from rhapsody.core.session.history import private_dir, read_history, sessions
from rhapsody.core.own_files import own_files, read_own
from rhapsody.core.session.messages import Message, TextBlock, ToolResultBlock, ToolUseBlock
from rhapsody.core.session.traffic_digest import cut_of
from rhapsody.core.userstate import keyed_path

NARRATION_TAIL = 300
"""How much of the narration before a call a hit carries: its last characters."""
PAGE = 8000
SESSION_ID = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}")
"""The shape of a session id (`core.session.history.new_session_id`)."""
WORDS, WORDS_TOOL = "words-", "(words)"
"""A message's words in the index: id `<session>:words-<message index>`, its role as the input; no tool
can have that name (the API's tool names are letters, digits, `_` and `-`)."""
NOTE_NAME = re.compile(r"\d{8}-\d{6}-[0-9a-f]{6}[\w.-]*\.md")
SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
CREATE VIRTUAL TABLE calls USING fts5(id UNINDEXED, tool, input, result, narration,
    msg_index UNINDEXED, is_error UNINDEXED, ts UNINDEXED);
"""


@dataclass(frozen=True)
class Hit:
    """One search result."""

    id: str
    tool: str
    snippet: str
    narration: str
    session: str
    ts: float
    verbatim: str = ""
    """The snippet as it was written, without match markers: what a person is shown."""
    column: str = "result"
    """Where the match is: the call's `result` or its `input`."""


def index_path(history: Path) -> Path:
    """Where the index of one history file lives (keyed by its resolved path)."""
    return keyed_path("recall", history, ".recall.sqlite")


def open_index(history: Path, write: bool = True) -> sqlite3.Connection:
    """The index of `history`, rebuilt first when missing or stale (the history grew since); without
    `write` (read-only mode) a missing or stale index is built in memory and nothing touches the disk."""
    size = history.stat().st_size
    path = index_path(history)
    db = _connect(path, write)
    if db is not None and _indexed(db) == size:
        return db
    if db is not None:
        db.close()
    if write:
        private_dir(path.parent)
        path.unlink(missing_ok=True)
    db = sqlite3.connect(path if write else ":memory:")
    db.executescript(SCHEMA)
    rows = list(_rows(history.stem, read_history(history, typed=True).typed))
    db.executemany("INSERT INTO calls VALUES (?,?,?,?,?,?,?,?)", rows)
    db.execute("INSERT INTO meta VALUES ('history_bytes', ?)", (str(size),))
    db.commit()
    if write:
        path.chmod(0o600)
    return db


def _connect(path: Path, write: bool) -> sqlite3.Connection | None:
    if path.is_symlink():
        if not write:
            return None
        path.unlink()  # an index is never opened (and so never written) through a link
    if not path.exists():
        return None
    try:
        db = sqlite3.connect(path) if write else sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
        db.execute("SELECT count(*) FROM calls").fetchone()
        return db
    except sqlite3.DatabaseError:
        return None


def _indexed(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT value FROM meta WHERE key='history_bytes'").fetchone()
    return int(row[0]) if row else -1


def _rows(session: str, records: Sequence[rec.Record]) -> Any:
    messages = [(Message(role=record.role, content=record.content), record.ts) for record in rec.of(records, rec.MessageAdded)]
    for i, (message, ts) in enumerate(messages):
        words = "\n".join(b.text for b in message.content if isinstance(b, TextBlock) and b.text.strip())
        if words:  # found only once the second window shelved them (`search`)
            yield f"{session}:{WORDS}{i}", WORDS_TOOL, message.role, words, "", i, 0, ts
        if message.role != "assistant":
            continue
        results = _results_after(messages, i)
        narration: list[str] = []
        for block in message.content:
            if isinstance(block, TextBlock):
                narration.append(block.text)
            elif isinstance(block, ToolUseBlock):
                result = results.get(block.id)
                yield (
                    f"{session}:{block.id}", block.name, json.dumps(block.input, ensure_ascii=False),
                    result.text() if result else "", "\n".join(narration), i,
                    int(bool(result and result.is_error)), ts,
                )
                narration = []


def _results_after(messages: list[tuple[Message, float]], i: int) -> dict[str, ToolResultBlock]:
    if i + 1 >= len(messages):
        return {}
    return {b.tool_use_id: b for b in messages[i + 1][0].content if isinstance(b, ToolResultBlock)}


def _fts_query(query: str) -> str:
    return " ".join('"' + word.replace('"', '""') + '"' for word in query.split())


def search(history: Path, query: str, limit: int = 10, stripped_only: bool = True, write: bool = True) -> list[Hit]:
    """Calls matching `query`; with stripped_only, only those a seam took out of context."""
    if not query.split():
        return []
    db = open_index(history, write)
    gone = _gone(history) if stripped_only else None
    # The model reads matches marked with brackets; a person reads the same cut unmarked
    # (a marker inside a command would pass for part of it). Unmarked equals marked exactly
    # when the column holds no match.
    sql = (
        "SELECT id, tool, snippet(calls, 3, '[', ']', '…', 16), narration, msg_index, ts, "
        "snippet(calls, 2, '[', ']', '…', 16), snippet(calls, 3, '', '', '…', 16), "
        "snippet(calls, 2, '', '', '…', 16) FROM calls WHERE calls MATCH ? "
        "AND NOT (tool = ? AND msg_index >= ?) ORDER BY rank LIMIT ?"
    )
    hits = []
    # A message's words are recalled only once the second window shelved them: before, they are in context.
    for row in db.execute(sql, (_fts_query(query), WORDS_TOOL, _shelved(history), limit * 4)):
        if row[1] != WORDS_TOOL and gone is not None and row[4] >= gone[0] and row[0].split(":", 1)[1] not in gone[1]:
            continue
        snippet = row[2] if "[" in row[2] else row[6]
        in_result = row[2] != row[7] or row[6] == row[8]
        verbatim, column = (row[7], "result") if in_result else (row[8], "input")
        hits.append(Hit(row[0], row[1], snippet, row[3][-NARRATION_TAIL:], history.stem, row[5], verbatim, column))
    db.close()
    return hits[:limit]


def _gone(history: Path) -> tuple[int, set[str]]:
    """What left the context: messages before the latest seam, calls pruned by the rolling policy, and
    calls of messages a conversation rewind left behind."""
    conv = Conversation.of(read_history(history, typed=True).typed)  # parsed once
    left = {call.id for i in conv.abandoned for call in conv.messages[i].tool_uses()}
    return conv.boundary(), conv.pruned | left


def _shelved(history: Path) -> int:
    """How many messages' words the second window moved out of the context (0: none)."""
    shelf = Conversation.of(read_history(history, typed=True).typed).shelf
    return shelf.boundary if shelf else 0


def search_project(root: Path, current: Path, query: str, limit: int = 10, write: bool = True) -> list[Hit]:
    """Search the current session's stripped calls, every earlier session, and all field notes."""
    hits = search(current, query, limit, write=write)
    for history in sessions(root):
        if history != current:
            hits += search(history, query, limit, stripped_only=False, write=write)
    hits += search_notes(root, query)
    return hits[:limit] if len(hits) <= limit else sorted(hits, key=lambda h: -h.ts)[:limit]


def search_session(root: Path, current: Path, query: str, subagents: set[str], limit: int = 10,
                   write: bool = True) -> list[Hit]:
    """The current session's stripped calls and, whole, those of its sub-agents' sessions (`subagents`: their ids):
    their traffic never was in its context."""
    hits = search(current, query, limit, write=write)
    for history in sessions(root):
        if history.stem in subagents:
            hits += search(history, query, limit, stripped_only=False, write=write)
    return hits[:limit]


def search_notes(root: Path, query: str) -> list[Hit]:
    """Field notes that contain every word of `query` (case-insensitive), newest first."""
    words = [w.lower() for w in query.split()]
    hits = []
    for note in reversed(own_files(root, root / ".rhapsody" / "notes", "*.md")):
        text = read_own(root, note) or ""
        if words and all(w in text.lower() for w in words):
            line = next((l for l in text.splitlines() if words[0] in l.lower()), "")
            session = note.stem.rsplit("-seam", 1)[0]
            cut = line.strip()[:200]
            shown = cut + ("…" if len(line.strip()) > 200 else "")
            hits.append(Hit(f"note:{note.name}", "field note", cut, "", session, note.stat().st_mtime, shown, "line"))
    return hits


class RecallIdError(ValueError):
    """A recall id that is not one: wrong shape, or naming no session of this project."""


def history_of(root: Path, call_id: str) -> Path:
    """The history file a `SESSION:TOOL_USE_ID` id names, found among the project's sessions (never a path
    built from the id); RecallIdError with a one-line reason otherwise."""
    session, colon, call = call_id.partition(":")
    if not colon or not call or not SESSION_ID.fullmatch(session):
        raise RecallIdError(f"not a recall id: {call_id[:80]!r} (the form is SESSION:TOOL_USE_ID, a session "
                            "id such as 20260101-120000-a1b2c3, or note:NAME)")
    found = next((p for p in sessions(root) if p.stem == session), None)
    if found is None:
        raise RecallIdError(f"no session {session} in this project")
    return found


def fetch(root: Path, call_id: str, page: int = 1, write: bool = True) -> str | None:
    """The full call and result (or field note) for a recall id, one page of PAGE characters at a time;
    RecallIdError for an id that is not one."""
    if call_id.startswith("note:"):
        if not NOTE_NAME.fullmatch(call_id[5:]):
            raise RecallIdError(f"not a field note name: {call_id[5:80]!r}")
        text = read_own(root, root / ".rhapsody" / "notes" / call_id[5:])
        return _page(text, page) if text is not None else None
    history = history_of(root, call_id)
    db = open_index(history, write)
    row = db.execute("SELECT tool, input, result, narration, is_error FROM calls WHERE id = ?", (call_id,)).fetchone()
    db.close()
    if row is None:
        return None
    tool, args, result, narration, is_error = row
    if tool == WORDS_TOOL and call_id.split(":", 1)[1].startswith(WORDS):
        return f"{_verify_words(history, call_id, result)}\n{_page(f'{args} words {call_id}:{chr(10)}{result}', page)}"
    check = verify(history, call_id.split(":", 1)[1], args, result)
    full = f"call {call_id}: {tool} {args}\nnarration before it: {narration}\n{'error ' if is_error else ''}result:\n{result}"
    return f"{check}\n{_page(full, page)}"


def verify(history: Path, tool_use_id: str, args: str, result: str) -> str:
    """One line: whether this call is exactly what a seam (or rolling cut) took out of the context."""
    cut = cut_of(read_history(history, typed=True).typed, tool_use_id)
    if cut is None:
        return "not verified: no seam or rolling cut stripped this call (it stayed in its session's context)"
    use, answer = cut.calls[tool_use_id]
    same = json.dumps(use.input, ensure_ascii=False) == args and (answer.text() if answer else "") == result
    if not same:
        return "NOT VERIFIED: the recall index differs from the history for this call"
    return cut.verdict()


def _verify_words(history: Path, words_id: str, text: str) -> str:
    """One line: whether these words are the message's, verbatim, and the second window moved them out."""
    index = int(words_id.rsplit("-", 1)[1]) if words_id.rsplit("-", 1)[1].isdigit() else -1
    conv = Conversation.of(read_history(history, typed=True).typed)
    if not 0 <= index < len(conv.messages):
        return "NOT VERIFIED: no such message in the history"
    same = "\n".join(b.text for b in conv.messages[index].content if isinstance(b, TextBlock) and b.text.strip()) == text
    if not same:
        return "NOT VERIFIED: the recall index differs from the history for these words"
    where = "moved out of the context by the second window" if conv.shelf and index < conv.shelf.boundary else \
        "still in its session's context"
    return f"verified: message {index}'s words, verbatim from the history, {where}"


def _page(full: str, page: int) -> str:
    pages = max(1, -(-len(full) // PAGE))
    page = min(max(page, 1), pages)
    chunk = full[(page - 1) * PAGE : page * PAGE]
    return f"[page {page} of {pages}]\n{chunk}"
