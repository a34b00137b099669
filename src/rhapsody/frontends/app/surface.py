"""The shared controller's `Surface` in the app: what a typed line's effects are on the app's panels.

A line typed in the prompt goes through frontends/controller.py as it does in plain mode and for an
editor (acp/surface.py): a `!command`, a slash command, a hint while the agent works, or a new turn.
Its notes are drawn by the transcript's feed and kept in the history; a pending hint waits in the
transcript; a rebuild redraws the transcript and the todo list from the records; a command's yes/no
question is a screen; text put back goes into the prompt. The two commands the app answers with a
screen of its own (`/rewind`'s list, `/resume`'s picker) open here; every other goes to the controller.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from textual.screen import ModalScreen
from textual.widget import Widget

from rhapsody.frontends.app.deferred import lazy
from rhapsody.frontends.app.feed import Feed
from rhapsody.frontends.app.prompt import PromptInput
from rhapsody.frontends.app.rewind import Rewinder
from rhapsody.frontends.app.status import welcome_text
from rhapsody.frontends.app.todo import TodoPanel

if TYPE_CHECKING:
    from rhapsody.commands.slash import Outcome
    from rhapsody.config.settings import Settings
    from rhapsody.core.agent import ops
    from rhapsody.core.agent.loop import Agent
    from rhapsody.frontends.controller import Controller
else:  # loaded on first use, after the first frame
    ops = lazy("rhapsody.core.agent.ops")


class AppHost(Protocol):
    """What the surface reaches of the app (app.py's RhapsodyApp, which imports this module)."""

    @property
    def agent(self) -> Agent: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def feed(self) -> Feed: ...
    @property
    def prompt(self) -> PromptInput: ...
    @property
    def todo(self) -> TodoPanel: ...
    @property
    def busy(self) -> bool: ...

    def push_screen(self, screen: ModalScreen[Any], callback: Callable[[Any], Awaitable[None]]) -> Any:
        """Open a modal; `callback` gets what it was dismissed with."""
        ...

    def call_after_refresh(self, callback: Callable[..., object], *args: Any) -> bool:
        """Run `callback` once the screen has been drawn again."""
        ...

    def read_work(self, op: ops.Op) -> None:
        """Read the work `op` started in the agent worker, until `Idle`."""
        ...

    def refresh_status(self) -> None:
        """Redraw the status bar."""
        ...

    def refresh_git(self) -> Any:
        """Read the branch and changes again."""
        ...

    def quit(self) -> None:
        """Leave rhapsody."""
        ...


class AppSurface:
    """The controller's effects in the app, and the slash commands that open the app's own screens; it is the
    rewinder's host too (rewind.py), whose effects are the same."""

    def __init__(self, app: AppHost, controller: Callable[[], Controller | None], welcome: str = "") -> None:
        """`controller`: the controller that runs the commands (None until the agent is built); `welcome`: what an
        empty session says besides the welcome's own lines (the demo's)."""
        self.app = app
        self.controller = controller
        self.welcome = welcome
        self.rewinder = Rewinder(self)

    @property
    def agent(self) -> Agent:
        """The app's agent."""
        return self.app.agent

    @property
    def busy(self) -> bool:
        """Whether a turn is running."""
        return self.app.busy

    def push_screen(self, screen: ModalScreen[Any], callback: Callable[[Any], Awaitable[None]]) -> Any:
        """Open a modal over the app; `callback` gets what it was dismissed with."""
        return self.app.push_screen(screen, callback=callback)

    def refresh_status(self) -> None:
        """Redraw the status bar."""
        self.app.refresh_status()

    def refresh_git(self) -> Any:
        """Read the branch and changes again."""
        return self.app.refresh_git()

    async def note(self, text: str, kind: str = "notice") -> Widget:
        """Show a command's output (kind `command`: the command itself); a `notice` record keeps it in place
        on a rebuild and on --continue, drawn by the renderer from that record.

        The reply streaming now is recorded when it ends, so a notice said meanwhile is
        recorded after it, and shown pinned below it: the reply grows above the notice, as
        a rebuild from history shows them.
        """
        feed = self.app.feed
        notice = ops.AddNotice(text=text, error=kind == "error", command=kind == "command")
        if not feed.hold(notice):
            self.app.agent.submit(notice)
        shown = await feed.noted(text, kind)
        if kind != "command":
            self.app.call_after_refresh(feed.top_in_view, shown)  # a long answer (/help at 80x24) from its first line
        return shown

    async def hinted(self, receipt: ops.Receipt, text: str, mode: str) -> None:
        """A hint (on disk already) shown as pending."""
        await self.app.feed.hinted(receipt.id, text, mode)

    async def work_began(self, op: ops.Op) -> None:
        """Work began (the controller submitted it): the human's `!command` says it runs; the worker reads it."""
        if isinstance(op, ops.ShellCommand):
            await self.app.feed.shell_started(op.command)
        self.app.read_work(op)

    async def reload(self) -> None:
        """Rebuild the transcript and the todo list from history; command outputs are `notice` records, kept in place."""
        app = self.app
        session = app.agent.session
        app.todo.show([i.model_dump() for i in session.todos.items()])
        await app.feed.rebuild(session, lambda: welcome_text(app.agent, app.settings, self.welcome))

    async def in_history(self, text: str) -> None:
        """A command's answer on record: the reload that came with it drew it."""

    async def confirm(self, outcome: Outcome, then: Callable[[bool], Awaitable[None]]) -> None:
        """Ask the outcome's question in its screen; `then` gets the answer."""
        from rhapsody.frontends.app.confirm import ConfirmScreen

        async def answered(yes: bool | None) -> None:
            await then(bool(yes))

        self.push_screen(ConfirmScreen(outcome.text, outcome.confirm), callback=answered)

    def refill(self, text: str) -> None:
        """Put a rewound message back in the prompt."""
        self.app.prompt.put(text)

    def quit(self) -> None:
        """/quit."""
        self.app.quit()

    async def command(self, text: str, echo: bool = True) -> None:
        """Run a slash command and show what it said, below the command itself (`echo`: typed or chosen in the
        palette, not a key such as ctrl+o)."""
        controller = self.controller()
        if controller is None:  # the palette or a key before the session is built
            return
        if text.strip() == "/rewind":  # the list to pick from; with arguments it runs as in plain mode
            await self.rewinder.open()
            return
        if text.strip() == "/resume" and not self.busy:  # the picker; with an id it runs as in plain mode
            self.pick_session()
            return
        await controller.command(text, echo)
        self.refresh_status()

    def pick_session(self) -> None:
        """`/resume`: the project's other sessions to pick from; the one picked continues here."""
        from rhapsody.frontends.app.picker import PickerScreen

        async def picked(session: str | None) -> None:
            if session:
                await self.command(f"/resume {session}")

        session = self.app.agent.session
        self.push_screen(PickerScreen(session.root, exclude=session.id), callback=picked)
