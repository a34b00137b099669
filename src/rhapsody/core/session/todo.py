"""The agent's todo list: the fold of its `todo` records, rewound with the conversation.

Each `todo_write` call states the whole list, so the list now is the last `todo` record the
view still holds: a rewind to before the message that wrote one takes it back (`rewind`).

Imports: stdlib, pydantic and rhapsody.core only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rhapsody.core.session import records as rec

MARKS = {"done": "[x]", "in_progress": "[>]", "pending": "[ ]"}
"""How each state is drawn, in every front end and export."""


@dataclass
class TodoList:
    """Every list written, each with the conversation's length when it was; the last is the list now."""

    written: list[tuple[int, list[rec.TodoItem]]] = field(default_factory=list)

    def add(self, record: rec.Todo) -> None:
        """A list written."""
        self.written.append((record.at, list(record.items)))

    def rewind(self, to: int) -> None:
        """The conversation went back to before message `to`: lists written after it leave."""
        self.written = [(at, items) for at, items in self.written if at <= to]

    def items(self) -> list[rec.TodoItem]:
        """The list now (empty: none written, or the last one emptied)."""
        return list(self.written[-1][1]) if self.written else []


def lines(items: list[rec.TodoItem] | tuple[rec.TodoItem, ...]) -> list[str]:
    """The list as one line per item: `[x] done`, `[>] in progress`, `[ ] pending`."""
    return [f"{MARKS[i.status]} {i.content}" for i in items]


def done(items: list[rec.TodoItem] | tuple[rec.TodoItem, ...]) -> int:
    """How many items are done."""
    return sum(1 for i in items if i.status == "done")


def summary(items: list[rec.TodoItem] | tuple[rec.TodoItem, ...]) -> str:
    """`todo 2/5 done` (or `todo list empty`)."""
    return f"todo {done(items)}/{len(items)} done" if items else "todo list empty"


def from_imported(arguments: Any) -> list[rec.TodoItem] | None:
    """The list an imported call states: Claude Code's TodoWrite (`todos`: content, status) or Codex's
    update_plan (`plan`: step, status); None when the arguments hold no list."""
    if not isinstance(arguments, dict):
        return None
    raw = arguments.get("todos") if isinstance(arguments.get("todos"), list) else arguments.get("plan")
    if not isinstance(raw, list):
        return None
    items = []
    for entry in raw:
        if not isinstance(entry, dict):
            continue
        text = entry.get("content") or entry.get("step") or entry.get("activeForm")
        state = {"completed": "done", "done": "done", "in_progress": "in_progress"}.get(str(entry.get("status")),
                                                                                       "pending")
        if isinstance(text, str) and text.strip():
            items.append(rec.TodoItem(content=text.strip(), status=state))  # type: ignore[arg-type]
    return items
