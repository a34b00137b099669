"""`rhapsody --plain`: a prompt-toolkit line interface on the same loop.

For terminals and screen readers where a full-screen app is unwelcome. The prompt stays
live while the agent works: a typed line is a hint for the next tool boundary (prefix it
with `>>` to queue it for the end of the turn instead). Ctrl+C interrupts a running turn (the line
being typed stays); while idle it clears a line being typed, and on an empty line, twice within 2 s quits;
Ctrl+D quits; Ctrl+O requests the micro-handoff as `/handoff` does (a line being typed stays). A permission question is answered as in the app: its answers are numbered, and
a digit typed on the empty line picks one at once (`1` allows once); an empty line takes the default,
allow once; a lone `y` allows once, a lone `a` allows the offered session rules, a lone `n` denies, and
any other line denies with its words, verbatim, as the reason. As in the app, nothing typed in the
first `GRACE` seconds after a question appears answers it: a line entered then, and the
unfinished line being typed when the grace period ends, are set aside (with a line saying
so) and come back to the prompt once the question is answered. They were meant for the
prompt, so keeping them beats discarding words the human wrote; a lone `y` or `a` among
them never approves. The agent's markdown bold and code markers are left out of the
printed text.
"""

from __future__ import annotations

import asyncio
import time
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TextIO

from rhapsody.commands.slash import PLAIN_KEYS, Outcome, is_command
from rhapsody.config.settings import Settings
from rhapsody.core import events as ev
from rhapsody.core.agent import ops
from rhapsody.core.toolbox.approval import Grace, HumanApprover, choices, picked
from rhapsody.core.agent.loop import Agent
from rhapsody.core.toolbox.protocol import PlanReview
from rhapsody.frontends.controller import Controller, NoteKind, answer_for, plan_answer
from rhapsody.frontends.preview import plain_text
from rhapsody.frontends.prompt_aids import InputHistory, command_names
from rhapsody.frontends.recap import recap_lines
from rhapsody.view.render import print_event
from rhapsody.view.sink import safe_stream, visible
from rhapsody.core.session import records as rec


class PlainApprover:
    """Shows the agent's questions (`ApprovalAsked`) on the line; the next line typed after the grace period
    answers, as an `ApprovalAnswer` op."""

    def __init__(self, agent: Agent, grace: Grace, say: Callable[[str], None], root: Path,
                 take_typed: Callable[[], str] = lambda: "", hidden: Callable[[], tuple[str, ...]] = tuple) -> None:
        """`take_typed` empties the prompt's line and returns what it held; `hidden` gives the read deny
        rules, whose files a question never shows."""
        self.agent = agent
        self.grace = grace
        self.hidden = hidden
        self.say = say
        self.root = root
        self.take_typed = take_typed
        self.pending: ev.ApprovalAsked | None = None
        self.rules: tuple[str, ...] = ()
        self.ready = False
        """Whether the grace period of the pending question is over, so a typed line answers it."""
        self._waiting: asyncio.Future[object] | None = None
        self.kept: list[str] = []
        """What was typed for the prompt as the question appeared; it goes back there once answered."""
        self.plan: ev.PlanReviewAsked | None = None
        """The plan exit_plan proposed, while it waits for an answer."""

    def review_plan(self, asked: ev.PlanReviewAsked) -> None:
        """exit_plan's plan on the line; the next line typed answers it (see `plan_review`), as a `PlanAnswer`."""
        shown = "\n".join(f"  │ {line}" for line in visible(asked.plan).splitlines())
        self.say(f"  the agent proposes this plan:\n{shown}\n  {PLAN_KEYS}")
        self.plan = asked

    def ask(self, question: ev.ApprovalAsked) -> None:
        """Show the question; it takes an answer once its grace period is over."""
        self.rules = question.rules
        self.pending, self.ready = question, False
        self.say(f"{plain_text(question.tool, question.args, self.root, question.why, self.hidden())}\n"
                 f"  {numbered(self.rules)}; anything else denies, and the agent reads your words")
        self._waiting = asyncio.ensure_future(self.grace())
        self._waiting.add_done_callback(self._graced)

    def _graced(self, waited: asyncio.Future[object]) -> None:
        if not waited.cancelled():
            self.open()

    def drop(self) -> None:
        """The question is over: answered, or dropped when the turn was interrupted."""
        if self._waiting is not None:
            self._waiting.cancel()
        self.pending, self._waiting = None, None

    def open(self) -> None:
        """The grace period is over: the line being typed is set aside, and the next line answers."""
        if self.pending is None:
            return
        self.ready = True
        typed = self.take_typed()
        if typed.strip():
            self.kept.append(typed)
            self.say("  your unfinished line is set aside, not taken as the answer; it comes back to the prompt "
                     "once you answer")

    def picking(self, typed: str) -> bool:
        """Whether a key typed now on a line holding `typed` may pick an answer by its number."""
        return self.ready and not typed and self.pending is not None

    def take_kept(self) -> str:
        """The lines set aside, for the prompt (once the question is answered or dropped)."""
        kept, self.kept = " ".join(self.kept), []
        return kept

    def answer(self, line: str) -> bool:
        """Answer the pending question from a typed line as the app's dialog does: a lone `y` allows once,
        a lone `a` allows the offered rules (only when offered), a lone `n` denies, an empty line or a lone
        digit takes the answer so numbered (empty: 1, allow once), any
        other text denies with that text, verbatim, as the reason. A line entered within the grace period
        answers nothing and is set aside. False when no question is open, or for a slash command (it runs
        as the command; the question stays open)."""
        if self.plan is not None and not is_command(line):
            self.agent.submit(plan_answer(self.plan.id, plan_review(line)))
            self.plan = None
            return True
        if self.pending is None or is_command(line):
            return False
        if not self.ready:  # typed before the question could be read: never its answer
            if line.strip():
                self.kept.append(line)
            self.say("  that line came as the question appeared, so it is not the answer"
                     + ("; it comes back to the prompt once you answer" if line.strip() else ""))
            return True
        self.agent.submit(answer_for(self.pending.id, line, self.rules))
        self.drop()
        return True


