"""The permission question: what the call would do, then allow once, allow for the session, or deny.

Typing never approves. Focus starts in the "tell the agent what to do instead" field and
every key is text for it; Enter answers from what the field holds: a lone `y` allows the
call once, a lone `a` allows the suggested rule for the session, a lone `n` (or nothing)
denies, and anything else denies with those words as the reason the agent reads. So
"add a test first" is a denial with a reason, never an "a". The line under the field says
what Enter will do.

| Key | Action |
| :- | :- |
| y enter | Allow this call once. |
| a enter | Allow the suggested rule for the rest of the session. |
| n enter, enter, escape | Deny. |
| (words) enter | Deny, with the words as the reason. |
| pageup, pagedown, up, down | Scroll the diff or command. |

For the first `GRACE` seconds after the dialog opens it takes no keys: what the human was
typing for the prompt goes on into the prompt (Enter is held back), and the line under
the field says so. A `y` or `a` typed just before the question appeared never answers it.
"""

from __future__ import annotations

from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from rhapsody.core.approval import GRACE
from rhapsody.core.tools import Approval
from rhapsody.preview import Preview

SAID_ROWS = 3
"""Rows of the agent's narration the question shows (its end: the words that led to the call)."""

ANSWERS = {"y": "allow", "a": "allow_rule", "n": "deny", "": "deny"}


class Choice(Static):
    """One clickable answer line."""

    def __init__(self, text: str, action: str) -> None:
        super().__init__(Text(text), classes="choice")
        self.action = action

    def on_click(self) -> None:
        screen = self.screen
        if isinstance(screen, ApprovalScreen) and screen.ready:
            getattr(screen, f"action_{self.action}")()


