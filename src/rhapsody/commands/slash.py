"""Slash commands shared by the app and plain mode."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rhapsody.commands.outcome import Outcome as Outcome  # where commands like /rewind build it too
from rhapsody.core.agent.loop import Agent
from rhapsody.core.agent.ops import RequestHandoff, SetMode, UndoHandoff
from rhapsody.core.access.permissions import MODES, Mode, mode_named, writes_nothing
from rhapsody.core.session.session import Session

COMMANDS: dict[str, str] = {}
"""Each command's help, in the order /help lists them: what the palette, /help and completion read (filled by
`@command` below)."""


Run = Callable[[Agent, str, "tuple[tuple[str, str], ...] | None"], "Outcome"]
"""What runs a command: the agent, the words after the command's name, the front end's keys for /help."""


@dataclass(frozen=True)
class Command:
    """One slash command: its name, its help (the one place it is written) and what runs it."""

    name: str
    help: str
    run: Run


REGISTRY: dict[str, Command] = {}
"""Every built-in command by name, in the order they are defined."""


def command(name: str, help: str) -> Callable[[Run], Run]:
    """Register the function as the slash command `name` with its `help` line (see COMMANDS)."""
    def register(run: Run) -> Run:
        REGISTRY[name] = Command(name, help, run)
        COMMANDS[name] = help
        return run
    return register


def is_command(line: str) -> bool:
    """Whether a typed line is meant as a slash command (known or not): `/word` at the start.

    A line such as `/usr/bin/env is missing` is a path, not a command, and goes to the model.
    """
    if not line.startswith("/"):
        return False
    word = line.split(maxsplit=1)[0]
    return len(word) > 1 and "/" not in word[1:]


def run_command(agent: Agent, line: str, keys: tuple[tuple[str, str], ...] | None = None) -> Outcome:
    """Execute one slash command; an unknown one is a local error, never a model turn. `keys`: the
    front end's keys for /help (default: the app's)."""
    name, _, arg = line.strip().partition(" ")
    found = REGISTRY.get(name)
    return _custom(agent, name, arg.strip()) if found is None else found.run(agent, arg.strip(), keys)


def _resume(agent: Agent, arg: str) -> Outcome:
    """Continue session `arg` of this project in place of the current one, between turns."""
    from rhapsody.core.errors import HistoryError
    from rhapsody.core.session.history import find_session

    if agent.busy:
        return Outcome("wait for the turn to end before resuming another session", error=True)
    if not arg:
        return Outcome("/resume needs a session id here (`rhapsody -r` lists them)", error=True)
    try:
        path = find_session(agent.session.root, arg)
        if path == agent.session.path:
            return Outcome(f"session {agent.session.id} is the one open", error=True)
        session = Session.resume(agent.session.root, path)
    except HistoryError as exc:
        return Outcome(str(exc), error=True)
    agent.replace_session(session)
    return Outcome(f"resumed session {session.id}", reload=True)


def _init(agent: Agent, arg: str) -> Outcome:
    """Write a starting AGENTS.md; one already there is replaced only after a yes."""
    from rhapsody.commands.init import init

    said, asks = init(agent.session.root, overwrite=arg == "overwrite")
    if asks:
        return Outcome(said, confirm="replace AGENTS.md?", then="/init overwrite", declined="AGENTS.md left as it was")
    return Outcome(said, error=said.endswith("not written"))


def _custom(agent: Agent, name: str, arg: str) -> Outcome:
    """A custom command (a prompt file): its prompt goes to the model as the human's message."""
    from rhapsody.commands.custom import granting_notice, load

    command = load(agent.session.root, tuple(COMMANDS))[0].get(name)
    if command is None:
        return Outcome(f"unknown command {name}; /help lists the commands", error=True)
    return Outcome(granting_notice(command, agent.session.root), prompt=command.expand(arg), typed=arg)


def custom_help(root: Path) -> list[str]:
    """/help's lines for the custom commands (prompt files), and for the files set aside."""
    from rhapsody.commands.custom import load

    found, notes = load(root, tuple(COMMANDS))
    if not found and not notes:
        return []
    return ["", "custom commands (prompt files; they send their text, nothing more):"] + [
        c.help_line() for c in found.values()] + [f"  ! {note}" for note in notes]


KEYS = (("enter", "send; while the agent works, a hint for its next step"),
        ("ctrl+n", "queue the message for the end of the turn"),
        ("ctrl+j", "new line"),
        ("ctrl+o", "micro-handoff (same as /handoff)"),
        ("esc", "interrupt the turn"),
        ("up, down", "walk earlier inputs"),
        ("tab", "complete a /command or an @path"),
        ("shift+tab", "cycle the permission mode: ask, auto-edit, read-only, plan (never yolo)"),
        ("ctrl+t", "move into the transcript (tab comes back, enter unfolds)"),
        ("esc esc", "clear the input (up brings it back); on an empty one, rewind (as /rewind)"),
        ("ctrl+g", "edit the input in $VISUAL or $EDITOR"),
        ("!command", "run a shell command yourself, sandboxed; the agent reads its output"),
        ("ctrl+l", "show earlier transcript entries"),
        ("ctrl+u/k/w", "delete to the line's start, to its end, the word before"),
        ("ctrl+p", "command palette"),
        ("ctrl+c", "interrupt the agent; idle: clear the prompt, on an empty one twice to quit"))