PLAIN_CHOICES = {"allow": "allow once (y, or Enter)", "allow_rule": "allow {rules} for this session (a)",
                 "deny": "deny (n)"}


def numbered(rules: tuple[str, ...]) -> str:
    """The answers as the question lists them, numbered as a lone digit picks them."""
    listed = ", ".join(f"{n} = " + PLAIN_CHOICES[reply].format(rules=", ".join(rules))
                       for n, reply in enumerate(choices(rules), 1))
    return listed if rules else f"{listed} (no session rule can allow this call)"


PLAN_KEYS = ("y = approve, then auto-edit · a = approve, then ask (each write asked) · any other line rejects "
             "the plan and the agent reads your words (say what to change)")


def plan_review(line: str) -> PlanReview:
    """A typed line as the answer to a plan: a lone `y` or `a` approves it as proposed, anything else rejects it
    with the line, verbatim, as the reason."""
    word = line.strip().lower()
    if word in ("y", "a"):
        return PlanReview(True, mode="auto-edit" if word == "y" else "ask")
    return PlanReview(False, reason=line)


class Unmarked:
    """Streamed text without markdown's bold and code markers (`**`, backticks), for a line
    interface that cannot render them; a trailing `*` waits for the next piece (half of `**`)."""

    def __init__(self) -> None:
        self.held = ""

    def feed(self, text: str) -> str:
        """The printable part of the text so far."""
        text, self.held = self.held + text, ""
        if text.endswith("*") and not text.endswith("**"):
            text, self.held = text[:-1], "*"
        return text.replace("**", "").replace("`", "")

    def flush(self) -> str:
        """Whatever was held back, at the end of a block."""
        held, self.held = self.held, ""
        return held


async def read_work(agent: Agent, out: TextIO, questions: PlainApprover) -> None:
    """Print the agent's events until its work is over (`Idle`); its questions are asked on the line."""
    unmarked = Unmarked()
    async for event in agent.events():
        match event:
            case ev.TextDelta():
                out.write(visible(unmarked.feed(event.text)))
            case ev.ApprovalAsked():
                questions.ask(event)
            case ev.PlanReviewAsked():
                questions.review_plan(event)
            case ev.ShellRan():
                code = f"exit {event.exit_code}" if event.exit_code is not None else "error"
                out.write(visible(f"! {event.command} → {code}\n{event.output.rstrip()}\n"
                                  f"  [{event.hint_id} queued: {event.read_when}]\n"))
            case ev.Idle():
                questions.drop()
                questions.plan = None
                return
            case ev.BlockStopped():
                out.write(visible(unmarked.flush()))
                print_event(event, out)
            case ev.Interrupted():
                questions.drop()
                questions.plan = None  # dropped with the turn, as the question is
                out.write("\n")
                print_event(event, out)
            case _:
                print_event(event, out)  # the shared renderer's own match is exhaustive


