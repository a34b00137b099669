"""The plan `exit_plan` proposes, for the human to approve, edit or reject.

The plan opens in an editable text area, prefilled: what the human leaves there when they approve is
the plan the agent gets (ctrl+g edits it in $VISUAL or $EDITOR instead, as the prompt does). A reason
typed in the line below goes to the agent, in the human's own words, with a rejection.

| Key | Action |
| :- | :- |
| ctrl+s | Approve the plan as it stands; the work goes on in auto-edit |
| ctrl+r | Approve the plan as it stands; the work goes on in ask (each write asked) |
| ctrl+g | Edit the plan in $VISUAL or $EDITOR |
| tab | Move between the plan and the reason |
| enter (in the reason) | Reject with the reason typed |
| escape | Reject (with the reason typed, if any) |
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static, TextArea

from rhapsody.core.toolbox.protocol import PlanReview

KEYS = "ctrl+s approve → auto-edit · ctrl+r approve → ask · ctrl+g $EDITOR · Esc or Enter below: reject"


class PlanScreen(ModalScreen[PlanReview]):
    """The proposed plan, editable; dismissed with the human's review."""

    AUTO_FOCUS = "#plan-text"

    BINDINGS = [
        Binding("ctrl+s", "approve('auto-edit')", "Approve, auto-edit", priority=True),
        Binding("ctrl+r", "approve('ask')", "Approve, ask", priority=True),
        Binding("ctrl+g", "editor", "$EDITOR", priority=True),
        Binding("escape", "reject", "Reject", priority=True),
    ]

    def __init__(self, plan: str) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        with Vertical(id="plan-review"):
            yield Static(Text("The agent proposes this plan (edit it here before approving):"), classes="why")
            yield TextArea(self.plan, id="plan-text", soft_wrap=True, show_line_numbers=False)
            yield Input(placeholder="reason to reject (Enter rejects)", id="plan-reason")
            yield Static(Text(KEYS), classes="keys")

    def action_approve(self, mode: str) -> None:
        """Approve the plan as the text area holds it."""
        text = self.query_one("#plan-text", TextArea).text
        self.dismiss(PlanReview(True, plan=text, mode="ask" if mode == "ask" else "auto-edit"))

    def action_reject(self) -> None:
        """Reject, with whatever reason is typed."""
        self.dismiss(PlanReview(False, reason=self.query_one("#plan-reason", Input).value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_reject()

    def action_editor(self) -> None:
        """ctrl+g: the plan in $VISUAL or $EDITOR; what the editor saves replaces it."""
        from rhapsody.frontends.app.editor import edit_in_editor

        area = self.query_one("#plan-text", TextArea)
        try:
            area.text = edit_in_editor(self.app, area.text)
        except OSError as exc:
            self.notify(f"the editor did not start: {exc}", severity="error", timeout=4)
