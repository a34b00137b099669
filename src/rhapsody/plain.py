"""`rhapsody --plain`: a prompt-toolkit line interface on the same loop.

For terminals and screen readers where a full-screen app is unwelcome. The prompt stays
live while the agent works: a typed line is a hint for the next tool boundary (prefix it
with `>>` to queue it for the end of the turn instead). Ctrl+C interrupts a running turn;
Ctrl+D quits.
"""

from __future__ import annotations

import asyncio
import sys
from contextlib import aclosing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from rhapsody.commands import COMMANDS, is_command, run_command
from rhapsody.core import events as ev
from rhapsody.core.permissions import suggested_rules
from rhapsody.core.tools import Approval
from rhapsody import render
from rhapsody.headless import print_event
from rhapsody.preview import plain_text
from rhapsody.wiring import Wiring


class PlainApprover:
    """Asks permission questions on the line; the next typed line is the answer."""

    def __init__(self, say: Callable[[str], None], root: Path) -> None:
        self.say = say
        self.root = root
        self.pending: asyncio.Future[Approval] | None = None
        self.rules: tuple[str, ...] = ()

    async def __call__(self, tool: str, argument: str, why: str, args: dict[str, Any]) -> Approval:
        self.rules = suggested_rules(tool, argument)
        self.pending = asyncio.get_running_loop().create_future()
        rule = f", a = allow {', '.join(self.rules)} for this session" if self.rules else ""
        self.say(f"{plain_text(tool, args, self.root, why)}\n"
                 f"  y = allow once{rule}, n [what to do instead] = deny (anything else is a hint, kept for later)")
        try:
            return await self.pending
        finally:
            self.pending = None

    def answer(self, line: str) -> bool:
        """Resolve the pending question from a typed line; False when the line is not an answer."""
        word, _, reason = line.strip().partition(" ")
        whole = line.strip().lower()
        if self.pending is None or self.pending.done():
            return False
        if whole in ("y", "yes"):  # only a lone answer approves: "yes, but..." is not a yes
            self.pending.set_result(Approval(True))
        elif whole == "a" and self.rules:
            self.pending.set_result(Approval(True, remember=self.rules))
        elif word.lower() not in ("n", "no"):
            return False
        else:
            self.pending.set_result(Approval(False, reason=f"denied by the human: {reason}" if reason else ""))
        return True


async def _consume(wiring: Wiring, text: str | None, out: TextIO) -> None:
    try:
        async with aclosing(wiring.agent.run(text)) as stream:
            async for event in stream:
                print_event(event, out)
                if isinstance(event, ev.Failed):
                    out.write(f"rhapsody: {event.message}\n")
    except asyncio.CancelledError:
        out.write(f"\n{render.plain(render.event_lines(ev.Interrupted(''))[0])}\n")


async def run_plain(wiring: Wiring, initial: str = "", out: TextIO | None = None) -> int:
    """Read lines until EOF or /quit; returns the exit status.

    Output goes to `out`, or to stdout as patched by prompt-toolkit so it prints above the
    live prompt.
    """
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import WordCompleter
    from prompt_toolkit.patch_stdout import patch_stdout

    prompt: PromptSession[str] = PromptSession(completer=WordCompleter(list(COMMANDS), sentence=True))
    task: asyncio.Task[None] | None = None
    with patch_stdout(raw=True):
        sink = out or sys.stdout

        def say(text: str) -> None:
            sink.write(text + "\n")
            sink.flush()

        approver = PlainApprover(say, wiring.session.root)
        wiring.agent.toolbox.approver = approver
        say(f"rhapsody {wiring.session.id} in {wiring.session.root}, model {wiring.session.spec.model}, "
            f"permissions {wiring.agent.toolbox.permission_mode}\n"
            "While the agent works, a typed line is a hint for its next tool boundary; start it with >> to "
            "queue it for the end of the turn. Ctrl+C interrupts, Ctrl+D quits, /help lists the commands.")
        while True:
            try:
                line = await prompt.prompt_async("› ", default=initial)
            except KeyboardInterrupt:
                if task and not task.done():
                    task.cancel()
                    continue
                break
            except EOFError:
                break
            initial = ""
            busy = task is not None and not task.done()
            if approver.pending is not None and approver.answer(line):
                continue
            if approver.pending is not None and line.strip():
                say("[answer the question first: y, a or n; your line is kept as a hint]")
            if is_command(line):
                outcome = run_command(wiring.agent, line)
                if outcome.text:
                    say(outcome.text)
                if outcome.quit:
                    break
                if outcome.run_turn and not busy:
                    task = asyncio.create_task(_consume(wiring, None, sink))
            elif line.strip() and busy:
                queued = line.startswith(">>")
                hint = wiring.session.hint(line.removeprefix(">>").strip(), mode="queue" if queued else "steer")
                say(f"[{hint.id} pending: {'end of turn' if queued else 'next tool boundary'}]")
            elif line.strip():
                task = asyncio.create_task(_consume(wiring, line, sink))
    if task and not task.done():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return 0
