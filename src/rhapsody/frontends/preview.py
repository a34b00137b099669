"""What a permission question shows: the diff an edit would make, the exact command, the new file.

Shared by the app's approval dialog and plain mode. Control characters are shown escaped
everywhere, so a command holding `\\r` or `ESC[2K` cannot redraw itself as something else.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rhapsody.core.counts import counted
from rhapsody.view.render import visible

LEXERS = {".py": "python", ".js": "javascript", ".ts": "typescript", ".json": "json", ".md": "markdown",
          ".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".sh": "bash", ".rs": "rust", ".go": "go",
          ".html": "html", ".css": "css", ".c": "c", ".h": "c", ".java": "java", ".rb": "ruby"}
MAX_FILE = 2_000_000
SECRET_WHY = "it looks like a secret, or a read rule hides it"


@dataclass(frozen=True)
class Preview:
    """The body of a permission question: text, how to highlight it, and a warning to stress."""

    heading: str
    body: str
    syntax: str = ""
    warning: str = ""


HIDDEN = object()
"""What `_read` gives for a file whose text must not be shown: secret-looking, or hidden by a read rule."""


def preview(tool: str, args: dict[str, Any], root: Path, hidden: tuple[str, ...] = ()) -> Preview:
    """What `tool` with `args` would do, as the human should see it before answering. The current text
    of a file is shown only where `read_file` could show it (`hidden`: the read deny rules), and masked."""
    if tool == "bash":
        return _bash(args)
    if tool == "edit_file":
        return _edit(args, root, hidden)
    if tool == "write_file":
        return _write(args, root, hidden)
    body = json.dumps(args, ensure_ascii=False, indent=2) if args else "(no arguments)"
    return Preview(f"{tool} with these arguments", visible(body), "json")


def _bash(args: dict[str, Any]) -> Preview:
    warning = ""
    if args.get("sandbox") is False:
        why = visible(str(args.get("justification") or "(none given)"))
        warning = f"⚠ sandbox: false: this command runs OUTSIDE the sandbox, with your full permissions. Why: {why}"
    return Preview("the exact command", visible(str(args.get("command", ""))), "bash", warning)


def _read(root: Path, given: str, hidden: tuple[str, ...]) -> tuple[Path | None, str | object | None]:
    """The file under the root and its text (masked); (None, None) outside the root, (path, None) when
    absent, (path, HIDDEN) for a file `read_file` would not show (judged on the path a link leads to)."""
    from rhapsody.core.access.credentials import is_credential
    from rhapsody.core.own_files import inside
    from rhapsody.core.secrets import mask
    from rhapsody.tools.search import readable_hidden

    base = root.resolve()
    target = (base / given).resolve() if given else base
    if not inside(base, target):
        return None, None
    if not target.is_file() or target.stat().st_size > MAX_FILE:
        return target, None
    if readable_hidden(target.relative_to(base).as_posix(), hidden) or is_credential(target, resolved=True):
        return target, HIDDEN
    return target, mask(target.read_text(encoding="utf-8", errors="replace"))


def _edit(args: dict[str, Any], root: Path, hidden: tuple[str, ...]) -> Preview:
    path = str(args.get("path", ""))
    old, new = str(args.get("old", "")), str(args.get("new", ""))
    target, text = _read(root, path, hidden)
    if target is None:
        return Preview(f"edit of {visible(path)}", "(the path is outside the project; the edit will be refused)")
    if text is HIDDEN:
        lines = [f"-{line}" for line in old.splitlines()] + [f"+{line}" for line in new.splitlines()]
        return Preview(f"edit of {visible(path)} (the file's text is not shown: {SECRET_WHY})",
                       visible("\n".join(lines)), "diff")
    if not isinstance(text, str) or not old or old not in text:
        lines = [f"-{line}" for line in old.splitlines()] + [f"+{line}" for line in new.splitlines()]
        why = "file not found" if text is None else "old text not found in the file"
        return Preview(f"edit of {visible(path)} ({why}: the edit will fail)", visible("\n".join(lines)), "diff")
    updated = text.replace(old, new) if args.get("replace_all") else text.replace(old, new, 1)
    return Preview(f"diff of {visible(path)}", visible(unified(text, updated, path)), "diff")


def _write(args: dict[str, Any], root: Path, hidden: tuple[str, ...]) -> Preview:
    path = str(args.get("path", ""))
    content = str(args.get("content", ""))
    target, text = _read(root, path, hidden)
    if target is None:
        return Preview(f"write to {visible(path)}", "(the path is outside the project; the write will be refused)")
    if text is HIDDEN:
        return Preview(f"new content of {visible(path)} (it replaces text that is not shown: {SECRET_WHY})",
                       visible(content), LEXERS.get(target.suffix, ""))
    if not isinstance(text, str):
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        return Preview(f"new file {visible(path)} ({counted(lines, 'line')})", visible(content), LEXERS.get(target.suffix, ""))
    diff = unified(text, content, path)
    return Preview(f"diff of {visible(path)} (whole file rewritten)", visible(diff) or "(no change)", "diff")


def unified(before: str, after: str, path: str) -> str:
    """A unified diff of two texts of one file."""
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 f"a/{path}", f"b/{path}", n=3)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines).rstrip("\n")


def plain_text(tool: str, args: dict[str, Any], root: Path, why: str, hidden: tuple[str, ...] = ()) -> str:
    """The whole question as plain mode prints it."""
    shown = preview(tool, args, root, hidden)
    parts = [f"? {tool} wants to run ({why})"]
    if shown.warning:
        parts.append(f"  {shown.warning}")
    parts.append(f"  {shown.heading}:")
    parts += [f"    {line}" for line in shown.body.splitlines()] or ["    (empty)"]
    return "\n".join(parts)