class ApprovalScreen(ModalScreen[Approval]):
    """Ask whether one tool call may run, showing exactly what it would do."""

    AUTO_FOCUS = None

    BINDINGS = [
        Binding("escape", "deny", "Deny", show=False),
        Binding("pageup", "scroll('page_up')", "Scroll up", show=False),
        Binding("pagedown", "scroll('page_down')", "Scroll down", show=False),
        Binding("up", "scroll('up')", show=False),
        Binding("down", "scroll('down')", show=False),
    ]

    def __init__(self, tool: str, argument: str, why: str, shown: Preview, rules: tuple[str, ...] = (),
                 said: str = "") -> None:
        """`said`: the agent's narration before the call, shown above the question (the dialog hides the
        transcript, and the agent's reason is what the human weighs)."""
        super().__init__()
        self.said = said
        self.tool = tool
        self.argument = argument
        self.why = why
        self.shown = shown
        self.rules = rules
        self.ready = False

    def compose(self) -> ComposeResult:
        with Vertical(id="approval"):
            if self.said:
                yield Static(Text(self.said_text(80)), classes="said")
            yield Static(Text(f"{self.tool} wants to run ({self.why})"), classes="why")
            if self.shown.warning:
                yield Static(Text(self.shown.warning), classes="warning")
            yield Static(Text(self.shown.heading + ":"), classes="heading")
            with VerticalScroll(id="preview", can_focus=False):
                yield Static(self._body(), classes="body")
            yield Choice("y ⏎  allow once", "allow")
            if self.rules:
                yield Choice(f"a ⏎  allow {', '.join(self.rules)} for this session", "allow_rule")
            yield Choice("n ⏎  deny (or esc)", "deny")
            options = "y, a or n" if self.rules else "y or n"  # only the answers offered above
            yield Input(placeholder=f"{options}, or tell the agent what to do instead; then Enter", id="reason",
                        disabled=True)
            yield Static(Text("wait… keys typed now stay in the prompt"), id="enter-does")

    def on_mount(self) -> None:
        self.set_timer(GRACE, self.open)
        self.set_timer(0.05, self.fit_preview)  # once laid out

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit_preview)
        if self.said:
            self.query_one(".said", Static).update(Text(self.said_text(self.size.width)))

    def said_text(self, width: int) -> str:
        """The end of the narration, as much as SAID_ROWS rows of the dialog at this terminal width hold."""
        from rhapsody.tools.handoff import narration_before

        inner = min(width, 120) - 4  # the dialog's border and padding
        return "the agent: " + narration_before(self.said, max(40, SAID_ROWS * inner - len("the agent: ") - 4))

    def fit_preview(self) -> None:
        """The diff or command takes every row the rest of the dialog leaves, so the answers stay in view.

        The rest is measured from the other widgets' own heights, never from the preview's: after the
        terminal shrinks, the preview still holds the old size and its region is clipped, so a sum taken
        from it would leave the answers below the screen's edge."""
        box, view = self.query_one("#approval", Vertical), self.query_one("#preview", VerticalScroll)
        if not box.size.height:
            return
        others = sum(w.outer_size.height + w.styles.margin.top + w.styles.margin.bottom
                     for w in box.children if w is not view and w.display)
        chrome = box.outer_size.height - box.size.height  # the border and padding
        rows = max(3, self.size.height - others - chrome - view.styles.margin.bottom)
        if view.styles.max_height is None or view.styles.max_height.value != rows:
            view.styles.max_height = rows

    def open(self) -> None:
        """The grace period is over: the field takes keys."""
        self.ready = True
        self.fit_preview()
        field = self.query_one("#reason", Input)
        field.disabled = False
        field.focus()
        self.query_one("#enter-does", Static).update(Text(self.enter_does(field.value)))

    def on_key(self, event: events.Key) -> None:
        """During the grace period keys go on into the prompt and never answer."""
        if self.ready:
            return
        event.stop()
        event.prevent_default()
        if event.is_printable and event.character:
            from rhapsody.tui.prompt import PromptInput

            for prompt in self.app.screen_stack[0].query(PromptInput):
                prompt.insert(event.character)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """No answer is taken during the grace period."""
        return self.ready or action == "scroll"

    def _body(self) -> Syntax | Text:
        if self.shown.syntax == "diff":
            return diff_text(self.shown.body)
        if self.shown.syntax:
            return Syntax(self.shown.body, self.shown.syntax, theme="github-dark", word_wrap=True,
                          background_color="default")
        return Text(self.shown.body)

    def answer_for(self, typed: str) -> str:
        """The action Enter takes for what the field holds."""
        action = ANSWERS.get(typed.strip().lower(), "deny")
        return "deny" if action == "allow_rule" and not self.rules else action

    def enter_does(self, typed: str) -> str:
        """What Enter will do, said under the field."""
        action = self.answer_for(typed)
        if action == "allow":
            return "Enter: allow this call once"
        if action == "allow_rule":
            return f"Enter: allow {', '.join(self.rules)} for this session"
        return "Enter: deny, and the agent reads your words" if typed.strip() and typed.strip().lower() != "n" else "Enter: deny"

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#enter-does", Static).update(Text(self.enter_does(event.value)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        action = self.answer_for(event.value)
        if action != "deny":
            getattr(self, f"action_{action}")()
        elif event.value.strip().lower() == "n":
            self.dismiss(Approval(False))
        else:
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


DIFF_STYLES = (("+++", "bold #e6edf3"), ("---", "bold #e6edf3"), ("@@", "#79c0ff"), ("+", "#7ee787"),
               ("-", "#ff7b72"))
"""Colours with at least 4.5:1 contrast on the dialog's background."""


def diff_text(diff: str) -> Text:
    """A unified diff, coloured line by line."""
    text = Text()
    for line in diff.splitlines(keepends=True):
        style = next((s for prefix, s in DIFF_STYLES if line.startswith(prefix)), "")
        text.append(line, style=style)
    return text


def question(tool: str, argument: str, why: str, args: dict[str, object], root: Path,
             rules: tuple[str, ...] = (), said: str = "", hidden: tuple[str, ...] = ()) -> ApprovalScreen:
    """The dialog for one call; `rules` are the session rules offered under "a" (none: no "a"); `said`
    is the agent's narration before the call (its end, when long); files `hidden` rules name are not shown."""
    from rhapsody.preview import preview

    return ApprovalScreen(tool, argument, why, preview(tool, dict(args), root, hidden), rules, said)
