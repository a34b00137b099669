"""The command line: parse arguments, load settings, pick a front end.

Imports stay lazy so `rhapsody --help` starts fast: Textual, the SDK and pydantic load
only when a command needs them. Every error meant for the user is one line on stderr and
exit status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

if TYPE_CHECKING:
    from rhapsody.frontends.hangup import Hangup

T = TypeVar("T")

USAGE_EPILOG = """commands:
  rhapsody strip FILE [--out OUT] [--json]   strip a request body or history offline
  rhapsody stats [SESSION|FILE] [--json]     every seam of a session, and what the seams saved
  rhapsody export [SESSION|FILE] --html|--md [-o FILE]   a session as one HTML page or as Markdown
  rhapsody memory init|stats|audit           project memory in docs/memory/
  rhapsody trust [PATH]                      let PATH's .rhapsody/config.toml raise permissions
  rhapsody mcp list                          MCP servers, their state and their tools
  rhapsody import PATH...                    Claude Code / Codex sessions as rhapsody sessions
  rhapsody rewind [SESSION] --list|--to N    go back to a checkpoint: --files, --conversation or --both
  rhapsody acp [--model M] [--permission-mode MODE]   an Agent Client Protocol agent on stdio, for editors

Without -p, rhapsody opens the full-screen app in the current directory; `rhapsody "PROMPT"` opens it
with PROMPT sent. With -p, text piped to standard input comes first, then TASK:
`git diff | rhapsody -p "review this"`; `-p "/NAME ARGS"` runs the custom command NAME."""


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (the usage is one `--help` away)."""

    def error(self, message: str) -> NoReturn:
        """Print one line and exit with status 2."""
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    from rhapsody.core.access.permissions import MODES

    p = _Parser(
        prog="rhapsody",
        description="A terminal coding agent that narrates every step and keeps its own words across seams.",
        epilog=USAGE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("prompt", nargs="?", metavar="PROMPT", help="the first message, sent as the app opens "
                   "(with -p and no TASK: the task)")
    p.add_argument("-p", "--print", metavar="TASK", dest="task", nargs="?", const="",
                   help="run TASK headless and exit: status 0 done, 2 failed, 3 a limit "
                   "ended it, 4 done but a call was refused because no human could be asked; piped standard "
                   "input comes before TASK; /NAME ARGS expands the custom command NAME")
    p.add_argument("--output-format", choices=("text", "jsonl"), default="text", help="headless output")
    p.add_argument("--provider", choices=("anthropic", "bedrock", "vertex", "openai"),
                   help="where the model runs (openai: any OpenAI-compatible endpoint at OPENAI_BASE_URL)")
    p.add_argument("--model", help="model id in the provider's form (default on anthropic: the newest Sonnet the SDK lists)")
    p.add_argument("--permission-mode", choices=MODES,
                   help="read-only: no writes, bash in a read-only sandbox; plan: as read-only, until you approve "
                   "the plan the agent proposes (then the mode you pick); ask: asks before writes and bash; "
                   "auto-edit: writes in the project and sandboxed bash run unasked; yolo: as auto-edit, and bash "
                   "with sandbox = \"off\" runs unasked too (bash stays sandboxed where the sandbox is on; leaving it "
                   "always asks) (default: ask; auto-edit with -p, where what would ask is refused)")
    p.add_argument("-c", "--continue", dest="continue_last", action="store_true", help="resume the latest session")
    p.add_argument("-r", "--resume", nargs="?", const="", metavar="ID", help="resume session ID (picker without ID)")
    p.add_argument("--demo", action="store_true", help="offline demo on a fresh sample project (not --cwd), no key needed")
    p.add_argument("--plain", action="store_true", help="line-based interface instead of the full-screen app")
    p.add_argument("--handoff-at-tokens", type=int, metavar="N", help="micro-handoff when context passes N tokens")
    p.add_argument("--handoff-at-share", metavar="S", help="micro-handoff at this share of the window (default 0.4; off)")
    p.add_argument("--seam-policy", choices=("checkpoint", "threshold"),
                   help="checkpoint (default): the automatic seam at the first natural pause once it pays; "
                   "threshold: only at --handoff-at-share/--handoff-at-tokens (the net either way)")
    p.add_argument("--context-window", type=int, metavar="N", help="the model's context window in tokens")
    p.add_argument("--thinking", action="store_true", default=None, help="ask for adaptive thinking")
    p.add_argument("--parallel-tools", action="store_true", default=None, help="allow parallel tool calls")
    p.add_argument("--narration-min-words", type=int, metavar="N", help="words required before each tool call")
    p.add_argument("--context", choices=("manual", "rolling"), help="manual (default): tool results stay in context until a micro-handoff; rolling: old tool "
                   "results leave the context in batches, least needed first by the agent's own [keep N] scores")
    p.add_argument("--exact-tokens", action="store_true", default=None, help="exact seam figures via count_tokens")
    p.add_argument("--cwd", metavar="DIR", help="project directory (default: the current directory)")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    return p


def _strip_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rhapsody strip", description="Apply the micro-handoff strip offline.")
    p.add_argument("file", type=Path, help="Messages API request body (JSON) or rhapsody history (JSONL)")
    p.add_argument("--out", type=Path, help="write the stripped request body here")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    return p


def _stats_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rhapsody stats", description="Print every seam of a session.")
    p.add_argument("session", nargs="?", help="session id or prefix, or a history .jsonl file (default: the latest)")
    p.add_argument("--cwd", metavar="DIR", help="project directory")
    p.add_argument("--json", action="store_true", help="print one JSON object (billed_input_tokens, "
                   "billed_input_tokens_without_seams, seam rows, ...)")
    p.add_argument("--cache-read-mult", type=float, metavar="X", help="price cache reads at X× base input "
                   "(default: the model's rate from the price table)")
    p.add_argument("--what-if", metavar="POLICY", help="replay the session with seams every=N tool calls, at=TOKENS "
                   "of context or share=S of the window (comma-separated), or sweep: a curve over several")
    p.add_argument("--context-window", type=int, metavar="N", help="the window the session ran in, in tokens "
                   "(default: RHAPSODY_CONTEXT_WINDOW, else what the history shows, else the model's standard window)")
    p.add_argument("--note-tokens", type=int, metavar="N", help="with --what-if: what each seam leaves in the context "
                   "(default: the project's notes as measured, else what the note caps allow)")
    return p


def _import_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rhapsody import", description="Import Claude Code transcripts and Codex rollouts "
                "(files, or folders searched at any depth) as sessions of this project.")
    p.add_argument("paths", nargs="+", type=Path, help="a .jsonl file or a folder (e.g. ~/.claude/projects/NAME)")
    p.add_argument("--cwd", metavar="DIR", help="project directory (default: the current directory)")
    return p


