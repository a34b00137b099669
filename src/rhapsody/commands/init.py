"""`/init`: a starting AGENTS.md written from what the project shows.

It reads only what is on disk (file extensions, pyproject.toml, package.json, a Makefile, Cargo.toml,
go.mod, the nearest `.git`) and guesses; the file says which lines are guesses to check. An AGENTS.md
already there is never overwritten without a yes (`/init` asks, `/init overwrite` is the yes), and a
link is never written through: a cloned repository may carry AGENTS.md as a link to a file outside.
"""

from __future__ import annotations

import json
import os
import stat
import tomllib
from collections import Counter
from pathlib import Path

NAME = "AGENTS.md"
SKIPPED = {".git", ".venv", "venv", "node_modules", ".rhapsody", "__pycache__", "dist", "build", "target", ".tox"}
MAX_FILES = 5000
"""Files looked at for the languages; a large tree is sampled, not walked whole."""

LANGUAGES = {".py": "Python", ".ts": "TypeScript", ".tsx": "TypeScript", ".js": "JavaScript", ".jsx": "JavaScript",
             ".rs": "Rust", ".go": "Go", ".java": "Java", ".kt": "Kotlin", ".rb": "Ruby", ".c": "C", ".h": "C",
             ".cpp": "C++", ".cc": "C++", ".hpp": "C++", ".cs": "C#", ".swift": "Swift", ".php": "PHP",
             ".sh": "shell", ".scala": "Scala", ".ex": "Elixir", ".hs": "Haskell", ".lua": "Lua", ".zig": "Zig"}


def languages(root: Path) -> list[str]:
    """The project's languages by number of files, most first."""
    counts: Counter[str] = Counter()
    seen = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED and not d.startswith("."))
        for name in files:
            language = LANGUAGES.get(Path(name).suffix.lower())
            if language:
                counts[language] += 1
            seen += 1
        if seen >= MAX_FILES:
            break
    return [language for language, _ in counts.most_common()]


def test_commands(root: Path) -> list[str]:
    """Guesses at the command that runs the tests, from the build files present."""
    found: list[str] = []
    pyproject = _toml(root / "pyproject.toml")
    if pyproject is not None and ("pytest" in json.dumps(pyproject) or (root / "tests").is_dir()):
        found.append("python -m pytest")
    scripts = _json(root / "package.json").get("scripts", {})
    if isinstance(scripts, dict) and "test" in scripts:
        found.append("npm test")
    makefile = root / "Makefile"
    if makefile.is_file() and any(line.startswith("test:") for line in _text(makefile).splitlines()):
        found.append("make test")
    for marker, command in (("Cargo.toml", "cargo test"), ("go.mod", "go test ./...")):
        if (root / marker).is_file():
            found.append(command)
    return found


def git_root(root: Path) -> Path | None:
    """The nearest folder at or above `root` holding `.git`."""
    return next((p for p in (root, *root.parents) if (p / ".git").exists()), None)


def agents_text(root: Path) -> str:
    """The starting AGENTS.md for `root`."""
    found = languages(root)
    tests = test_commands(root)
    repo = git_root(root)
    where = ("the project root" if repo == root else f"`{repo}` (above this folder)") if repo else "none found"
    lines = [f"# {root.name}", "", "Notes for coding agents working here (written by `rhapsody /init` from what",
             "the project shows; check each line and keep this file short).", "",
             "## Project", "", f"- Languages: {', '.join(found[:4]) or 'none recognised'}",
             f"- Git repository: {where}", "", "## Commands", ""]
    lines += [f"- Run the tests: `{command}` (a guess from the build files)" for command in tests]
    lines += [] if tests else ["- Run the tests: (not found; say how)"]
    lines += ["", "## Conventions", "", "- (what a newcomer gets wrong here: style, layout, what not to touch)", ""]
    return "\n".join(lines)


def init(root: Path, overwrite: bool = False) -> tuple[str, bool]:
    """Write AGENTS.md; (what to say, whether it asks first because one is there)."""
    path = root / NAME
    try:
        info = path.lstat()
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        return f"{NAME} is not a regular file (a link?); not written", False
    if info is not None and not overwrite:
        return f"{NAME} exists ({info.st_size} bytes); replace it with a new one from what the project shows?", True
    text = agents_text(root)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return f"wrote {path} ({len(text.splitlines())} lines); the agent reads it from the next session", False


def _toml(path: Path) -> dict[str, object] | None:
    try:
        return tomllib.loads(_text(path)) if path.is_file() else None
    except tomllib.TOMLDecodeError:
        return {}


def _json(path: Path) -> dict[str, object]:
    try:
        value = json.loads(_text(path)) if path.is_file() else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:200_000]
    except OSError:
        return ""
