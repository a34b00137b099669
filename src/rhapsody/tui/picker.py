"""The session picker for `rhapsody --resume` without an id: date, first request, size."""

from __future__ import annotations

import json
import time
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widgets import Footer, OptionList
from textual.widgets.option_list import Option

from rhapsody.core.history import has_turns, sessions


def describe(path: Path) -> str:
    """One line for a session: date, first request, size."""
    first = ""
    with path.open("rb") as f:
        for raw in f:
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if record.get("kind") == "message" and record.get("role") == "user":
                texts = [b.get("text", "") for b in record.get("content", []) if isinstance(b, dict)]
                first = " ".join(" ".join(texts).split())[:60]
                break
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
    return f"{when}  {path.stat().st_size / 1024:>7.1f} KB  {first or '(no request yet)'}"


class SessionPicker(App[str | None]):
    """Pick one of the project's sessions, newest first."""

    BINDINGS = [("escape", "cancel", "Cancel")]

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.paths = [p for p in reversed(list(sessions(root))) if has_turns(p)]  # an empty session is nothing to resume

    def compose(self) -> ComposeResult:
        yield OptionList(*[Option(describe(p), id=p.stem) for p in self.paths])
        yield Footer()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.exit(event.option.id)

    def action_cancel(self) -> None:
        self.exit(None)


def pick_session(root: Path) -> str | None:
    """Run the picker; None when cancelled."""
    from rhapsody.core.errors import HistoryError

    if not any(has_turns(p) for p in sessions(root)):
        raise HistoryError(f"no sessions with a turn to resume in {root}")
    return SessionPicker(root).run()