def _export_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rhapsody export", description="A session as one self-contained HTML page, or as Markdown.")
    p.add_argument("session", nargs="?", help="session id or prefix, or a history .jsonl file (default: the latest)")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--html", dest="fmt", action="store_const", const="html", help="one HTML file (the default)")
    form.add_argument("--md", dest="fmt", action="store_const", const="md", help="Markdown, for an issue")
    p.add_argument("-o", "--output", metavar="FILE", help="where to write ('-': standard output; default: "
                   ".rhapsody/exports/SESSION.html or .md)")
    p.add_argument("--cwd", metavar="DIR", help="project directory")
    return p


def _export(ns: argparse.Namespace) -> int:
    from rhapsody.commands.export import export_text, write_export

    fmt = ns.fmt or "html"
    if ns.output == "-":
        sys.stdout.write(export_text(_root(ns.cwd), ns.session, fmt)[1])
        return 0
    print(write_export(_root(ns.cwd), ns.session, fmt, Path(ns.output) if ns.output else None))
    return 0


def _memory_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rhapsody memory", description="Project memory in git (docs/memory/).")
    p.add_argument("action", choices=("init", "stats", "audit"))
    p.add_argument("--cwd", metavar="DIR", help="project directory")
    p.add_argument("--json", action="store_true", help="stats as one JSON object")
    return p


def _memory(ns: argparse.Namespace) -> int:
    from rhapsody.commands import memory
    from rhapsody.config.settings import load_settings

    root = _root(ns.cwd)
    _dropped(root)
    return memory.main(root, load_settings(root).memory, ns.action, ns.json)