def resumed_recap(agent: Agent) -> str:
    """Where a resumed session was left, rebuilt from its history ('' for a new session)."""
    records = agent.session.records
    if rec.first(records, rec.MessageAdded) is None:
        return ""
    return "\n".join(["resumed; where it was left:", *recap_lines(records, agent.session.figures)])


def welcome(agent: Agent) -> str:
    """Plain mode's opening lines: the session, the keys, where a resumed session was left, the sources' notices."""
    lines = [f"rhapsody {agent.session.id} in {agent.session.root}, model {agent.session.spec.model}, "
             f"permissions {agent.permission_mode}",
             "While the agent works, a typed line is a hint for its next tool boundary; start it with >> to "
             "queue it for the end of the turn. Ctrl+C interrupts (twice at the prompt quits), Ctrl+D quits, "
             "/help lists the commands and keys."]
    recap = resumed_recap(agent)
    if recap:
        lines.append(recap)
    lines += [f"  ! {notice}" for notice in agent.start_sources()]  # MCP servers start in the background
    return "".join(line + "\n" for line in lines)


class PlainSurface:
    """Plain mode as the controller's surface: lines printed, a y/N asked on the prompt."""

    def __init__(self, agent: Agent, say: Callable[[str], None], ask: Callable[[str], Awaitable[str]],
                 questions: PlainApprover, read: Callable[[], Coroutine[Any, Any, None]]) -> None:
        self.agent = agent
        self.say = say
        self.ask = ask
        self.questions = questions
        self.read = read
        self.task: asyncio.Task[None] | None = None
        """Reading the work under way, until `Idle`."""
        self.refilled = ""
        self.quitting = False

    async def note(self, text: str, kind: NoteKind) -> None:
        """Print it (a typed command is already on the screen) and keep it in the history."""
        if kind != "command":
            self.say(text)
        self.agent.submit(ops.AddNotice(text=text, error=kind == "error", command=kind == "command"))

    async def hinted(self, receipt: ops.Receipt, text: str, mode: str) -> None:
        self.say(receipt.text)

    async def work_began(self, op: ops.Op) -> None:
        self.task = asyncio.create_task(self.read())

    async def reload(self) -> None:
        """Nothing to rebuild: the lines printed stay."""

    async def in_history(self, text: str) -> None:
        self.say(text)

    async def confirm(self, outcome: Outcome, then: Callable[[bool], Awaitable[None]]) -> None:
        """Ask the y/N question on the prompt; with a permission question open, say how to do it instead."""
        if self.questions.pending is not None:  # one question at a time: the y/N would take the answer meant for it
            await self.note(f"  not handed off; `{outcome.then}` does it without asking", "notice")
            return
        try:
            answer = await self.ask(f"{outcome.confirm} [y/N] ")
        except (KeyboardInterrupt, EOFError):
            answer = ""
        await then(answer.strip().lower() in ("y", "yes"))

    def refill(self, text: str) -> None:
        self.refilled = text

    def quit(self) -> None:
        self.quitting = True

    @property
    def working(self) -> bool:
        """Whether the agent's work is still being read."""
        return self.task is not None and not self.task.done()


