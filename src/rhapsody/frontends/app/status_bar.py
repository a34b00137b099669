"""The status bar: one line of truth, and the state behind it (what runs now, the branch, whether the cache went cold).

The line itself is `status.status_line`, which the first frame's path imports without Textual; this module
is the widget that owns what the line is computed from and when it is drawn again.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from rich.text import Text
from textual import work
from textual.reactive import reactive
from textual.widgets import Static

from rhapsody.frontends.app.status import Liveness, status_line
from rhapsody.view.sink import visible

if TYPE_CHECKING:
    from rhapsody.core.agent.loop import Agent

T = TypeVar("T")


class StatusBar(Static):
    """One line of truth: model, context, cache, cost, git, directory, seams."""

    state: reactive[str] = reactive("idle")
    """idle, working, or a short note."""

    def __init__(self, content: str = "", *, root: Path | None = None, **options: Any) -> None:
        """`root`: the project whose branch and changes the bar shows."""
        super().__init__(content, **options)
        self.root = root
        self.agent: Agent | None = None
        """The agent whose session the line reads; None until it is built (the line waits)."""
        self.live = Liveness()
        self.git = ""
        """The branch and the count of changed files, as last read ("no git" outside a repository)."""
        self.cold = False
        """The line last showed the cache cold (repainted when it goes cold while idle)."""
        self.line = ""
        """The line drawn."""

    def attach(self, agent: Agent) -> None:
        """The agent exists: the line reads its session from now on."""
        self.agent = agent

    def set_state(self, state: str) -> None:
        """Set the state shown (idle, working, waiting for you) and redraw."""
        self.state = state
        self.refresh_status()

    def waiting(self) -> None:
        """The human is asked: the clock stops and the line says so."""
        self.set_state("waiting for you")
        self.live.pause()

    def answered(self, working: bool) -> None:
        """The human answered (or the question went): the clock goes on, the state is the agent's again."""
        self.live.resume()
        self.set_state("working" if working else "idle")

    def on_resize(self) -> None:
        """The line is fitted to the width again."""
        self.call_after_refresh(self.refresh_status)

    def tick(self) -> None:
        """The spinner's beat: only repaint while something runs, or when the cache has just gone cold."""
        agent = self.agent
        cold = not self.live.active and agent is not None and agent.session.figures.cache_cold(time.time())
        if self.live.active or cold != self.cold:
            self.cold = cold
            self.refresh_status()

    @work(exclusive=True, group="git", exit_on_error=False)
    async def refresh_git(self) -> None:
        """Read branch and dirty-file count off the event loop. The thread that reads them never waits for the
        loop (`call_from_thread` would: a loop held by the app's shutdown then holds the thread, and the exit)."""
        from rhapsody.tools.git import git_facts

        root = self.root
        assert root is not None
        facts = await off_loop(lambda: git_facts(root))
        self.git = f"{facts['branch']} ±{len(facts['dirty'])}" if facts.get("git_root") else "no git"
        self.refresh_status()

    def refresh_status(self) -> None:
        """Recompute the line from the session's figures."""
        if self.agent is None:
            return
        session = self.agent.session
        state = self.live.text() if self.live.active else self.state
        mode = self.agent.permission_mode
        line = visible(status_line(session.figures, session, self.git, state, self.app.size.width, mode))
        if line != self.line:  # the spinner's tick often draws what is shown already
            self.line = line
            self.update(Text(line), layout=False)  # one row whatever it says: the screen needs no new layout


async def off_loop(read: Callable[[], T]) -> T:
    """`read()` in a daemon thread, awaited: the thread hands its result over without waiting for the loop, and
    a process that ends meanwhile does not wait for it (as `asyncio.to_thread`'s executor would)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(cast(T, result))

    def run() -> None:
        try:
            result, error = read(), None
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:  # the loop has closed: nobody waits for it any more
            pass

    threading.Thread(target=run, name="rhapsody-off-loop", daemon=True).start()
    return await done