def _trust(args: list[str]) -> int:
    from rhapsody.commands.trust import trust

    p = _Parser(prog="rhapsody trust", description="Trust a project's own .rhapsody/config.toml.")
    p.add_argument("path", nargs="?", help="project directory (default: the current directory)")
    root = _root(p.parse_args(args).path)
    print(f"trusted {root} (in {trust(root)})")
    return 0


def _mcp_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="rhapsody mcp", description="MCP servers configured for a project.")
    p.add_argument("action", choices=("list",))
    p.add_argument("--cwd", metavar="DIR", help="project directory")
    return p


def _mcp(ns: argparse.Namespace) -> int:
    from rhapsody.commands import mcp

    return mcp.main(_root(ns.cwd))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `rhapsody` command."""
    args = list(sys.argv[1:] if argv is None else argv)
    from rhapsody.core.errors import RhapsodyError
    from rhapsody.sandbox.exec_path import keep_absolute

    keep_absolute()  # a project's own `./git` is never found through an empty or relative PATH entry

    sink = ExitStack()
    if args[:1] in SUBCOMMANDS:  # what a subcommand prints carries file contents: it passes the one sink
        from rhapsody.view.sink import terminal

        sink.enter_context(terminal())
    try:
        if args[:1] == ["strip"]:
            from rhapsody.commands import strip

            ns = _strip_parser().parse_args(args[1:])
            return strip.main(ns.file, ns.out, ns.json)
        if args[:1] == ["import"]:
            from rhapsody.commands import import_sessions

            ns = _import_parser().parse_args(args[1:])
            return import_sessions.main(_root(ns.cwd), ns.paths)
        if args[:1] == ["memory"]:
            return _memory(_memory_parser().parse_args(args[1:]))
        if args[:1] == ["trust"]:
            return _trust(args[1:])
        if args[:1] == ["mcp"]:
            return _mcp(_mcp_parser().parse_args(args[1:]))
        if args[:1] == ["export"]:
            return _export(_export_parser().parse_args(args[1:]))
        if args[:1] == ["rewind"]:
            return _rewind(args[1:])
        if args[:1] == ["acp"]:
            return _acp(args[1:])
        if args[:1] == ["stats"]:
            from rhapsody.commands.stats import print_stats

            ns = _stats_parser().parse_args(args[1:])
            if ns.what_if:
                from rhapsody.commands import whatif

                return whatif.main(_root(ns.cwd), ns.session, ns.what_if, ns.json, ns.cache_read_mult, ns.context_window,
                                   ns.note_tokens)
            return print_stats(_root(ns.cwd), ns.session, ns.json, ns.cache_read_mult, ns.context_window)
        return _run(_parser().parse_args(args))
    except RhapsodyError as exc:
        _error(f"rhapsody: {exc}")
        return 2
    except KeyboardInterrupt:
        _error("rhapsody: interrupted")
        return 130
    except OSError as exc:  # a file or folder the user named, or the disk, refused
        where = f"{exc.filename}: " if exc.filename else ""
        _error(f"rhapsody: {where}{exc.strerror or exc}")
        return 2
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, never a traceback
        if os.environ.get("RHAPSODY_DEBUG"):
            raise
        text = " ".join(str(exc).split())[:300]
        _error(f"rhapsody: internal error: {type(exc).__name__}: {text} (RHAPSODY_DEBUG=1 shows the traceback)")
        return 1
    finally:
        sink.close()


SUBCOMMANDS = (["strip"], ["import"], ["memory"], ["trust"], ["mcp"], ["export"], ["rewind"], ["stats"])


def _error(line: str) -> None:
    """One line on stderr through the sink's function (it names files and values a project chose)."""
    from rhapsody.view.sink import visible

    print(visible(line), file=sys.stderr)


def _say(text: str) -> None:
    """Text on stdout through the sink's function once a front end gave the terminal back (a recap quotes the model)."""
    from rhapsody.view.sink import visible

    sys.stdout.write(visible(text))


