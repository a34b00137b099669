"""The permission question: what the call would do, then allow once, allow for the session, or deny.

Typing never approves. Focus starts in the "tell the agent what to do instead" field; a
lone `y`, `a` or `n` typed into the empty field answers, and any other key is text for the
field, so a word such as "instead" stays a word. Enter denies with the typed text as the
reason the agent reads.

| Key | Action |
| :- | :- |
| y | Allow this call once (only as the first key in the empty field). |
| a | Allow the suggested rule for the rest of the session (same). |
| n, escape | Deny. |
| enter | Deny, with the typed text as the reason. |
| pageup, pagedown, up, down | Scroll the diff or command. |
"""

from __future__ import annotations

from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from rhapsody.core.permissions import suggested_rules
from rhapsody.core.tools import Approval
from rhapsody.preview import Preview

HOTKEYS = ("y", "a", "n")


class ReasonInput(Input):
    """The reason field: a lone hotkey in the empty field answers; everything else is text."""

    class Hotkey(Message):
        """A lone y, a or n typed into the empty field."""

        def __init__(self, key: str) -> None:
            self.key = key
            super().__init__()

    async def _on_key(self, event: events.Key) -> None:
        if not self.value and event.character in HOTKEYS:
            event.stop()
            event.prevent_default()
            self.post_message(self.Hotkey(event.character or ""))
            return
        await super()._on_key(event)


class Choice(Static):
    """One clickable answer line."""

    def __init__(self, text: str, action: str) -> None:
        super().__init__(Text(text), classes="choice")
        self.action = action

    def on_click(self) -> None:
        screen = self.screen
        if isinstance(screen, ApprovalScreen):
            getattr(screen, f"action_{self.action}")()


class ApprovalScreen(ModalScreen[Approval]):
    """Ask whether one tool call may run, showing exactly what it would do."""

    AUTO_FOCUS = "#reason"

    BINDINGS = [
        Binding("escape", "deny", "Deny", show=False),
        Binding("pageup", "scroll('page_up')", "Scroll up", show=False),
        Binding("pagedown", "scroll('page_down')", "Scroll down", show=False),
        Binding("up", "scroll('up')", show=False),
        Binding("down", "scroll('down')", show=False),
    ]

    def __init__(self, tool: str, argument: str, why: str, shown: Preview) -> None:
        super().__init__()
        self.tool = tool
        self.argument = argument
        self.why = why
        self.shown = shown
        self.rules = suggested_rules(tool, argument)

    def compose(self) -> ComposeResult:
        with Vertical(id="approval"):
            yield Static(Text(f"{self.tool} wants to run ({self.why})"), classes="why")
            if self.shown.warning:
                yield Static(Text(self.shown.warning), classes="warning")
            yield Static(Text(self.shown.heading + ":"), classes="heading")
            with VerticalScroll(id="preview", can_focus=False):
                yield Static(self._body(), classes="body")
            yield Choice("y  allow once", "allow")
            if self.rules:
                yield Choice(f"a  allow {', '.join(self.rules)} for this session", "allow_rule")
            yield Choice("n  deny (esc)", "deny")
            yield ReasonInput(placeholder="or tell the agent what to do instead, then Enter (denies)", id="reason")

    def _body(self) -> Syntax | Text:
        if self.shown.syntax:
            return Syntax(self.shown.body, self.shown.syntax, theme="ansi_dark", word_wrap=True,
                          background_color="default")
        return Text(self.shown.body)

    def on_reason_input_hotkey(self, message: ReasonInput.Hotkey) -> None:
        action = {"y": "allow", "a": "allow_rule", "n": "deny"}[message.key]
        if action == "allow_rule" and not self.rules:
            return
        getattr(self, f"action_{action}")()

    def on_input_submitted(self) -> None:
        self.action_deny()

    def action_scroll(self, how: str) -> None:
        """Scroll the preview."""
        view = self.query_one("#preview", VerticalScroll)
        getattr(view, f"scroll_{how}")(animate=False)

    def action_allow(self) -> None:
        """Allow once."""
        self.dismiss(Approval(True))

    def action_allow_rule(self) -> None:
        """Allow the suggested rule for the session."""
        self.dismiss(Approval(True, remember=self.rules))

    def action_deny(self) -> None:
        """Deny; the typed words reach the agent as the human's own message."""
        self.dismiss(Approval(False, words=self.query_one("#reason", Input).value))


def question(tool: str, argument: str, why: str, args: dict[str, object], root: Path) -> ApprovalScreen:
    """The dialog for one call."""
    from rhapsody.preview import preview

    return ApprovalScreen(tool, argument, why, preview(tool, dict(args), root))
