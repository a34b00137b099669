"""ctrl+g: edit the prompt's draft in $VISUAL or $EDITOR, as a shell's ctrl+x ctrl+e does.

The draft goes to a private temporary file (mode 0600), the app steps out of the way while the
editor runs, and the file's text comes back as the draft; the file is removed either way. The
editor holds the terminal meanwhile: were the terminal to go, it gets SIGHUP from rhapsody, as a
shell would give it, and dies with rhapsody (frontends/hangup.py, sandbox/lifeline.py).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from textual.app import App, SuspendNotSupported

from rhapsody.frontends import hangup
from rhapsody.sandbox import lifeline


def editor_command() -> list[str]:
    """The person's editor: $VISUAL, then $EDITOR, then vi."""
    return shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")


def edit_in_editor(app: App[Any], draft: str) -> str:
    """The draft after the person edited it; raises OSError when the editor cannot start."""
    fd, name = tempfile.mkstemp(prefix="rhapsody-prompt-", suffix=".md")
    path = Path(name)
    hangup.leftovers.add(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(draft)
        argv = [*editor_command(), str(path)]
        try:
            with app.suspend():
                run_editor(argv)
        except SuspendNotSupported:  # no terminal to hand over (a test's headless driver): run it as it is
            run_editor(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return path.read_text(encoding="utf-8").rstrip("\n")
    finally:
        path.unlink(missing_ok=True)
        hangup.leftovers.discard(name)


def run_editor(argv: list[str], **kwargs: Any) -> None:
    """Run the editor to its end, known to the hangup as the child that holds the terminal."""
    with subprocess.Popen(argv, preexec_fn=lifeline.preexec(), **kwargs) as proc:
        hangup.foreground.add(proc.pid)
        try:
            proc.wait()
        finally:
            hangup.foreground.discard(proc.pid)