def _rewind(args: list[str]) -> int:
    from rhapsody.commands import rewind_cli
    from rhapsody.config.settings import load_settings

    p = _Parser(prog="rhapsody rewind", description="Go back to a checkpoint: files, conversation or both.")
    rewind_cli.add_arguments(p)
    ns = p.parse_args(args)
    root = _root(ns.cwd)
    return rewind_cli.main(root, load_settings(root), ns)


def _acp(args: list[str]) -> int:
    """`rhapsody acp`: the editor's client opens sessions; each is built as the app's is, in the session's cwd."""
    from rhapsody.core.access.permissions import MODES
    from rhapsody.frontends.acp import run_acp
    from rhapsody.sandbox.procs import install_exit_cleanup

    p = _Parser(prog="rhapsody acp", description="An Agent Client Protocol agent on standard input and output "
                "(an editor starts it: docs/editors.md).")
    p.add_argument("--provider", choices=("anthropic", "bedrock", "vertex", "openai"), help="where the model runs")
    p.add_argument("--model", help="model id in the provider's form")
    p.add_argument("--permission-mode", choices=MODES, help="the mode new sessions start in (default: ask)")
    ns = p.parse_args(args)
    flags = {"provider": ns.provider, "model": ns.model, "permission_mode": ns.permission_mode}

    def opener(root: Path, resume: str | None, approver: Any, servers: Any) -> Any:
        from rhapsody.config.settings import load_settings
        from rhapsody.providers.pick import make_model
        from rhapsody.wiring import build

        _dropped(root)
        settings = load_settings(root, flags)
        model_id = settings.model
        if model_id is None and resume is None:
            from rhapsody.providers.lazy import default_model

            model_id = default_model()
        wiring = build(root, settings, make_model(settings), model_id, resume=resume, approver=approver,
                       client_mcp=servers)
        _notices(root, settings)
        return wiring

    install_exit_cleanup()
    return run_acp(opener)


def _root(cwd: str | None) -> Path:
    from rhapsody.core.errors import ConfigError

    root = Path(cwd or os.getcwd()).resolve()
    if not root.is_dir():
        raise ConfigError(f"{root} is not a directory")
    return root


def _dropped(root: Path) -> None:
    """One line on stderr per key of the project's config dropped as invalid (it never applies)."""
    from rhapsody.commands.trust import dropped_notices

    for line in dropped_notices(root):
        _error(line)


def _flags(ns: argparse.Namespace) -> dict[str, Any]:
    return {
        "provider": ns.provider,
        "model": ns.model,
        "permission_mode": ns.permission_mode,
        "handoff_at_tokens": ns.handoff_at_tokens,
        "handoff_at_share": ns.handoff_at_share,
        "context_window": ns.context_window,
        "seam_policy": ns.seam_policy,
        "thinking": ns.thinking,
        "parallel_tools": ns.parallel_tools,
        "narration_min_words": ns.narration_min_words,
        "exact_tokens": ns.exact_tokens,
        "context": ns.context,
    }


def _run(ns: argparse.Namespace) -> int:
    if ns.version:
        from rhapsody import __version__

        print(f"rhapsody {__version__}")
        return 0
    ns.typed = None
    if ns.task is not None:
        ns.task, ns.typed = headless_task(ns.task, ns.prompt, _root(ns.cwd))
    if ns.demo:
        return _demo(ns)
    root = _root(ns.cwd)
    _dropped(root)
    if not ns.task and sys.stdin.isatty() and sys.stdout.isatty():
        from rhapsody.commands.trust import offer

        offer(root, _ask_fresh)  # before the settings are read, so a yes applies at once
    if not ns.task and not ns.plain:
        return _app(ns, root, first=ns.prompt or "")
    return launch(ns, root, *_settings_and_model(ns, root), first=ns.prompt or "")


PIPE_WAIT = 3.0
"""Seconds -p waits for piped standard input to say something when a task is given (an idle pipe
inherited from a parent is not the human's input); with no task it waits as long as it takes."""


