"""Walking and searching the project without leaving it: find_files' globbing and search_text's engines.

The walk never follows a symbolic link (a folder link is not entered; a file link is
skipped), skips rhapsody's state, VCS and environment folders, secret-looking files and
files a `read_file` deny rule names. A regex search runs as a child process with a time
limit: ripgrep when installed (a linear-time engine), else this module run as
`python -m rhapsody.tools.search`, so a catastrophic pattern is killed, not waited on,
and cancelling the turn kills it too.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from rhapsody.core.access.credentials import is_credential, known
from rhapsody.core.access.permissions import PROTECTED_READS, protected

SKIP_DIRS = {".git", ".rhapsody", "node_modules", "__pycache__", ".venv", "venv"}
MAX_HITS = 2000
SEARCH_SECONDS = 20.0
"""Time limit of one search_text call."""


def glob_match(pattern: str, rel: str) -> bool:
    """Whether the relative POSIX path `rel` matches the glob: `**` any folders (or none), `*`/`?` within a name.

    Matched name by name with memoised steps, so the time is bounded by
    (pattern names x path names) whatever the pattern: no regex built from it can backtrack.
    """
    pat: list[str] = []
    for part in pattern.split("/"):
        if part == "**" and pat[-1:] == ["**"]:
            continue
        pat.append(part)
    names = rel.split("/")

    @functools.lru_cache(maxsize=None)
    def match(i: int, j: int) -> bool:
        if i == len(pat):
            return j == len(names)
        if pat[i] == "**":
            return match(i + 1, j) or (j < len(names) and match(i, j + 1))
        return j < len(names) and fnmatch.fnmatchcase(names[j], pat[i]) and match(i + 1, j + 1)

    return match(0, 0)


def walk(root: Path, start: Path, hidden: tuple[str, ...] = (), credentials: tuple[str, ...] = ()
         ) -> Iterator[tuple[Path, str]]:
    """Regular files under `start` (inside `root`), never through a link nor into a credential location
    (`credentials`: the user's protected paths besides the built-in ones): (path, path relative to root)."""
    guarded = known(credentials)  # `start` passed `confine`, so only entries met on the way need checking
    for folder, dirs, files in os.walk(start, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not os.path.islink(os.path.join(folder, d))
                         and os.path.join(folder, d) not in guarded)
        for name in sorted(files):
            if os.path.join(folder, name) in guarded:
                continue
            path = Path(folder, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink() or not path.is_file() or readable_hidden(rel, hidden):
                continue
            yield path, rel


def readable_hidden(rel: str, hidden: tuple[str, ...]) -> bool:
    """Whether search and listing must leave this file out: secret-looking or named by a read deny rule."""
    return protected(rel) or any(fnmatch.fnmatchcase(rel, p[2:] if p.startswith("./") else p) for p in hidden)


def find(root: Path, pattern: str, hidden: tuple[str, ...] = (), credentials: tuple[str, ...] = ()) -> list[str]:
    """Relative paths of files matching the glob `pattern`."""
    return [rel for _, rel in walk(root, root, hidden, credentials) if glob_match(pattern, rel)]


def python_search(root: Path, target: Path, pattern: str, ignore_case: bool, hidden: tuple[str, ...],
                  credentials: tuple[str, ...] = ()) -> str:
    """Lines matching `pattern` as `path:line:text`; run in a child process (see `main`)."""
    regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    if target.is_file() and not target.is_symlink():
        files: Iterator[tuple[Path, str]] = iter([(target, target.relative_to(root).as_posix())])
    else:
        files = walk(root, target, hidden, credentials)
    hits: list[str] = []
    for path, rel in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                hits.append(f"{rel}:{n}:{line[:400]}")
                if len(hits) >= MAX_HITS:
                    return "\n".join(hits) + f"\n[stopped at {MAX_HITS} matches]"
    return "\n".join(hits)


def ripgrep_argv(rg: str, pattern: str, target: Path, ignore_case: bool) -> list[str]:
    """ripgrep without config files, links or secret-looking files."""
    cmd = [rg, "--no-config", "--line-number", "--no-heading", "--color=never", "--max-count=200",
           "--glob-case-insensitive", "--no-follow"]
    for glob in PROTECTED_READS:
        cmd += ["--glob", f"!{glob}"]
    if ignore_case:
        cmd.append("-i")
    return [*cmd, "--", pattern, str(target)]


def drop_hidden(output: str, root: Path, hidden: tuple[str, ...], credentials: tuple[str, ...] = ()) -> str:
    """ripgrep's lines, paths made relative, minus files search must not show."""
    prefix = str(root) + os.sep
    kept = []
    for line in output.splitlines():
        line = line.removeprefix(prefix)
        rel = line.split(":", 1)[0]
        if not readable_hidden(rel, hidden) and not is_credential(root / rel, credentials, resolved=True):
            kept.append(line)
    return "\n".join(kept)


def main() -> None:
    """Child-process entry: one JSON argument {root, target, pattern, ignore_case, hidden, protected}."""
    job = json.loads(sys.argv[1])
    sys.stdout.write(python_search(Path(job["root"]), Path(job["target"]), job["pattern"], job["ignore_case"],
                                   tuple(job["hidden"]), tuple(job.get("protected", ()))))


if __name__ == "__main__":
    main()
