"""The permission question, docked above the prompt: what the call would do, then allow once, allow for
the session, or deny. The transcript stays in view above it (scroll it with the mouse or PageUp/PageDown
while the diff fits), and the status bar below.

The answers are numbered as Claude Code numbers them, and the one Enter would give is highlighted:
on the empty field that is 1, allow once. Once open, the focus is in the "tell the agent what to do
instead" field and every key is text for it, except a digit typed into the empty field, which picks
the answer numbered so at once (`1` allows once; the session rule, when offered, is 2, deny the last).
Enter answers from what the field holds: nothing or a lone digit as above, a lone `y` allows the call
once, a lone `a` allows the suggested rule for the session, a lone `n` denies, and anything else denies
with those words as the reason the agent reads. So "add a test first" is a denial with a reason, never
an "a", and `1` is never a reason. The line under the field says what Enter will do. A line that is a
slash command (`/handoff`) runs as the command and the question stays open; ctrl+n queues the field's
words as a message for the end of the turn, as it does in the prompt.

| Key | Action |
| :- | :- |
| enter (empty field), 1, y enter | Allow this call once. |
| 2 (when a rule is offered), a enter | Allow the suggested rule for the rest of the session. |
| the last number, n enter, escape | Deny. |
| (words) enter | Deny, with the words as the reason. |
| /command enter | Run the command; the question stays. |
| ctrl+n | Queue the field's words for the end of the turn. |
| up, down | Scroll the diff or command. |
| pageup, pagedown | Scroll the diff or command when it is longer than its box, else the transcript. |

The answer leaves the panel as a typed message, `ApprovalPanel.Answered`, which the app turns into the
`ApprovalAnswer` operation it submits; the panel knows nothing of the agent.

For the first `GRACE` seconds after the question opens it takes no answer: the keys typed then
(a `y` meant for the prompt, an Enter) are discarded and the line under the field shows them, so
nothing lands unseen in the prompt or the answer; ctrl+n then still queues the prompt's draft.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.syntax import Syntax
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Static

from rhapsody.core.toolbox.approval import Grace, Reply, approval_for, choices, picked, reply_to, wait_grace
from rhapsody.core.toolbox.approval import Approval
from rhapsody.frontends.app.diff_style import diff_text
from rhapsody.frontends.preview import Preview
from rhapsody.view.sink import visible

KEEP_ROWS = 10
"""Rows the panel leaves to the rest of the screen: the prompt, status bar, footer and a few of the transcript."""

PANEL_SHARE = 0.6
"""The most of the screen's height the panel takes on a tall terminal."""


CHOICES: dict[Reply, str] = {"allow": "allow once · y", "allow_rule": "allow {rules} for this session · a",
                             "deny": "deny · n or esc", "words": ""}
"""Each answer's line, after its number."""


class Choice(Static):
    """One clickable answer line, numbered; the one Enter would give is highlighted."""

    def __init__(self, number: int, action: Reply, rules: tuple[str, ...]) -> None:
        self.label = visible(f"{number}. " + CHOICES[action].format(rules=", ".join(rules)))
        super().__init__(Text("  " + self.label), classes="choice")
        self.action = action

    def mark(self, on: bool) -> None:
        """Highlight this line as the answer Enter gives (or not)."""
        self.set_class(on, "-enter")
        self.update(Text(("❯ " if on else "  ") + self.label))

    def on_click(self) -> None:
        panel = next((a for a in self.ancestors if isinstance(a, ApprovalPanel)), None)
        if panel is not None and panel.ready:
            getattr(panel, f"action_{self.action}")()


def _cap(widget: Widget, rows: int) -> None:
    """At most `rows` tall (a style set again only when it changes: each setting lays the screen out anew)."""
    if widget.styles.max_height is None or widget.styles.max_height.value != rows:
        widget.styles.max_height = rows