def headless_task(task: str, prompt: str | None, root: Path) -> tuple[str, str | None]:
    """The task -p runs: piped standard input first, then TASK (or PROMPT), a custom command expanded; and
    what the human wrote of it when a command's prompt holds more (None: all of it)."""
    from rhapsody.core.errors import InputError

    if task and prompt:
        raise InputError("give the task once: either -p TASK or a PROMPT, not both")
    task = task or prompt or ""
    piped = _piped(PIPE_WAIT if task.strip() else None).strip("\n")
    expanded, typed = _expanded(task.strip(), root) if task.strip() else ("", None)
    full = _joined(piped, expanded)
    if not full.strip():
        raise InputError("the task given with -p is empty (give TASK, or pipe text to standard input)")
    return full, None if typed is None else _joined(piped, typed)


def _joined(*parts: str) -> str:
    return "\n\n".join(part for part in parts if part.strip())


def _piped(wait: float | None) -> str:
    """Standard input's text when it is not a terminal ('' when it is, or says nothing within `wait`)."""
    import select

    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # no standard input (closed, or a stand-in without a descriptor)
        return ""
    if os.isatty(fd):
        return ""
    try:
        if wait is not None and not select.select([fd], [], [], wait)[0]:
            return ""
        return sys.stdin.read()
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        from rhapsody.core.errors import InputError

        raise InputError(f"standard input could not be read as text: {exc}") from exc


def _expanded(task: str, root: Path) -> tuple[str, str | None]:
    """A task that is a slash command: a custom command's prompt and its arguments (the words the human
    typed), `/handoff` and other tasks as they are (None); other commands refused."""
    from rhapsody.commands.custom import granting_notice, load
    from rhapsody.commands.slash import COMMANDS, is_command
    from rhapsody.core.errors import InputError

    if not is_command(task) or task.split(maxsplit=1)[0] == "/handoff":
        return task, None
    name, _, arguments = task.partition(" ")
    command = load(root, tuple(COMMANDS))[0].get(name)
    if name in COMMANDS:
        raise InputError(f"{name} is a command of the app and plain mode; -p runs a task, /handoff or a custom command")
    if command is None:
        raise InputError(f"unknown command {name} (no prompt file for it in .rhapsody/commands or .claude/commands)")
    notice = granting_notice(command, root)
    if notice:
        print(f"rhapsody: {notice}", file=sys.stderr)
    return command.expand(arguments.strip()), arguments.strip()


def _hangup() -> Hangup:
    """What a front end does when its terminal goes: stop, save, exit within 2 s (frontends/hangup.py)."""
    from rhapsody.frontends.hangup import Hangup

    return Hangup()


def _demo(ns: argparse.Namespace) -> int:
    """`--demo`: the sample project and the loopback server live as long as the front end."""
    from contextlib import ExitStack

    from rhapsody.demo import DEMO_TASK, WELCOME, demo_setup, project_path

    ns.continue_last, ns.resume = False, None
    with ExitStack() as stack:
        def parts() -> tuple[Any, Any]:
            from rhapsody.config.settings import load_settings

            _root, settings, model = stack.enter_context(demo_setup(ns, load_settings(Path.cwd(), _flags(ns))))
            return settings, model

        if ns.task or ns.plain:
            return launch(ns, project_path(), *parts(), initial=DEMO_TASK, demo=True)
        return _app(ns, project_path(), parts, initial=DEMO_TASK, welcome=WELCOME, demo=True)


def _settings_and_model(ns: argparse.Namespace, root: Path) -> tuple[Any, Any]:
    from rhapsody.config.settings import load_settings
    from rhapsody.providers.pick import make_model

    settings = load_settings(root, _flags(ns))
    return settings, make_model(settings)


