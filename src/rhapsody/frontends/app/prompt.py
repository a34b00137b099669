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
"""

from __future__ import annotations

from pathlib import Path

from textual import events
from textual.message import Message
from textual.containers import VerticalScroll
from textual.widgets import TextArea

from rhapsody.frontends.prompt_aids import (HistorySearch, InputHistory, at_token, command_matches, command_names,
                                            fuzzy, project_files)

SCROLLS = {"pageup": "page_up", "pagedown": "page_down", "ctrl+home": "home", "ctrl+end": "end"}


class PromptInput(TextArea):
    """The input line; see the module's key table."""

    class Submitted(Message):
        """The human sent the text; `queue` asks for end-of-turn delivery."""

        def __init__(self, text: str, queue: bool) -> None:
            self.text = text
            self.queue = queue
            super().__init__()

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
