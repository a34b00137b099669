"""Plain mode's cursor position requests: asked of the terminal, and given up on for the session once unanswered.

prompt-toolkit asks the terminal where the cursor is (a CPR, `ESC[6n`) each time it draws the prompt, to learn
how many rows lie below it: the completion menu then has the whole space down to the bottom of the screen, not
only the rows it reserves. Until the first answer comes it cannot know the terminal answers at all, so each
print above the prompt and the end of each prompt wait up to a second for the answer; it gives up only when a
single prompt has stood for two seconds, and then prints a warning. A terminal that never answers (some
multiplexers, serial consoles, `script`, an editor's shell) made every quick exchange wait.

`CursorReports` decides once per session instead: the first request's answer has `ANSWER_WITHIN` seconds to
come, timed on the event loop rather than by one prompt, so the decision holds across prompts. Unanswered,
the requests stop for the session (`Vt100_Output.enable_cpr` off, the renderer's support known absent), the
waits under way end, and nothing is printed: the prompt still reserves its menu's rows without knowing the
rest. A terminal that answers is unchanged; one whose answer comes late is taken up again at that answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.output.vt100 import Vt100_Output
from prompt_toolkit.renderer import CPR_Support

ANSWER_WITHIN = 0.5
"""Seconds the first cursor position request has for its answer. A terminal answers in milliseconds, a remote
one within a round trip; prompt-toolkit's own wait is one second, and the time given here is the one wait a
terminal that never answers costs (only when a line is entered or printed that soon after the first prompt)."""


class CursorReports:
    """Whether a prompt's terminal answers cursor position requests, learned from the first one."""

    def __init__(self, app: Application[Any], within: float = ANSWER_WITHIN) -> None:
        self.app = app
        self.within = within
        self.timer: asyncio.TimerHandle | None = None
        self.ending: asyncio.Task[None] | None = None
        """Ending the waits for an answer once none came."""
        self.given_up = False
        if isinstance(app.output, Vt100_Output):  # other outputs never ask (Windows has an API call for it)
            app.after_render += self._rendered

    def _rendered(self, app: Application[Any]) -> None:
        """After each draw: time the first request, and take up a terminal whose answer came after all."""
        renderer = app.renderer
        if renderer.cpr_support is CPR_Support.SUPPORTED and self.given_up:
            self._answered()
        elif self.timer is None and renderer.cpr_support is CPR_Support.UNKNOWN and renderer.waiting_for_cpr:
            self.timer = asyncio.get_running_loop().call_later(self.within, self._deadline)

    def _deadline(self) -> None:
        if self.app.renderer.cpr_support is CPR_Support.UNKNOWN:
            self.ending = asyncio.ensure_future(self._give_up())

    async def _give_up(self) -> None:
        """No answer: stop asking, and end the waits under way as their own timeout would."""
        output, renderer = self.app.output, self.app.renderer
        assert isinstance(output, Vt100_Output)
        self.given_up = True
        output.enable_cpr = False  # the app asks `responds_to_cpr` before each wait, and warns only while it holds
        await renderer.wait_for_cpr_responses(timeout=0)  # cancels the pending requests, waking every waiter
        if renderer.cpr_support is CPR_Support.UNKNOWN:
            renderer.cpr_support = CPR_Support.NOT_SUPPORTED

    def _answered(self) -> None:
        """A late answer: the terminal does answer, so prompt-toolkit waits for each answer again."""
        output = self.app.output
        assert isinstance(output, Vt100_Output)
        output.enable_cpr = True
        self.given_up = False