"""The app's keys, as /help lists them."""

PLAIN_KEYS = (("enter", "send; while the agent works, a hint for its next step"),
              (">> text", "queue the message for the end of the turn"),
              ("ctrl+o", "micro-handoff (same as /handoff)"),
              ("ctrl+c", "interrupt the turn; idle: clear the line, on an empty one twice to quit"),
              ("ctrl+d", "quit (as /quit)"),
              ("up, down", "walk earlier inputs"),
              ("tab", "complete a /command"))
"""Plain mode's keys, as its /help lists them."""


ANYWAY = "/handoff anyway"
"""The handoff the human confirmed although it would not pay."""


def _handoff(agent: Agent, arg: str = "") -> Outcome:
    from rhapsody.core.session.handoff import stripped_calls
    from rhapsody.core.session.handoff_state import nothing
    from rhapsody.core.accounting.seam_cost import of_session

    calls = stripped_calls(agent.session)
    if not agent.busy and not agent.session.handoff.pending and not calls:
        return Outcome(nothing(agent.session))  # no request, no seam: there is nothing to strip
    if calls and arg != "anyway" and not agent.session.handoff.pending:  # no calls yet mid-turn: judged at its end
        worth = of_session(agent.session)
        if not worth.pays:
            return Outcome(f"a seam would not pay now: {worth.text()}", confirm="hand off anyway?", then=ANYWAY)
    return Outcome(op=RequestHandoff())


def _export(agent: Agent, arg: str) -> Outcome:
    from pathlib import Path

    from rhapsody.core.errors import RhapsodyError
    from rhapsody.commands.export import write_export

    words = arg.split()
    named = [w for w in words if w != "--md"]
    if len(named) > 1 or any(w.startswith("-") for w in named):
        return Outcome("usage: /export [--md] [FILE]", error=True)
    root = agent.session.root
    out = (root / Path(named[0]).expanduser()) if named else None
    try:
        path = write_export(root, str(agent.session.path), "md" if "--md" in words else "html", out)
    except RhapsodyError as exc:
        return Outcome(f"export failed: {exc}", error=True)
    if agent.working:  # the history holds a reply once it has ended: what streams now is not in the page yet
        return Outcome(f"exported to {path} (a turn is running: the page holds what the history has so far; "
                       "/export again when it ends for the rest)")
    return Outcome(f"exported to {path}")


def _recall(agent: Agent, arg: str) -> str:
    from rhapsody.tools.handoff import recall_text

    wide = arg.startswith("--all")
    query = arg.removeprefix("--all").strip()
    if not query:
        return "usage: /recall [--all] QUERY"
    return recall_text(agent.session.root, agent.session, query, all_sessions=wide, for_human=True,
                       write=not writes_nothing(agent.toolbox.permission_mode))


def _switch_model(agent: Agent, arg: str) -> Outcome:
    session = agent.session
    words = arg.split()
    force = "--force" in words
    name = next((w for w in words if w != "--force"), "")
    known = _known_models()
    if not name:
        listed = f"\nknown: {', '.join(known)}" if known else ""
        return Outcome(f"model: {session.spec.model} (/model NAME switches){listed}")
    if agent.busy:
        return Outcome("wait for the turn to end before switching models", error=True)
    if known and name not in known and not force:
        close = closest_models(name, known)
        hint = f" (closest: {', '.join(close)})" if close else ""
        return Outcome(f"unknown model {name}{hint}; /model lists the known ones, /model {name} --force uses it "
                       "anyway", error=True)
    session.switch_model(name)
    return Outcome(f"model switched to {name}; earlier thinking blocks leave the context")


def closest_models(name: str, known: tuple[str, ...], count: int = 3) -> list[str]:
    """Known names that contain `name`, else the nearest in spelling (newest first among equals)."""
    import difflib

    return [m for m in known if name in m][:count] or difflib.get_close_matches(name, known, count, 0.4)


def _known_models() -> tuple[str, ...]:
    """The SDK's model ids without the dated aliases of an undated one (the list stays short)."""
    from rhapsody.providers.lazy import sdk_models

    models = sdk_models()
    return tuple(m for m in models if not (re.fullmatch(r".*-\d{8}", m) and m.rsplit("-", 1)[0] in models))


CYCLE: tuple[Mode, ...] = ("ask", "auto-edit", "read-only", "plan")
"""The modes shift+tab steps through in the app; yolo is never one of them (only a flag or /permissions yolo)."""


def set_mode(agent: Agent, mode: Mode) -> None:
    """Switch the permission mode, on record so a resume keeps it."""
    agent.submit(SetMode(mode=mode))


