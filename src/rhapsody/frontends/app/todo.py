"""The todo list's panel beside the transcript (the agent's `todo_write`); hidden while the list is empty."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from rhapsody.frontends.app.deferred import lazy

if TYPE_CHECKING:
    from rhapsody.view import render
else:  # the renderer loads after the first frame
    render = lazy("rhapsody.view.render")

TODO_WIDTH = 26
"""Columns of the todo panel beside the transcript (app.tcss `#todo`): 54 stay for the transcript at 80."""


class TodoPanel(Static):
    """The todo list as the renderer words it, wrapped to the panel's width."""

    def show(self, items: list[dict[str, str]]) -> None:
        """Show the list (hidden while it is empty)."""
        head, *rows = render.todo_line(items).text.split("\n")
        width = TODO_WIDTH - 3  # the panel's padding and its border
        wrapped = [textwrap.fill(r.strip(), width, subsequent_indent="    ") for r in rows]
        self.update(Text("\n".join([head, *wrapped])) if items else Text(""))
        self.set_class(not items, "hidden")