async def run_plain(agent: Agent, settings: Settings, approver: HumanApprover | None = None,
                    initial: str = "", out: TextIO | None = None, first: str = "") -> int:
    """Read lines until EOF or /quit; returns the exit status.

    `approver` is the one the agent's toolbox asks (None: questions are refused, as headless).
    Output goes to `out`, or to stdout as patched by prompt-toolkit so it prints above the
    live prompt. `first` (`rhapsody --plain "PROMPT"`) is sent as the first message.
    """
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import WordCompleter
    from prompt_toolkit.filters import Condition
    from prompt_toolkit.history import InMemoryHistory
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.patch_stdout import patch_stdout

    from rhapsody.frontends.plain_cpr import CursorReports

    keys = KeyBindings()
    typed: list[str] = []

    @keys.add("c-o")
    def _handoff(event: KeyPressEvent) -> None:
        """ctrl+o: /handoff, as in the app; the line being typed comes back to the prompt after."""
        typed.append(event.current_buffer.text)
        event.app.exit(result="/handoff")

    @keys.add("c-c")
    def _interrupt(event: KeyPressEvent) -> None:
        """ctrl+c: stops a running turn (the line being typed stays); idle, clears the line, or on an empty one quits."""
        buffer = event.current_buffer
        if working():
            typed.append(buffer.text)
        elif buffer.text:
            buffer.reset()  # a line cleared is no step toward quitting
            return
        event.app.exit(exception=KeyboardInterrupt())

    def _pick(event: KeyPressEvent) -> None:
        """A digit typed on the empty line at an open question picks the answer so numbered at once."""
        if picked(event.data, questions.rules):
            event.app.exit(result=event.data)
        else:
            event.current_buffer.insert_text(event.data)

    picking = Condition(lambda: questions.picking(prompt.default_buffer.text))
    for digit in "123456789":
        keys.add(digit, filter=picking)(_pick)

    def working() -> bool:
        return surface.working

    names = command_names(agent.session.root)  # the custom commands as they were when plain mode started
    # Up and ctrl+r (prompt-toolkit's reverse-i-search) reach the lines typed in the app here too
    earlier = InMemoryHistory(InputHistory(agent.session.root).lines)
    prompt: PromptSession[str] = PromptSession(completer=WordCompleter(names, sentence=True), key_bindings=keys,
                                               history=earlier)
    CursorReports(prompt.app)  # a terminal that never says where the cursor is costs one wait a session at most
    ctrl_c_at = 0.0
    opening = safe_stream(out or sys.stdout)
    # before the first prompt is drawn, so no line of it waits for the terminal's answer to where the cursor is
    opening.write(welcome(agent))
    opening.flush()
    with patch_stdout(raw=True):
        sink = safe_stream(out or sys.stdout)  # every byte of plain mode passes a sink, as the opening did

        def say(text: str) -> None:
            sink.write(text + "\n")
            sink.flush()

        def take_typed() -> str:
            typed, prompt.default_buffer.text = prompt.default_buffer.text, ""
            return typed

        questions = PlainApprover(agent, (approver or HumanApprover()).grace, say, agent.session.root, take_typed,
                                  agent.read_denied)
        surface = PlainSurface(agent, say, prompt.prompt_async, questions, lambda: read_work(agent, sink, questions))
        controller = Controller(agent, surface, PLAIN_KEYS)
        if first.strip():
            say(f"› {first}")
            await controller.turn(first)
        while True:
            try:
                line = await prompt.prompt_async("› ", default=initial)
            except KeyboardInterrupt:
                if surface.working:
                    agent.submit(ops.Interrupt())  # drops an open question: what it set aside goes back to the prompt
                    initial = " ".join(t for t in (questions.take_kept(), typed.pop() if typed else "") if t)
                    continue
                if time.monotonic() - ctrl_c_at > 2.0:  # at the prompt: twice to quit, as in the app
                    ctrl_c_at = time.monotonic()
                    say("press ctrl+c again to quit (or ctrl+d)")
                    continue
                break
            except EOFError:
                break
            by_key = bool(typed)  # ctrl+o: a key, not a typed command, so nothing to echo
            initial = typed.pop() if typed else ""
            if (questions.pending is not None or questions.plan is not None) and questions.answer(line):
                initial = "" if questions.pending is not None else questions.take_kept()
                continue
            if is_command(line):
                surface.refilled = ""
                await controller.command(line, echo=not by_key)
                if surface.quitting:
                    break
                initial = surface.refilled or initial
                if questions.pending is not None:
                    say("  the question above is still open: y, a, n, or your words")
                continue
            queued = line.startswith(">>") and agent.working
            await controller.line(line.removeprefix(">>").strip() if queued else line, queued)
    if surface.working:
        agent.submit(ops.Interrupt())
    if surface.task is not None:
        await asyncio.gather(surface.task, return_exceptions=True)
    return 0
