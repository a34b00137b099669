"""A yes/no question about something the human asked for: the figures, then y or n.

Used when ctrl+o or `/handoff` would make a seam that does not pay (the note would add more
than the strip takes): the human sees the figures and decides. Only `y` says yes; every
other way out (n, Enter, Escape) leaves things as they are.

| Key | Action |
| :- | :- |
| y | Yes. |
| n enter escape | No. |
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from rhapsody.view.sink import visible


class ConfirmScreen(ModalScreen[bool]):
    """Show `text` and ask `question`; dismissed with True only on y."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("enter", "answer(False)", "No", show=False),
        Binding("escape", "answer(False)", "No", show=False),
    ]

    def __init__(self, text: str, question: str) -> None:
        super().__init__()
        self.text = text
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Static(Text(visible(self.text)))
            yield Static(Text(f"{self.question}  y yes · n, Enter or Esc no"), classes="why")

    def action_answer(self, yes: bool) -> None:
        """Close with the answer."""
        self.dismiss(yes)