def _app(ns: argparse.Namespace, root: Path, parts: Callable[[], tuple[Any, Any]] | None = None,
         initial: str = "", welcome: str = "", demo: bool = False, first: str = "") -> int:
    """The first frame, then the agent built from `parts()` (the settings and the model; default: the
    project's settings and the model of their provider), then the app on that frame (resuming: the app's
    first frame, then the agent, as `RhapsodyApp` boot). `first` is sent as the first message, with any
    lines typed ahead after it."""
    if not _picked(ns, root):
        return 0
    if ns.continue_last or ns.resume:  # nothing to resume: one line, without opening the screen first
        from rhapsody.core.session.history import find_session

        find_session(root, ns.resume or None)
    # A new session is built behind the early frame; a resumed one behind the app's own first frame, which
    # draws the transcript as it loads
    built = None if ns.continue_last or ns.resume else _built(ns, root, parts, welcome)
    import asyncio

    from rhapsody.frontends.app.app import RhapsodyApp

    wired: list[Any] = [built[0]] if built else []

    def boot() -> tuple[Any, Any, Any]:
        settings, model = parts() if parts else _settings_and_model(ns, root)
        wiring, approver = wire(ns, root, settings, model)
        wired.append(wiring)
        return wiring.agent, settings, approver

    async def run() -> None:
        try:
            await app.run_async()
        finally:
            if wired:
                await wired[0].close()

    sent = ((first,) if first.strip() else ()) + typed_ahead()
    with _hangup() as hangup:
        given: dict[str, Any] = ({"agent": built[0].agent, "settings": built[1], "approver": built[2]} if built
                                 else {"boot": boot, "root": root})
        app = RhapsodyApp(**given, initial=initial, welcome=welcome, typed_ahead=sent, hangup=hangup)
        asyncio.run(run())
    if hangup.fired:  # nobody reads a recap now; the history says where it stopped
        hangup.ended()
        return int(app.return_code or hangup.status)
    if app.boot_error is not None:
        raise app.boot_error  # one line from main(), now that the screen is restored
    if wired:
        print_recap(wired[0].agent.session)
    parting = parting_line(wired[0].session, root, demo) if wired else ""
    if parting:
        _say(parting + "\n")
    return app.return_code or 0


def _built(ns: argparse.Namespace, root: Path, parts: Callable[[], tuple[Any, Any]] | None,
           welcome: str) -> tuple[Any, Any, Any]:
    """The session, built behind the app's first screen written straight to the terminal
    (frontends/first_frame.py): Textual is imported after, and its first paint lands on the same cells."""
    from rhapsody.frontends.app.status import decided_welcome, starting_text, welcome_text
    from rhapsody.frontends.first_frame import EarlyFrame

    frame = EarlyFrame(starting_text(root, welcome))
    try:
        settings, model = parts() if parts else _settings_and_model(ns, root)
        from rhapsody.config.settings import permission_mode

        # the welcome's facts are decided by the settings: shown now, while the agent is built from them
        shown = decided_welcome(root, _new_model_id(settings), permission_mode(settings, True), settings,
                                welcome)
        frame.fill(shown)
        wiring, approver = wire(ns, root, settings, model)
    except BaseException:
        frame.hand_over(leave=True)  # the error's one line goes to the screen the shell had
        raise
    built = welcome_text(wiring.agent, settings, welcome)
    if built != shown:  # the agent decided otherwise: the screen says what it holds
        frame.fill(built)
    frame.hand_over()
    return wiring, settings, approver


def print_recap(session: Any) -> None:
    """The app's screen is gone when it ends: a short recap stays in the scrollback."""
    from rhapsody.frontends.recap import recap_text

    _say(recap_text(session.records, session.id, session.figures))


def _ask_fresh(question: str) -> str:
    """`input`, after dropping what was typed before the question was shown: keys typed ahead
    for the app never answer a question about trust."""
    import termios

    try:
        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (termios.error, OSError):
        pass
    return input(question)


def typed_ahead() -> tuple[str, ...]:
    """Lines typed and ended with Enter while rhapsody started, read off the terminal now.

    Until the app puts the terminal in raw mode, the terminal turns Enter into a line feed,
    which the app would read as ctrl+j (a new line in the prompt) and never send. Complete
    lines are all a terminal in line mode lets a program read; a line still being typed
    reaches the prompt through the app as usual. An empty line is an Enter pressed alone: the app sends the
    message it suggests for it (the demo's task), as Enter would in the prompt."""
    import select

    if not sys.stdin.isatty():
        return ()
    fd, data = sys.stdin.fileno(), b""
    try:
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        return ()
    text = data.decode("utf-8", errors="replace")
    printable = "".join(c for c in text if c == "\n" or c == "\t" or c.isprintable())
    return tuple(printable.split("\n")[:-1])  # the complete lines (in line mode, all there is to read)


