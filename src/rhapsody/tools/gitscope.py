"""Which repository git may use for a project: its own, whose every part lies inside it.

A repository that arrives with the project (an archive, a clone) can point git elsewhere:
`core.worktree` at the home folder, a `.git` file whose `gitdir:` names another project,
a `commondir`, `objects/info/alternates` or an included config file outside. git would
then show another project's committed content, or files outside the root. `refusal` says,
in one line, why a repository is refused; every git call rhapsody makes asks it first.

The repository's area is the folder holding the `.git` entry that git finds from the root
(the root itself, or a folder above it when the project is part of a larger repository):
the git directory, the common directory, alternates, config files and the working tree
must all lie inside it. One exception is checked, not assumed: a worktree made by
`git worktree add`, whose git directory is `<common>/worktrees/<name>` with a `gitdir`
file pointing back at this `.git` (a folder outside the project cannot be made to point
back by the project's own files); its common directory then belongs to the area too.

The check also keeps what it found on the way (`Verdict.top`, the working tree, and
`Verdict.names`, every name the config listing holds outside the command line's), so the
call it guards asks git neither again: tools/git.py disables the filter, diff and merge
drivers those names define.

The verdict is kept (`Verdicts`) bound to what the check read: the stat identity (device,
inode, mtime, ctime, size; None for a missing one) of every folder from the root up to the
anchor, the `.git` entry, the git and common directories and every file in them git or the
check reads for discovery (HEAD, config, config.worktree, commondir, gitdir, the
alternates chain), every config file the listing names and every `path =` an include in
them names (found or not), and the user's global config files where git looks for them
(found or not: their names are among the findings). The next call stats those (no git process) and runs the check
again when any differs: a command that plants a `commondir`, rewrites a config or adds a
`.git` between two calls changes the stamp of the file or of the folder that holds it, and
ctime cannot be set back. A stamp within `settle_ns` of the check's start is not trusted
(a file system clock can be coarse), so such a verdict is not kept.

Stdlib only; the git calls themselves are the caller's (`tools/git.py`).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rhapsody.sandbox.gitguard import SMALL_CAP, small_bytes

Git = Callable[..., str]
"""Runs one git command in the root and returns its stdout ('' when it failed)."""
SCOPES = ("local", "worktree")
"""Config scopes that come with the repository (global and system ones are the user's)."""


def refusal(root: Path, git: Git) -> str | None:
    """Why git must not be used for `root` (one line), or None when the repository is its own or there is none."""
    return checked(root, git, [])


@dataclass
class Findings:
    """What a check that let the repository through found: its working tree (None: no repository) and every name
    its config listing holds, in the repository's and the user's scopes (not the command line's)."""

    top: Path | None = None
    names: list[str] = field(default_factory=list)


def checked(root: Path, git: Git, read: list[Path], findings: Findings | None = None) -> str | None:
    """`refusal`, adding to `read` every path whose change could change the verdict or `findings`."""
    findings = Findings() if findings is None else findings
    root = root.resolve()
    read += [root, *root.parents]  # discovery looks for `.git` in each (the anchor's part is trimmed below)
    found = git("rev-parse", "--path-format=absolute", "--show-toplevel", "--absolute-git-dir", "--git-common-dir")
    if len(found.splitlines()) != 3:
        if git("rev-parse", "--git-dir").strip():  # a repository without a working tree: `git log` still reads it
            return f"refused: git finds a repository for {root} but no working tree (core.bare or core.worktree)"
        return None  # not a repository: git calls fail on their own
    top, git_dir, common = (Path(p).resolve() for p in found.splitlines())
    anchor = _anchor(root)
    if anchor is None:
        return f"refused: git finds the repository {git_dir} without a .git entry in or above {root}"
    del read[read.index(anchor) + 1:]
    read += [anchor / ".git", *_git_files(git_dir), *_git_files(common)]
    area = [anchor, *_linked_common(anchor, git_dir, common)]
    for what, path in (("working tree", top), ("git directory", git_dir), ("common directory", common)):
        if not _within(path, area):
            return f"refused: the repository's {what} {path} lies outside {anchor}"
    if top != anchor:
        return f"refused: the repository's working tree is {top}, not {anchor} (core.worktree)"
    findings.top = top
    return _alternates(common, area, read) or _configs(root, git, area, read, findings)


_READ = ("", "HEAD", "config", "config.worktree", "commondir", "gitdir", "objects", "objects/info",
         "objects/info/alternates")
"""What git reads in a git directory to find the repository and its config (and the folders holding them)."""
_INCLUDE = re.compile(r"^\s*path\s*=\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def _git_files(git_dir: Path) -> list[Path]:
    return [git_dir / name if name else git_dir for name in _READ]


def _anchor(root: Path) -> Path | None:
    """The nearest folder at or above `root` with a `.git` entry (where git's discovery stops)."""
    for folder in (root, *root.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return None


def _linked_common(anchor: Path, git_dir: Path, common: Path) -> list[Path]:
    """[common] when `git_dir` is a worktree of `common` that points back at `anchor/.git`, else []."""
    if git_dir.parent != common / "worktrees":
        return []
    try:
        back = small_bytes(git_dir / "gitdir").decode("utf-8", errors="replace").strip()
    except OSError:
        return []
    return [common] if back and (git_dir / back).resolve() == (anchor / ".git").resolve() else []


def _within(path: Path, area: list[Path]) -> bool:
    return any(path == a or a in path.parents for a in area)


def _alternates(common: Path, area: list[Path], read: list[Path]) -> str | None:
    """Object stores the repository borrows from (`objects/info/alternates`, followed recursively by git)."""
    pending, seen = [common / "objects"], set()
    while pending:
        objects = pending.pop()
        if objects in seen:
            continue
        seen.add(objects)
        read += [objects, objects / "info", objects / "info" / "alternates"]
        try:
            text = small_bytes(objects / "info" / "alternates").decode("utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines()[:SMALL_CAP]:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            store = (objects / line.strip('"')).resolve()
            if not _within(store, area):
                return f"refused: the repository borrows objects from {store} (objects/info/alternates), outside {area[0]}"
            pending.append(store)
    return None


def _configs(root: Path, git: Git, area: list[Path], read: list[Path], findings: Findings) -> str | None:
    """Config files of the repository's own scopes (with every include git follows) lie inside the area.
    (git names a config found from the working directory relatively: `file:.git/config`.) The user's global
    files are read too, where git looks for them and as the listing names them: their names are findings."""
    listed = git("config", "--list", "--show-origin", "--show-scope", "-z")
    fields = listed.split("\0")
    read += global_configs()
    for scope, origin, entry in zip(fields[0::3], fields[1::3], fields[2::3]):
        if scope == "command":
            continue
        findings.names.append(entry.split("\n", 1)[0])
        if not origin.startswith("file:"):
            continue
        path = (root / origin[5:]).resolve()
        if scope not in SCOPES:
            read += [path, *_includes(path)]  # the user's own: not its folder, the home folder changes all day
            continue
        if not _within(path, area):
            return f"refused: the repository's config includes {path}, outside {area[0]}"
        read += [path, path.parent, *_includes(path)]
    return None


def global_configs() -> list[Path]:
    """Where git reads the user's global config (tools/git.py passes no GIT_CONFIG_GLOBAL on to it, and turns the
    system file off): `$XDG_CONFIG_HOME/git/config` (or `~/.config/git/config`) and `~/.gitconfig`."""
    home = Path(os.path.expanduser("~"))
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return [xdg / "git" / "config", home / ".gitconfig"]


def _includes(config: Path) -> list[Path]:
    """Every file an include in `config` names, and its folder (a missing one counts once it appears)."""
    try:
        text = small_bytes(config).decode("utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for match in _INCLUDE.finditer(text):
        named = config.parent / os.path.expanduser(match.group(1).strip('"'))
        out += [named, named.parent, named.resolve(), named.resolve().parent]  # a link, and what it names now
    return out


Stamp = tuple[int, int, int, int, int] | None
SETTLE_NS = 2_000_000_000
"""A stamp this close to the check's start is not trusted (coarse file system clocks: 2 s on FAT)."""


def stamps(paths: tuple[Path, ...]) -> tuple[Stamp, ...]:
    """The stat identity of each path (the entry itself, a link not followed), None where it is missing."""
    out: list[Stamp] = []
    for path in paths:
        try:
            st = os.lstat(path)
        except OSError:
            out.append(None)
            continue
        out.append((st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size))
    return tuple(out)


@dataclass(frozen=True)
class Verdict:
    """One check's verdict, what it found on the way (`Findings`; empty for a refused repository) and what it was
    bound to."""

    verdict: str | None
    paths: tuple[Path, ...]
    stamps: tuple[Stamp, ...]
    top: Path | None = None
    names: tuple[str, ...] = ()


class Verdicts:
    """Each root's last verdict, kept while nothing the check read has changed; `checks` counts full checks."""

    def __init__(self, clock: Callable[[], int] = time.time_ns, settle_ns: int = SETTLE_NS) -> None:
        self._clock = clock
        self._settle_ns = settle_ns
        self._kept: dict[Path, Verdict] = {}
        self._lock = threading.Lock()
        self.checks = 0

    def refusal(self, root: Path, git: Git) -> str | None:
        """`refusal(root, git)`, from the kept verdict when every path it read has the stamp it had."""
        return self.found(root, git).verdict

    def found(self, root: Path, git: Git) -> Verdict:
        """The kept verdict for `root` while it holds, else a whole check run now."""
        return self.kept(root) or self.check(root.resolve(), git)

    def check(self, root: Path, git: Git) -> Verdict:
        """Run the whole check now; the verdict is kept unless something it read changed too recently."""
        started = self._clock()
        read: list[Path] = []
        findings = Findings()
        verdict = checked(root, git, read, findings)
        paths = tuple(dict.fromkeys(read))
        found = Verdict(verdict, paths, stamps(paths))
        if verdict is None:
            found = Verdict(verdict, paths, found.stamps, findings.top, tuple(findings.names))
        with self._lock:
            self.checks += 1
            if self.settled(found.stamps, started):
                self._kept[root] = found
            else:
                self._kept.pop(root, None)
        return found

    def settled(self, found: tuple[Stamp, ...], started: int) -> bool:
        """Whether every stamp is older than `started` (a clock reading) by the settle time: trusted to show a change."""
        return all(s is None or max(s[2], s[3]) < started - self._settle_ns for s in found)

    def kept(self, root: Path) -> Verdict | None:
        """The verdict kept for `root` if it still holds (its stamps unchanged, the global config where it was),
        else None."""
        kept = self._kept.get(root.resolve())
        if kept is None or stamps(kept.paths) != kept.stamps:
            return None
        return kept if kept.top is None or set(global_configs()) <= set(kept.paths) else None
