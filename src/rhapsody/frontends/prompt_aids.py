"""What the prompt offers: the project's input history, `/command` and `@path` completions.

Shared by the app and plain mode. The input history lives in `.rhapsody/prompt_history`
(one JSON string a line, newest last); file paths come from `git ls-files`, so git-ignored
files are left out.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from rhapsody.core.session.history import read_plain, state_dir

HISTORY_FILE = "prompt_history"
HISTORY_KEEP = 1000
MAX_FILES = 20000
ARTEFACT_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", "node_modules", ".mypy_cache", ".pytest_cache",
                           ".ruff_cache", ".tox", ".nox", ".venv", ".eggs"})
ARTEFACT_SUFFIXES = (".pyc", ".pyo", ".class", ".o", ".egg-info")
"""Build and cache artefacts `@` never offers, git-ignored or not."""


class InputHistory:
    """The lines typed in this project, oldest first; Up walks back, Down forward."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lines = _read(self.path)
        self.position = len(self.lines)
        self.draft = ""

    @property
    def path(self) -> Path:
        """Where the history is kept."""
        return self.root / ".rhapsody" / HISTORY_FILE

    def add(self, line: str) -> None:
        """Remember a sent line (on disk at once)."""
        if self.keep(line):
            try:
                state_dir(self.root)
                _append(self.path, json.dumps(line, ensure_ascii=False) + "\n")
            except OSError:
                pass  # an unwritable project loses the history, never the line

    def keep(self, line: str) -> bool:
        """Remember a line for Up in memory only (a draft cleared away is never written); False if not new."""
        new = bool(line.strip()) and (not self.lines or self.lines[-1] != line)
        if new:
            self.lines.append(line)
        self.position = len(self.lines)
        self.draft = ""
        return new

    def back(self, current: str) -> str | None:
        """The previous line, or None at the oldest."""
        if self.position == len(self.lines):
            self.draft = current
        if self.position == 0:
            return None
        self.position -= 1
        return self.lines[self.position]

    def forward(self) -> str | None:
        """The next line (the draft after the newest), or None when already there."""
        if self.position >= len(self.lines):
            return None
        self.position += 1
        return self.draft if self.position == len(self.lines) else self.lines[self.position]


class HistorySearch:
    """ctrl+r over the input history, as a shell's reverse-i-search: the newest line holding the query,
    ctrl+r again for an older one; the draft comes back when the search is abandoned."""

    def __init__(self, lines: list[str], draft: str) -> None:
        self.lines = lines
        self.draft = draft
        self.query = ""
        self.found: int | None = None
        """The index of the line shown (None: no line holds the query)."""

    def match(self) -> str:
        """The line the search shows: the match, else the draft."""
        return self.draft if self.found is None else self.lines[self.found]

    def type(self, query: str) -> str:
        """A new query: the newest line holding it."""
        self.query = query
        self.found = self._find(len(self.lines))
        return self.match()

    def older(self) -> str:
        """The next older line holding the query (stays on the oldest)."""
        start = len(self.lines) if self.found is None else self.found
        self.found = self._find(start) if self._find(start) is not None else self.found
        return self.match()

    def _find(self, before: int) -> int | None:
        return next((i for i in range(before - 1, -1, -1) if self.query.lower() in self.lines[i].lower()), None)

    def title(self) -> str:
        """What the prompt's border says while searching."""
        state = "" if self.found is not None or not self.query else " (no match)"
        return f"reverse-i-search `{self.query}`{state} · ctrl+r older · enter keep · esc back"


def _append(path: Path, text: str) -> None:
    """Append to a regular file of rhapsody's own, never through a link (a cloned repository may
    carry `.rhapsody/prompt_history` as a link to a file outside, such as a shell start-up file)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise OSError("not a file of rhapsody's own")
        f.write(text)


def _read(path: Path) -> list[str]:
    try:
        raw = read_plain(path).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []
    lines = []
    for item in raw[-HISTORY_KEEP:]:
        try:
            value = json.loads(item)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            continue
        if isinstance(value, str):
            lines.append(value)
    return lines


def command_matches(text: str, root: Path | None = None, names: list[str] | None = None) -> list[str]:
    """Slash commands that start with what was typed (with `root`, the custom commands too), out of
    `names` when given (`command_names` read once by the caller)."""
    word = text.split(" ", 1)[0]
    return [name for name in (command_names(root) if names is None else names) if name.startswith(word)]


def command_names(root: Path | None) -> list[str]:
    """The built-in commands, then the custom ones of the project and the user (commands/custom.py)."""
    from rhapsody.commands.slash import COMMANDS  # not at the top: the prompt paints before the commands load

    if root is None:
        return list(COMMANDS)
    from rhapsody.commands.custom import load

    return [*COMMANDS, *sorted(load(root, tuple(COMMANDS))[0])]


def project_files(root: Path) -> list[str]:
    """The project's files, git-ignored ones and build or cache artefacts left out (a plain walk outside git)."""
    from rhapsody.tools.git import GitError, run_git  # hardened: the repository's own programs never run

    try:
        listing = run_git(root, "ls-files", "-co", "--exclude-standard", "-z")
    except GitError:
        return _walk(root)
    return [p for p in listing.split("\0") if p and not artefact(p)][:MAX_FILES]


def artefact(path: str) -> bool:
    """Whether a project-relative path is a build or cache artefact (`__pycache__/x.pyc`, `.git/…`)."""
    parts = path.split("/")
    return any(part in ARTEFACT_DIRS or part.endswith(ARTEFACT_SUFFIXES) for part in parts)


def _walk(root: Path) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not artefact(d)]
        found += [p for p in (os.path.relpath(os.path.join(folder, f), root) for f in files) if not artefact(p)]
        if len(found) > MAX_FILES:
            break
    return found


def fuzzy(query: str, paths: list[str], limit: int = 8) -> list[str]:
    """Paths holding the query's characters in order, best first (basename hits, then short)."""
    q = query.lower()
    scored = []
    for path in paths:
        score = _score(q, path.lower())
        if score is not None:
            scored.append((score, len(path), path))
    return [p for _, _, p in sorted(scored)[:limit]]


def _score(q: str, path: str) -> int | None:
    if not q:
        return 0
    name = path.rsplit("/", 1)[-1]
    if q in name:
        return 0 if name.startswith(q) else 1
    if q in path:
        return 2
    position = 0
    for ch in q:
        position = path.find(ch, position) + 1
        if position == 0:
            return None
    return 3


def at_token(text: str) -> str | None:
    """The `@path` word being typed at the end of `text`, without the @; None when there is none."""
    word = text.rsplit(None, 1)[-1] if text and not text[-1].isspace() else ""
    return word[1:] if word.startswith("@") else None
