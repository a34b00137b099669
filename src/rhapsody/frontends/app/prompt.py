"""The prompt: multi-line input that stays live while the agent works.

| Key | Action |
| :- | :- |
| enter | Send (a hint while the agent works, a new turn while idle). |
| ctrl+n | Queue for the end of the turn instead of steering now. |
| ctrl+j, \\ enter | New line (a `\\` at the end of the line before Enter is taken away). |
| ctrl+r | Search the input history, newest first (again: older); Enter keeps the match to edit, Esc goes back. |
| tab | Complete a `/command` or an `@path`. |
| up, down | Walk the project's input history (on the first or last line). |
| pageup, pagedown | Scroll the transcript. |
| home, end | Scroll the transcript to the top or bottom when the prompt is empty. |
| ctrl+home, ctrl+end | Scroll the transcript to the top or bottom. |

The app's keys that act on the prompt (escape twice, ctrl+c twice, ctrl+g) are bound app-wide, so they work
wherever the focus is, and done here: the prompt keeps when each was last pressed, and asks the app by a message
for what is the app's to do (rewind, quit).
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.text import Text
from textual import events
from textual.notifications import SeverityLevel
from textual.message import Message
from textual.containers import VerticalScroll
from textual.widgets import Static, TextArea

from rhapsody.frontends.prompt_aids import (HistorySearch, InputHistory, at_token, command_matches, command_names,
                                            fuzzy, project_files)

from rhapsody.view.sink import visible

SCROLLS = {"pageup": "page_up", "pagedown": "page_down", "ctrl+home": "home", "ctrl+end": "end"}

ESC_TWICE = 0.8
"""Seconds within which a second Esc clears the input."""

CTRL_C_TWICE = 2.0
"""Seconds within which a second ctrl+c on an empty prompt quits."""


class PromptInput(TextArea):
    """The input line; see the module's key table."""

    class Submitted(Message):
        """The human sent the text; `queue` asks for end-of-turn delivery."""

        def __init__(self, text: str, queue: bool) -> None:
            self.text = text
            self.queue = queue
            super().__init__()

    class Rewind(Message):
        """Esc twice on an empty prompt: go back to an earlier message (as `/rewind`)."""

    class Quit(Message):
        """ctrl+c twice on an empty prompt: leave rhapsody."""

    esc_at = 0.0
    """When Esc was last pressed while idle (a second one soon after clears the prompt)."""

    ctrl_c_at = 0.0
    """When ctrl+c was last pressed on the empty prompt (a second one soon after quits)."""

    inputs: InputHistory | None = None
    files: list[str] | None = None
    root: Path | None = None
    names: list[str] | None = None
    """The commands `/` completes to, read at the input's first `/` and dropped when it is sent or cleared:
    the custom command files are read once an input, not on every key, and one added before the next input is offered."""

    search: HistorySearch | None = None
    """The ctrl+r search under way, if any."""

    async def _on_key(self, event: events.Key) -> None:
        handled = (self._search(event) or self._send(event.key) or self._scroll(event.key) or self._walk(event.key)
                   or self._complete(event.key))
        if handled:
            event.stop()
            event.prevent_default()
            return
        await super()._on_key(event)

    def _send(self, key: str) -> bool:
        if key == "ctrl+j":
            self.insert("\n")
            return True
        if key not in ("enter", "ctrl+n"):
            return False
        row, column = self.cursor_location
        if key == "enter" and column and self.document.get_line(row)[column - 1] == "\\":  # `\` Enter: a new line
            self.delete((row, column - 1), (row, column))
            self.insert("\n")
            return True
        self.send(queue=key == "ctrl+n")
        return True

    def send(self, queue: bool) -> None:
        """Send what the prompt holds (`queue`: for the end of the turn); nothing when it is empty."""
        text = self.text.strip()
        if text:
            self.names = None
            self.clear()
            if self.inputs is not None:
                self.inputs.add(text)
            self.post_message(self.Submitted(text, queue=queue))

    def set_aside(self) -> str:
        """Clear the draft; Up brings it back. Returns what it held."""
        text = self.text
        if self.inputs is not None:
            self.inputs.keep(text)
        self.names = None
        self.clear()
        return text

    def _search(self, event: events.Key) -> bool:
        """ctrl+r starts or steps a history search; while one runs, typed keys are its query."""
        if self.search is None:
            if event.key != "ctrl+r" or self.inputs is None:
                return False
            self.search = HistorySearch(self.inputs.lines, self.text)
            self._show(self.search.type(""))
            return True
        search = self.search
        if event.key == "ctrl+r":
            self._show(search.older())
        elif event.key == "backspace":
            self._show(search.type(search.query[:-1]))
        elif event.is_printable and event.character:
            self._show(search.type(search.query + event.character))
        else:
            self.end_search(keep=event.key not in ("escape", "ctrl+g"))
            return event.key in ("enter", "escape", "ctrl+g")  # other keys act on the line kept
        return True

    def _show(self, line: str) -> None:
        self.text = line
        self.move_cursor(self.document.end)
        self.border_title = self.search.title() if self.search else None

    def end_search(self, keep: bool) -> None:
        """Leave the search with its match in the prompt (`keep`), or with the draft it started from."""
        search, self.search = self.search, None
        if search is not None:
            self._show(search.match() if keep else search.draft)

    def _scroll(self, key: str) -> bool:
        if key in ("home", "end") and self.text:  # at once, not as a binding: a key queued behind it stays behind it
            self.action_cursor_line_start() if key == "home" else self.action_cursor_line_end()
            return True
        how = SCROLLS.get(key) or ({"home": "home", "end": "end"}.get(key) if not self.text else None)
        if how is None:
            return False
        # by its id, not its class: widgets.py holds the transcript and imports this module
        getattr(self.app.query_one("#transcript", VerticalScroll), f"scroll_{how}")(animate=False)
        return True

    def _walk(self, key: str) -> bool:
        if self.inputs is None or key not in ("up", "down"):
            return False
        row = self.cursor_location[0]
        if key == "up" and row == 0:
            line = self.inputs.back(self.text)
        elif key == "down" and row == self.document.line_count - 1:
            line = self.inputs.forward()
        else:
            return False
        if line is not None:
            self.text = line
            self.move_cursor(self.document.end)
        return True

    def _complete(self, key: str) -> bool:
        if key != "tab":
            return False
        matches = self.suggestions()
        if matches:
            word = at_token(self.text)
            if word is not None:
                self.text = self.text[: len(self.text) - len(word) - 1] + "@" + matches[0] + " "
            else:
                self.text = matches[0] + " "
            self.move_cursor(self.document.end)
        return True

    def suggestions(self) -> list[str]:
        """What Tab would complete to: commands after `/`, project files after `@`."""
        text = self.text
        if not text.startswith("/"):
            self.names = None  # cleared or rewritten: the next `/` reads the commands afresh
        elif " " not in text:
            if self.names is None:
                self.names = command_names(self.root)
            return command_matches(text, names=self.names)
        word = at_token(text)
        if word is None or self.root is None:
            return []
        if self.files is None:
            self.files = project_files(self.root)
        return fuzzy(word, self.files)

    def escape(self) -> None:
        """Esc while idle: a second Esc soon after clears the draft (Up brings it back); on an empty prompt, rewind."""
        now = time.monotonic()
        twice, self.esc_at = now - self.esc_at < ESC_TWICE, now
        if not twice:
            if self.text.strip():
                self.toast("Esc again clears the input", ESC_TWICE)
            return
        self.esc_at = 0.0
        if self.text.strip():
            self.set_aside()
        else:
            self.post_message(self.Rewind())

    def clear_or_quit(self) -> None:
        """ctrl+c while idle: a draft is cleared (Up brings it back); an empty prompt quits on a second press."""
        if self.text.strip():
            self.set_aside()
            self.ctrl_c_at = 0.0
            return
        now = time.monotonic()
        if now - self.ctrl_c_at < CTRL_C_TWICE:
            self.post_message(self.Quit())
            return
        self.ctrl_c_at = now
        self.toast("Press ctrl+c again to quit", 2)

    def open_editor(self) -> None:
        """ctrl+g: edit the draft in $VISUAL or $EDITOR; what the editor saves becomes the draft."""
        from rhapsody.frontends.app.editor import edit_in_editor

        try:
            text = edit_in_editor(self.app, self.text)
        except OSError as exc:
            self.toast(f"the editor did not start: {exc}", 4, severity="error")
            return
        self.put(text)

    def put(self, text: str) -> None:
        """Put `text` in the prompt to edit and send (a command that needs its argument, a rewound message)."""
        self.text = text
        self.move_cursor(self.document.end)
        self.focus()

    def toast(self, message: str, timeout: float, severity: SeverityLevel = "information") -> None:
        """A short notice over the transcript's corner; it replaces the one before, so notices never stack."""
        self.app.clear_notifications()
        self.notify(message, severity=severity, timeout=timeout, markup=False)


class Completions(Static):
    """What Tab would complete the prompt to, above it; hidden when nothing matches."""

    matches: tuple[str, ...] = ()
    """What the line shows."""

    def show(self, matches: list[str]) -> None:
        """Show `matches` (project file names: through the sink's function); each key asks, most change nothing."""
        if tuple(matches) == self.matches:
            return
        self.matches = tuple(matches)
        # One row whatever it says, so no layout for the words; showing or hiding the row is one (the class's).
        self.update(Text(visible("  ".join(matches)) + ("   (tab completes)" if matches else "")), layout=False)
        self.set_class(not matches, "hidden")
