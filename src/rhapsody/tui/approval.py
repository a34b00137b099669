"""The permission question: allow once, allow a prefix for the session, or deny with a reason.

| Key | Action |
| :- | :- |
| y | Allow this call once. |
| a | Allow the suggested rule for the rest of the session. |
| n | Deny; the reason typed (if any) goes back to the agent. |
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.content import Content
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from rhapsody.core.permissions import suggested_rules
from rhapsody.core.tools import Approval


class ApprovalScreen(ModalScreen[Approval]):
    """Ask whether one tool call may run; focus starts on "Allow once", so y/a/n act at once."""

    AUTO_FOCUS = "#allow"

    BINDINGS = [
        Binding("y", "allow", "Allow once"),
        Binding("a", "allow_rule", "Allow for session"),
        Binding("n", "deny", "Deny"),
        Binding("escape", "deny", "Deny", show=False),
    ]

    def __init__(self, tool: str, argument: str, why: str) -> None:
        super().__init__()
        self.tool = tool
        self.argument = argument
        self.why = why
        self.rules = suggested_rules(tool, argument)

    def compose(self) -> ComposeResult:
        with Vertical(id="approval"):
            yield Static(f"{self.tool} wants to run ({self.why}):", classes="why")
            yield Static(self.argument, markup=False, classes="argument")
            yield Input(placeholder="reason for a denial (optional; the agent reads it)", id="reason")
            with Horizontal():
                yield Button("Allow once (y)", id="allow", variant="success")
                yield Button(Content(f"Allow {', '.join(self.rules)} for the session (a)"), id="allow_rule")
                yield Button("Deny (n)", id="deny", variant="error")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        getattr(self, f"action_{event.button.id}")()

    def on_input_submitted(self) -> None:
        self.action_deny()

    def action_allow(self) -> None:
        """Allow once."""
        self.dismiss(Approval(True))

    def action_allow_rule(self) -> None:
        """Allow the suggested rule for the session."""
        self.dismiss(Approval(True, remember=self.rules))

    def action_deny(self) -> None:
        """Deny, with the typed reason."""
        self.dismiss(Approval(False, words=self.query_one("#reason", Input).value))