class ApprovalPanel(Vertical, can_focus=True):
    """Ask whether one tool call may run, showing exactly what it would do, docked above the prompt."""

    BINDINGS = [
        Binding("escape", "deny", "Deny"),
        Binding("ctrl+n", "queue", "Queue", show=False),
        Binding("pageup", "page(-1)", "Scroll", show=False),
        Binding("pagedown", "page(1)", "Scroll", show=False),
        Binding("up", "scroll('up')", show=False),
        Binding("down", "scroll('down')", show=False),
    ]

    class Answered(Message):
        """The human answered the question `question_id` (posted once)."""

        def __init__(self, question_id: str, approval: Approval) -> None:
            self.question_id = question_id
            self.approval = approval
            super().__init__()

    def __init__(self, tool: str, argument: str, why: str, shown: Preview, rules: tuple[str, ...] = (),
                 grace: Grace = wait_grace, question_id: str = "") -> None:
        super().__init__(id="approval")
        self.question_id = question_id
        self.grace = grace
        self._opening: asyncio.Task[None] | None = None
        self.tool = tool
        self.argument = argument
        self.why = why
        self.shown = shown
        self.rules = rules
        self.ready = False
        self.discarded = ""
        """What was typed during the grace period: shown, never used."""
        self.typed = ""
        """The field's value before its latest change: a digit picks only when typed into the empty field."""
        self.answered = False
        """The answer was given: a second one (a click after a key) is not sent."""
        self.taken = False
        """The panel is being taken away: the question is over."""

    def compose(self) -> ComposeResult:
        yield Static(Text(visible(f"{self.tool} wants to run ({self.why})")), classes="why")  # a host, a path
        if self.shown.warning:
            yield Static(Text(visible(self.shown.warning)), classes="warning")
        yield Static(Text(visible(self.shown.heading) + ":"), classes="heading")
        with VerticalScroll(id="preview", can_focus=False):
            yield Static(self._body(), classes="body")
        for number, reply in enumerate(choices(self.rules), 1):
            yield Choice(number, reply, self.rules)
        numbers = "1, 2 or 3" if self.rules else "1 or 2"  # only the answers offered above
        yield Input(placeholder=f"{numbers}, or tell the agent what to do instead; then Enter", id="reason",
                    disabled=True)
        yield Static(Text("wait… keys typed now answer nothing"), id="enter-does")

    def on_mount(self) -> None:
        # keys typed from now on are the question's: held during the grace period, then the field's (both set at
        # once, never queued behind the keys)
        self.screen.set_focus(self)
        self._opening = asyncio.create_task(self._open_after_grace())
        _cap(self, self._room())  # from the first frame: the preview is fitted once laid out
        self.set_timer(0.05, self.fit_preview)

    def on_unmount(self) -> None:
        if self._opening is not None:
            self._opening.cancel()

    async def _open_after_grace(self) -> None:
        await self.grace()
        if self.query("#reason"):  # none: the panel is being taken away
            self.open()

    def on_resize(self) -> None:
        self.call_after_refresh(self.fit_preview)

    def fit_preview(self) -> None:
        """The diff or command takes the rows the rest of the panel leaves, within the panel's share of the screen.

        The rest is measured from the other widgets' own heights, never from the preview's: after the
        terminal shrinks, the preview still holds the old size."""
        view = next(iter(self.query("#preview").results(VerticalScroll)), None)
        if view is None or not self.size.height:  # None: the panel is being taken away
            return
        room = self._room()
        _cap(self, room)
        others = sum(w.outer_size.height + w.styles.margin.top + w.styles.margin.bottom
                     for w in self.children if w is not view and w.display)
        chrome = self.outer_size.height - self.size.height  # the border and padding
        _cap(view, max(3, room - others - chrome - view.styles.margin.bottom))

    def _room(self) -> int:
        """The rows the panel may take on this screen."""
        height = self.app.size.height
        return max(8, min(height - KEEP_ROWS, int(height * PANEL_SHARE)))

    def open(self) -> None:
        """The grace period is over: the field takes keys."""
        self.ready = True
        self.fit_preview()
        field = self.query_one("#reason", Input)
        field.disabled = False
        self.screen.set_focus(field)
        self.say(self.enter_does(field.value))
        self.highlight(field.value)

    def highlight(self, typed: str) -> None:
        """Highlight the answer Enter would give for what the field holds (words deny)."""
        reply = reply_to(typed, self.rules)
        for choice in self.query(Choice):
            choice.mark(choice.action == ("deny" if reply == "words" else reply))

    def say(self, text: str) -> None:
        """The line under the field: what Enter does, and what was discarded."""
        shown = f"discarded as it opened: {self.discarded!r} · " if self.discarded else ""
        self.query_one("#enter-does", Static).update(Text(shown + text))

    def on_key(self, event: events.Key) -> None:
        """During the grace period a typed key or Enter answers nothing; it is discarded and shown."""
        if self.ready or event.key not in ("enter", "space", "backspace", "tab") and not event.is_printable:
            return
        event.stop()
        event.prevent_default()
        self.discarded += "⏎" if event.key == "enter" else (event.character or "")
        self.say("wait… keys typed now answer nothing")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """No answer is taken during the grace period."""
        return self.ready or action in ("scroll", "page", "queue")

    def _body(self) -> Syntax | Text:
        if self.shown.syntax == "diff":  # the heading names the file: its ---/+++ lines would take two rows
            return diff_text(self.shown.body, headers=False)
        if self.shown.syntax:
            return Syntax(self.shown.body, self.shown.syntax, theme="github-dark", word_wrap=True,
                          background_color="default")
        return Text(self.shown.body)

    def enter_does(self, typed: str) -> str:
        """What Enter will do, said under the field."""
        from rhapsody.commands.slash import is_command

        if is_command(typed):
            return "Enter: run the command (the question stays)"
        if not typed.strip():
            return "Enter: allow this call once (the highlighted 1); a digit picks at once"
        return ENTER_DOES[reply_to(typed, self.rules)].format(rules=", ".join(self.rules))

    def on_input_changed(self, event: Input.Changed) -> None:
        before, self.typed = self.typed, event.value
        if self.ready and not before and picked(event.value, self.rules):  # `1` alone, as numbered on screen
            self.dismiss(approval_for(event.value, self.rules))
            return
        self.say(self.enter_does(event.value))
        self.highlight(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        from rhapsody.commands.slash import is_command

        event.stop()
        if is_command(event.value):
            self.send(event.value, queue=False)
            return
        self.dismiss(approval_for(event.value, self.rules))

    def send(self, text: str, queue: bool) -> None:
        """Hand the field's words to the app as if sent from the prompt; the field empties."""
        from rhapsody.frontends.app.prompt import PromptInput

        field = self.query_one("#reason", Input)
        field.value = ""
        self.post_message(PromptInput.Submitted(text.strip(), queue=queue))

    def action_queue(self) -> None:
        """ctrl+n: the field's words are queued for the end of the turn (during the grace period, the prompt's)."""
        from rhapsody.frontends.app.prompt import PromptInput

        field = self.query_one("#reason", Input)
        if self.ready and field.value.strip():
            self.send(field.value, queue=True)
        else:
            self.app.query_one(PromptInput).send(queue=True)

    def action_scroll(self, how: str) -> None:
        """Scroll the preview."""
        view = self.query_one("#preview", VerticalScroll)
        getattr(view, f"scroll_{how}")(animate=False)

    def action_page(self, by: int) -> None:
        """Page the preview when it is longer than its box, else the transcript above."""
        view = self.query_one("#preview", VerticalScroll)
        if view.max_scroll_y <= 0:
            from rhapsody.frontends.app.transcript import TranscriptView

            view = self.app.query_one(TranscriptView)
        (view.scroll_page_up if by < 0 else view.scroll_page_down)(animate=False)

    def dismiss(self, approval: Approval) -> None:
        """Answer once; the app takes the panel away."""
        if not self.answered:
            self.answered = True
            self.post_message(self.Answered(self.question_id, approval))

    async def take_away(self) -> bool:
        """The question is over: the panel goes; whether it held the focus (which then goes back to the prompt)."""
        self.taken = True
        focused = self.has_focus or self.has_focus_within
        await self.remove()
        return focused

    def action_allow(self) -> None:
        """Allow once."""
        self.dismiss(Approval(True))

    def action_allow_rule(self) -> None:
        """Allow the suggested rule for the session."""
        self.dismiss(Approval(True, remember=self.rules))

    def action_deny(self) -> None:
        """Deny; the typed words reach the agent as the human's own message."""
        self.dismiss(Approval(False, words=self.query_one("#reason", Input).value))


ENTER_DOES: dict[Reply, str] = {
    "allow": "Enter: allow this call once", "allow_rule": "Enter: allow {rules} for this session",
    "deny": "Enter: deny", "words": "Enter: deny, and the agent reads your words"}
"""The line under the field for each reply Enter would give."""


def question(tool: str, argument: str, why: str, args: dict[str, object], root: Path,
             rules: tuple[str, ...] = (), hidden: tuple[str, ...] = (), grace: Grace = wait_grace,
             question_id: str = "") -> ApprovalPanel:
    """The panel for one call; `rules` are the session rules offered under "a" (none: no "a"); files
    `hidden` rules name are not shown; `grace` waits out its grace period; `question_id` names the question
    in the answer."""
    from rhapsody.frontends.preview import preview

    return ApprovalPanel(tool, argument, why, preview(tool, dict(args), root, hidden), rules, grace, question_id)
