"""`rhapsody rewind [SESSION] --list | --to N [--files|--conversation|--both]`: rewind without the app.

`--list` only reads. `--to N` reopens the session (its history gets the records a rewind in
the app writes), finishes a restore a kill cut short, then rewinds; files changed outside
rhapsody since point N stop it (exit 1, naming them) unless `--force`. `--json` prints one
JSON object. A usage error (no such point, no such session) is one line and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rhapsody.config.settings import Settings
from rhapsody.core.session.context import Conversation
from rhapsody.core.errors import InputError
from rhapsody.core.session.history import named_session, read_session, sessions
from rhapsody.core.session.session import Session
from rhapsody.rewind.rewind import What, finish_interrupted, rewind, turns, turns_of
from rhapsody.view.sink import json_line


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments."""
    p.add_argument("session", nargs="?", help="session id or prefix, or a history .jsonl file (default: the latest)")
    p.add_argument("--cwd", metavar="DIR", help="project directory")
    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--list", action="store_true", help="the points to rewind to: each human message, its files "
                     "changed and +/- lines")
    act.add_argument("--to", type=int, metavar="N", help="rewind to point N of --list")
    what = p.add_mutually_exclusive_group()
    for name in ("files", "conversation", "both"):
        what.add_argument(f"--{name}", dest="what", action="store_const", const=name,
                          help=f"restore {name}" + (" (the default)" if name == "both" else ""))
    p.add_argument("--force", action="store_true", help="overwrite files changed outside rhapsody since then")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def main(root: Path, settings: Settings, ns: argparse.Namespace) -> int:
    """Run the command; returns the exit status."""
    from rhapsody.wiring import shadow

    path = named_session(root, ns.session)
    read = read_session(path, typed=ns.list)  # a bad file is one line naming it, as stats and export say it
    store = shadow(root, settings)
    if ns.list:  # parsed once, for the records and the conversation
        listed = turns_of(read.typed, Conversation.of(read.typed).abandoned, store)
        _print({"session": path.stem, "points": [t.json() for t in listed]} if ns.json else None,
               [t.line() for t in listed] or ["no checkpoints in this session"])
        return 0
    if path.resolve() not in {p.resolve() for p in sessions(root)}:  # a file named from elsewhere: read, never rewound
        raise InputError(f"{path} is not a session of this project: --to rewinds one of its own (--list reads any)")
    session = Session.resume(root, path)
    finished = finish_interrupted(session, store)
    listed = turns(session, store)
    if not 1 <= ns.to <= len(listed):
        raise InputError(f"no point {ns.to}: this session has {len(listed)} (rhapsody rewind --list shows them)")
    what: What = ns.what or "both"
    done = rewind(session, store, listed[ns.to - 1], what, ns.force)
    lines = [line for line in (finished, done.text) if line]
    if done.error:
        print(f"rhapsody rewind: {done.text}" + ("; --force overwrites them" if "outside" in done.text else ""),
              file=sys.stderr)
        return 1
    again = [f"the message, to edit and send again:\n{done.prompt}"] if done.prompt else []
    _print({"session": session.id, "to": ns.to, "what": what, "said": done.text, "prompt": done.prompt}
           if ns.json else None, lines + again)
    return 0


def _print(as_json: dict[str, Any] | None, lines: list[str]) -> None:
    print(json_line(as_json) if as_json is not None else "\n".join(lines))
