"""Checks on a memory folder: duplicates, dead links and paths, register/card disagreements, staleness."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from rhapsody.tools.git import last_commit_time

COMMENT = re.compile(r"<!--(?:[^<-]|-(?!->)|<(?!!--))*-->")
"""An HTML comment; its body stops at the next `<!--`, so a line of unclosed ones is linear time."""
LINK = re.compile(r"\[[^\]\[]*\]\(([^)#\s\[]+)(?:#[^)\s\[]*)?\)")
"""A Markdown link's target; no part crosses a `[`, so a line of unclosed links is linear time."""
CODE_PATH = re.compile(r"`([\w./-]+/[\w.-]+\.\w+)`")
FILE_REF = re.compile(r"`([\w./-]+\.\w+)`")
REGISTER = re.compile(r"^\s*[-*]\s*\[([^\]]+)\]\((decisions/[^)]+)\)")


@dataclass(frozen=True)
class Finding:
    """One problem in the memory, at file:line."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


def audit(root: Path, path: str, stale_days: int = 30) -> list[Finding]:
    """Duplicates, dead links and paths, register/card disagreements, stale status entries."""
    base = root / path
    if not base.is_dir():
        return [Finding(path, 0, "no memory folder (run `rhapsody memory init`)")]
    findings: list[Finding] = []
    seen: dict[str, tuple[str, int]] = {}
    for file in sorted(base.rglob("*.md")):
        rel = str(file.relative_to(root))
        for n, raw in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            line = COMMENT.sub("", raw)  # examples inside HTML comments are not records
            findings += _dead_references(root, file, rel, n, line)
            key = " ".join(line.split()).lower()
            if len(key) >= 30 and not key.startswith("#"):
                if key in seen:
                    findings.append(Finding(rel, n, f"duplicates {seen[key][0]}:{seen[key][1]}"))
                else:
                    seen[key] = (rel, n)
    return findings + _register_mismatches(root, base) + _same_errors(root, base) + _stale_status(root, base, stale_days)


ERROR_LINE = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Failure|Panic))\b:?\s+(.{6,})")
WHERE = re.compile(r"`|\s\(|\s+(?:at|in|from)\s")
"""Where an error message ends and its location begins (`at parser.py:88`, `(migrate.py:91)`)."""
ERROR_ID = re.compile(r"^\s*(?:E|ERR)-?\d+\s*[:.—–-]?\s*", re.I)


def _error_key(text: str) -> str:
    """An error message with what varies between two reports of it removed (line numbers, addresses, case)."""
    text = re.sub(r"0x[0-9a-f]+|:\d+|\bline \d+", "", text.lower())
    return " ".join(re.sub(r"[`*_\"'.,;()\[\]]", " ", text).split())


def _same_errors(root: Path, base: Path) -> list[Finding]:
    """The same error described in two files: the same error message, or two error cards with one title.

    Dialog logs are left out: they recount errors on purpose. At least one of the two files
    must be in errors/, where each error should have its one primary place.
    """
    seen: dict[str, tuple[str, int, bool]] = {}
    out = []
    for file in sorted(base.rglob("*.md")):
        rel, folder = str(file.relative_to(root)), file.relative_to(base).parts[0]
        if folder == "dialogs":
            continue
        for n, key, label in _error_keys(file, base):
            first = seen.setdefault(key, (rel, n, folder == "errors"))
            if first[0] != rel and (first[2] or folder == "errors"):
                out.append(Finding(rel, n, f"describes the same error as {first[0]}:{first[1]} ({label})"))
    return out


def _error_keys(file: Path, base: Path) -> list[tuple[int, str, str]]:
    keys = []
    in_errors = file.relative_to(base).parts[0] == "errors"
    for n, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        line = COMMENT.sub("", line)
        if in_errors and line.startswith("# ") and len(_error_key(ERROR_ID.sub("", line[2:]))) >= 12:
            title = ERROR_ID.sub("", line[2:]).strip()
            keys.append((n, "title:" + _error_key(title), f"title {title!r}"))
        match = ERROR_LINE.search(line)
        if match:
            message = f"{match.group(1)}: {WHERE.split(match.group(2), 1)[0]}"
            keys.append((n, "error:" + _error_key(message), message.strip()[:80]))
    return keys


def _stale_status(root: Path, base: Path, stale_days: int) -> list[Finding]:
    """Status entries older than `stale_days` whose named files were committed to since."""
    out = []
    now = time.time()
    for entry in sorted((base / "status").glob("*.md")):
        written = last_commit_time(root, entry) or entry.stat().st_mtime
        if now - written < stale_days * 86400:
            continue
        text = entry.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            for target in FILE_REF.findall(line):
                changed = last_commit_time(root, root / target)
                if changed and changed > written:
                    day = time.strftime("%Y-%m-%d", time.gmtime(changed))
                    out.append(Finding(str(entry.relative_to(root)), n, f"{target} changed on {day}, after this entry"))
    return out


def _dead_references(root: Path, file: Path, rel: str, n: int, line: str) -> list[Finding]:
    out = []
    for target in LINK.findall(line):
        if "://" not in target and not (file.parent / target).exists() and not (root / target).exists():
            out.append(Finding(rel, n, f"link to {target} that no longer exists"))
    for target in CODE_PATH.findall(line):
        if not (root / target).exists() and not (file.parent / target).exists():
            out.append(Finding(rel, n, f"path {target} no longer exists"))
    return out


def _register_mismatches(root: Path, base: Path) -> list[Finding]:
    register = base / "DECISIONS.md"
    if not register.is_file():
        return []
    out = []
    for n, line in enumerate(register.read_text(encoding="utf-8").splitlines(), 1):
        match = REGISTER.match(line)
        if match is None or not (base / match.group(2)).is_file():
            continue
        card = base / match.group(2)
        heading = next((l.lstrip("# ").strip() for l in card.read_text(encoding="utf-8").splitlines() if l.startswith("#")), "")
        if heading != match.group(1).strip():
            out.append(Finding(str(register.relative_to(root)), n,
                               f"register says {match.group(1)!r} but {card.relative_to(root)} says {heading!r}"))
    return out
