"""`/rewind` and Esc Esc in the app: pick a message, then restore files, conversation or both.

The list shows each human message with the files its turn changed and +/- lines (newest
highlighted). On a message:

| Key | Action |
| :- | :- |
| enter, b | Rewind files and conversation. |
| f | Rewind files only. |
| c | Rewind the conversation only. |
| escape | Close, nothing changed. |

The pick is submitted to the agent as `ops.Rewind`. Files changed outside rhapsody since that
point make its receipt refuse and name them; they are asked about in a second question (y submits
the rewind again with `force`, n or escape keeps everything as it is). After a conversation rewind the
prompt holds the message, to edit and send again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from rhapsody.core.errors import RhapsodyError
from rhapsody.view.sink import visible

if TYPE_CHECKING:  # the app's first frame needs none of these (tests/test_architecture.py)
    from rhapsody.rewind.rewind import RewindPoint, What
    from rhapsody.core.agent.loop import Agent

KEYS = "enter/b both · f files · c conversation · esc cancel"


class RewindScreen(ModalScreen["tuple[RewindPoint, What] | None"]):
    """The points to go back to; the key pressed on one says what to restore."""

    BINDINGS = [
        Binding("escape", "dismiss(None)", "Cancel"),
        Binding("f", "pick('files')", "Files"),
        Binding("c", "pick('conversation')", "Conversation"),
        Binding("b", "pick('both')", "Both"),
    ]

    def __init__(self, listed: list[RewindPoint]) -> None:
        super().__init__()
        self.listed = listed

    def compose(self) -> ComposeResult:
        with Vertical(id="rewind"):
            yield Static(Text(f"Rewind to before which message?  {KEYS}"))
            # Text through the sink's function: a string is read as markup, and the line quotes a message
            yield OptionList(*[Option(Text(visible(t.line())), id=str(i)) for i, t in enumerate(self.listed)],
                             id="points")

    def on_mount(self) -> None:
        points = self.query_one(OptionList)
        points.highlighted = len(self.listed) - 1
        points.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss((self.listed[event.option_index], "both"))

    def action_pick(self, what: What) -> None:
        """Rewind the highlighted point."""
        index = self.query_one(OptionList).highlighted
        if index is not None:
            self.dismiss((self.listed[index], what))


class OverwriteScreen(ModalScreen[bool]):
    """Files changed outside rhapsody would be overwritten: y goes ahead, n or escape stops."""

    BINDINGS = [Binding("y", "dismiss(True)", "Overwrite"), Binding("n", "dismiss(False)", "Keep"),
                Binding("escape", "dismiss(False)", "Keep")]

    def __init__(self, paths: tuple[str, ...]) -> None:
        super().__init__()
        self.paths = paths

    def compose(self) -> ComposeResult:
        from rhapsody.rewind.rewind import outside_text

        with Vertical(id="rewind"):
            yield Static(Text(visible(outside_text(list(self.paths))) + "\n\ny overwrites them · n or esc keeps everything"))


class Host(Protocol):
    """What the rewind reaches of the app (surface.py's AppSurface, which imports this module)."""

    @property
    def agent(self) -> Agent: ...
    @property
    def busy(self) -> bool: ...

    def push_screen(self, screen: ModalScreen[Any], callback: Callable[[Any], Awaitable[None]]) -> Any:
        """Open a modal; `callback` gets what it was dismissed with."""
        ...

    async def note(self, text: str, kind: str = "notice") -> Any:
        """Show a line in the transcript."""
        ...

    async def reload(self) -> None:
        """Rebuild the transcript from the session's records."""
        ...

    def refresh_status(self) -> None:
        """Redraw the status bar."""
        ...

    def refresh_git(self) -> Any:
        """Read the branch and changes again."""
        ...

    def refill(self, text: str) -> None:
        """Put text in the prompt, to edit and send."""
        ...


class Rewinder:
    """The app's rewind: opens the list, then submits `ops.Rewind`; asks before overwriting files changed outside
    rhapsody (the receipt names them) and submits again with `force`."""

    def __init__(self, app: Host) -> None:
        self.app = app

    async def open(self) -> None:
        """Show the points (or say why there are none)."""
        from rhapsody.commands.rewind import BUSY, points
        from rhapsody.core.agent.inbox import CHECKPOINTS_OFF

        if self.app.busy:
            await self.app.note(BUSY, "error")
            return
        try:
            listed = await asyncio.to_thread(points, self.app.agent)  # git runs: off the event loop
        except RhapsodyError as exc:
            await self.app.note(str(exc), "error")
            return
        if listed is None:
            await self.app.note(CHECKPOINTS_OFF, "error")
            return
        if not listed:
            await self.app.note("nothing to rewind to yet")
            return
        self.app.push_screen(RewindScreen(listed), callback=self._picked)

    async def _picked(self, choice: tuple[RewindPoint, What] | None) -> None:
        if choice is not None:
            await self.apply(choice[0].point.number, choice[1], force=False)

    async def apply(self, point: int, what: What, force: bool) -> None:
        """Submit the rewind; files changed outside rhapsody are asked about, then it is submitted with `force`."""
        from rhapsody.core.agent import ops

        # The rewinder runs git: the op is submitted off the event loop (it touches no asyncio state).
        done = await asyncio.to_thread(self.app.agent.submit, ops.Rewind(point=point, what=what, force=force))
        if done.outside:
            async def answered(yes: bool | None) -> None:
                if yes:
                    await self.apply(point, what, force=True)
            self.app.push_screen(OverwriteScreen(done.outside), callback=answered)
            return
        if not done.ok:
            await self.app.note(done.text, "error")
            return
        await self.app.reload()
        self.app.refresh_status()
        self.app.refresh_git()
        if done.refill:
            self.app.refill(done.refill)
