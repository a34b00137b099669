"""The command palette's entries (ctrl+p): rhapsody's slash commands first, then the project's custom commands.

A command that needs an argument goes into the prompt to finish; any other runs at once.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import SystemCommand
from textual.screen import Screen

from rhapsody.frontends.app.deferred import lazy

if TYPE_CHECKING:
    from rhapsody.commands import slash as commands
    from rhapsody.commands.custom import CustomCommand
else:  # the commands load after the first frame
    commands = lazy("rhapsody.commands.slash")

PALETTE_MARGIN = 6
"""Columns of the command palette's width that its descriptions cannot use (padding, scrollbar)."""


class Palette:
    """The palette's entries, and the custom commands as read for the palette now open."""

    def __init__(self, root: Path, run: Callable[[str], object], to_prompt: Callable[[str], None]) -> None:
        """`run` runs a command as typed; `to_prompt` puts one that needs an argument into the prompt."""
        self.root = root
        self.run = run
        self.to_prompt = to_prompt
        self.custom: tuple[weakref.ref[Screen[Any]], list[CustomCommand]] | None = None
        """The custom commands as read for the screen on top (the open palette, which asks on every key)."""

    def entries(self, top: Screen[Any], width: int) -> Iterator[SystemCommand]:
        """The palette's lines, `width` columns wide; `top`: the screen on top now (the palette, once open)."""
        for name, help_text in commands.COMMANDS.items():
            head, _, rest = help_text.partition(": ")
            takes = bool(rest) and head.split()[0].strip("[]").isupper()
            short = rest if takes else f"{head} {rest}" if rest else help_text  # "[anyway] write…", no colon
            short = one_line(short, width).replace("[", "\\[")  # the palette reads markup: `[FILE]` would vanish
            if takes and not head.startswith("["):  # a required argument: into the prompt to finish
                yield SystemCommand(name, short, lambda n=name: self.to_prompt(f"{n} "))
                continue
            yield SystemCommand(name, short, lambda n=name: self.run(n))
        yield from self.custom_entries(top, width)

    def custom_entries(self, top: Screen[Any], width: int) -> Iterator[SystemCommand]:
        """The entries for custom commands: one that takes arguments goes into the prompt to finish."""
        for command in self.custom_commands(top):
            takes = bool(command.argument_hint) or "$" in command.prompt
            run = (lambda n=command.name: self.to_prompt(f"{n} ")) if takes else (lambda n=command.name: self.run(n))
            shown = one_line(command.description or f"custom command ({command.origin})", width)
            yield SystemCommand(command.name, shown.replace("[", "\\["), run)

    def custom_commands(self, top: Screen[Any]) -> list[CustomCommand]:
        """The custom commands, read once per opening of the palette (the screen on top while it is open), though
        it asks for its entries on every key: a command file added while it is closed is in the next one."""
        held = self.custom
        if held is None or held[0]() is not top:
            from rhapsody.commands.custom import load

            held = (weakref.ref(top), list(load(self.root, tuple(commands.COMMANDS))[0].values()))
            self.custom = held
        return held[1]


def one_line(text: str, width: int) -> str:
    """`text` cut to one line of a palette `width` columns wide."""
    room = max(24, width - PALETTE_MARGIN)
    return text if len(text) <= room else text[: room - 1].rstrip() + "…"