def next_mode(mode: Mode) -> Mode:
    """The mode after `mode` in CYCLE; from yolo (or any mode outside it), ask."""
    return CYCLE[(CYCLE.index(mode) + 1) % len(CYCLE)] if mode in CYCLE else CYCLE[0]


def _permissions(agent: Agent, arg: str) -> Outcome:
    box = agent.toolbox
    if arg:
        mode = mode_named(arg)
        if mode is None:
            return Outcome(f"unknown mode {arg}; choose one of {', '.join(MODES)}", error=True)
        set_mode(agent, mode)
    warning = ["⚠ yolo: every call now runs without asking you, edits and commands alike; "
               "/permissions ask goes back"] if arg == "yolo" else []
    rules = box.rules
    origin, skipped = _imported(agent.session.root)
    lines = [f"permission mode: {box.permission_mode} (switch: /permissions {'|'.join(MODES)})",
             f"allow: {_sourced(rules.allow, origin) or '(none)'}",
             f"deny: {_sourced(rules.deny, origin) or '(none)'}",
             f"allowed this session: {', '.join(rules.session_allow) or '(none)'}"]
    lines += [f"skipped (no rhapsody rule or hook point): {', '.join(skipped)}"] if skipped else []
    return Outcome("\n".join(warning + lines), error=bool(warning))


def _imported(root: Path) -> tuple[dict[str, str], list[str]]:
    """Where each rule of the Claude Code settings files came from, and the forms they had that were skipped."""
    from rhapsody.config import claude
    from rhapsody.core.errors import ConfigError

    try:
        user, project = claude.read_user(), claude.read_project(root)
    except ConfigError as exc:
        return {}, [str(exc)]
    return {**user.origin, **project.origin}, [*user.skipped, *project.skipped]


def _sourced(rules: list[str], origin: dict[str, str]) -> str:
    return ", ".join(f"{rule} ({origin[rule]})" if rule in origin else rule for rule in rules)


def stats_text(session: Session) -> str:
    """Seams and counters of a session as plain lines."""
    from rhapsody.commands.stats import stats_lines

    return "\n".join(stats_lines(session.records, folded=session.figures))


# -- the commands, in the order /help lists them ----------------------------------------------------


@command("/handoff", "[anyway]: write a field note, then strip tool traffic (asks first when it would not pay)")
def _cmd_handoff(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    return _handoff(agent, arg)


@command("/unhandoff", "put the last seam's stripped blocks back")
def _cmd_unhandoff(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    return Outcome(op=UndoHandoff())


@command("/stats", "every seam of this session, before → after, and what the seams saved")
def _cmd_stats(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    return Outcome(stats_text(agent.session))


@command("/recall", "QUERY: search stripped tool calls (--all: earlier sessions too)")
def _cmd_recall(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    return Outcome(_recall(agent, arg))


@command("/model", "NAME [--force]: switch model (earlier thinking leaves the context)")
def _cmd_model(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    return _switch_model(agent, arg)


@command("/permissions", "[MODE]: show the permission mode and rules, or switch mode")
def _cmd_permissions(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    return _permissions(agent, arg)


@command("/mcp", "MCP servers, their state and their tools")
def _cmd_mcp(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    lines = [line for source in agent.toolbox.sources for line in source.status()]
    return Outcome("\n".join(lines) or "no MCP servers configured")


@command("/export", "[--md] [FILE]: this session as one HTML page with its charts (or Markdown)")
def _cmd_export(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    return _export(agent, arg)


@command("/rewind", "[N [files|conversation|both] [force]]: go back to before message N (no N: the list)")
def _cmd_rewind(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    from rhapsody.commands.rewind import rewind_command

    return rewind_command(agent, arg)


@command("/clear", "start a new session")
def _cmd_clear(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    if agent.busy:
        return Outcome("wait for the turn to end before starting a new session", error=True)
    forgotten = agent.replace_session(Session.start(agent.session.root, agent.session.spec))
    said = f"; rules allowed for the last session no longer apply ({', '.join(forgotten)})" if forgotten else ""
    return Outcome(f"new session {agent.session.id}{said}", reload=True)


@command("/resume", "[ID]: continue another session of this project (no ID in the app: the picker)")
def _cmd_resume(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    return _resume(agent, arg)


@command("/init", "write a starting AGENTS.md from what the project shows (asks before replacing one)")
def _cmd_init(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    return _init(agent, arg)


@command("/help", "list the commands and keys")
def _cmd_help(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    listed = KEYS if keys is None else keys
    return Outcome("\n".join([f"{k:<13} {v}" for k, v in COMMANDS.items()] + custom_help(agent.session.root) + [""]
                             + [f"{k:<13} {v}" for k, v in listed]))


@command("/quit", "leave rhapsody")
def _cmd_quit(agent: Agent, arg: str, keys: tuple[tuple[str, str], ...] | None) -> Outcome:
    return Outcome(quit=True)