def _notices(root: Path, settings: Any) -> None:
    """One line each on stderr: an untrusted project config cut down, a sandbox that is off."""
    from rhapsody.commands.trust import start_notices

    for notice in start_notices(root, settings.sandbox):
        _error(notice)


def _picked(ns: argparse.Namespace, root: Path) -> bool:
    """`--resume` without an id: the human picks a session (False: they picked none)."""
    if ns.resume == "" and not ns.task:
        from rhapsody.frontends.app.picker import pick_session

        ns.resume = pick_session(root)
        return ns.resume is not None
    return True


def wire(ns: argparse.Namespace, root: Path, settings: Any, model: Any) -> tuple[Any, Any]:
    """Build the agent for the session the flags name; returns the wiring and the human's approver (None headless)."""
    import gc

    from rhapsody.core.toolbox.approval import HumanApprover
    from rhapsody.sandbox.procs import install_exit_cleanup
    from rhapsody.wiring import build

    resuming = ns.continue_last or ns.resume is not None
    model_id = settings.model if resuming else _new_model_id(settings)  # a resumed one keeps its own
    approver = None if ns.task else HumanApprover()
    wiring = build(root, settings, model, model_id, resume=ns.resume or None, continue_last=ns.continue_last,
                   approver=approver)
    install_exit_cleanup()
    # A resumed session is a large, long-lived heap; keeping it out of the collector's
    # scans removes pauses that otherwise grow with the history.
    gc.freeze()
    return wiring, approver


def _new_model_id(settings: Any) -> str:
    """A new session's model: the settings', else the newest Sonnet the SDK lists."""
    if settings.model is None:
        from rhapsody.providers.lazy import default_model

        return default_model()
    return str(settings.model)


def launch(ns: argparse.Namespace, root: Path, settings: Any, model: Any, initial: str = "", welcome: str = "",
           demo: bool = False, first: str = "") -> int:
    """Wire the agent and hand it to the chosen front end; `first` is sent as the first message."""
    import asyncio

    if not _picked(ns, root):
        return 0
    from rhapsody.frontends.hangup import until_hangup

    with _hangup() as hangup:
        wiring, approver = wire(ns, root, settings, model)
        if ns.task:
            from rhapsody.frontends.headless import run_headless

            _notices(root, settings)
            status = asyncio.run(_closing(wiring, until_hangup(hangup, run_headless(
                wiring.agent, ns.task, ns.output_format, typed=getattr(ns, "typed", None)))))
            if hangup.fired:
                hangup.ended()
            return status
        if ns.plain:
            from rhapsody.frontends.plain import run_plain

            status = asyncio.run(_closing(wiring, until_hangup(hangup, run_plain(wiring.agent, settings, approver,
                                                                                   initial, first=first))))
        else:
            from rhapsody.frontends.app.app import RhapsodyApp

            app = RhapsodyApp(wiring.agent, settings, approver, initial=initial, welcome=welcome,
                              typed_ahead=(first,) if first.strip() else (), hangup=hangup)
            asyncio.run(_closing(wiring, app.run_async()))
            status = app.return_code or 0
    if hangup.fired:
        hangup.ended()
        return status or hangup.status
    if not ns.plain:
        print_recap(wiring.agent.session)
    parting = parting_line(wiring.session, root, demo)
    if parting:
        _say(parting + "\n")
    return status


def parting_line(session: Any, root: Path, demo: bool = False) -> str:
    """What to print when the app or plain mode ends: how to come back, or nothing for a session
    without a turn (whose history file is removed when it holds only its header)."""
    from rhapsody.core.session.history import discard_if_empty

    if demo:
        return "rhapsody demo ended; its sample project is removed. Run `rhapsody` in a project of yours next."
    if not session.conversation.messages:  # no message record: nothing to come back to
        session.writer.close()
        discard_if_empty(session.path)
        return ""
    return (f"session {session.id} saved. Come back to it with: rhapsody --continue"
            + (f" --cwd {root}" if root != Path.cwd() else ""))


async def _closing(wiring: Any, run: Awaitable[T]) -> T:
    """Run a front end, then stop every MCP server it started, however it ended."""
    try:
        return await run
    finally:
        await wiring.close()
