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

The check also says what it found on the way: `Verdict.top`, the working tree (kept with the
verdict: it is what the stamped discovery files say), and `Verdict.names`, every name the
config listing holds outside the command line's, for the call that ran the check only (a kept
verdict has none: config can change in ways no stamp shows, so the next call lists it again).
tools/git.py disables the filter, diff and merge drivers those names define.

The verdict is kept (`Verdicts`) bound to what the check read: the stat identity (device,
inode, mtime, ctime, size; None for a missing one) of every folder from the root up to the
anchor, the `.git` entry, the git and common directories and every file in them git or the
check reads for discovery (HEAD, config, config.worktree, commondir, gitdir, the
alternates chain), every config file the listing names and every `path =` an include in
them names (found or not). The next call stats those (no git process) and runs the check
again when any differs: a command that plants a `commondir`, rewrites a config or adds a
`.git` between two calls changes the stamp of the file or of the folder that holds it, and
ctime cannot be set back. A stamp within `settle_ns` of the check's start is not trusted
(a change in the same tick of the file system's clock could leave it as it was: 50 ms on a local
file system that stamps in nanoseconds, 2 s elsewhere), so such a verdict is not kept.

Stdlib only; the git calls themselves are the caller's (`tools/git.py`).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterable
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
    its config listing holds, in the repository's and the user's scopes (not the command line's). `unsettled`: git
    found no repository where a `.git` entry is, which a change no stamp shows can mend (a HEAD put back, a
    format version or an owner set right): such a verdict is never kept."""

    top: Path | None = None
    names: list[str] = field(default_factory=list)
    unsettled: bool = False


def checked(root: Path, git: Git, read: list[Path], findings: Findings | None = None) -> str | None:
    """`refusal`, adding to `read` every path whose change could change the verdict or `findings`. A layout the
    check cannot follow (a link loop, a NUL in a path where git stops reading) refuses the repository in one line:
    git would read it otherwise than the check did."""
    try:
        return _checked(root.resolve(), git, read, Findings() if findings is None else findings)
    except (ValueError, RuntimeError, OSError) as exc:
        return f"refused: the repository for {root} cannot be followed here ({exc})"


def _checked(root: Path, git: Git, read: list[Path], findings: Findings) -> str | None:
    read += [root, *root.parents]  # discovery looks for `.git` in each (the anchor's part is trimmed below)
    found = git("rev-parse", "--path-format=absolute", "--show-toplevel", "--absolute-git-dir", "--git-common-dir")
    if len(found.splitlines()) != 3:
        if git("rev-parse", "--git-dir").strip():  # a repository without a working tree: `git log` still reads it
            return f"refused: git finds a repository for {root} but no working tree (core.bare or core.worktree)"
        findings.unsettled = _anchor(root) is not None
        return None  # not a repository: git calls fail on their own
    if "\ufffd" in found:
        return f"refused: git finds a repository for {root} at a path that is not UTF-8"
    top, git_dir, common = (Path(p).resolve() for p in found.splitlines())
    anchor = _anchor(root)
    if anchor is None:
        return f"refused: git finds the repository {git_dir} without a .git entry in or above {root}"
    del read[read.index(anchor) + 1:]
    read += [*_named(anchor / ".git"), *_git_files(git_dir), *_git_files(common)]
    read += [*_pointed(anchor / ".git", "gitdir:"), *_pointed(git_dir / "commondir", "")]
    area = [anchor, *_linked_common(anchor, git_dir, common)]
    for what, path in (("working tree", top), ("git directory", git_dir), ("common directory", common)):
        if not _within(path, area):
            return f"refused: the repository's {what} {path} lies outside {anchor}"
    if top != anchor:
        return f"refused: the repository's working tree is {top}, not {anchor} (core.worktree)"
    findings.top = top
    return (_links(git_dir, read) or _links(common, read) or _alternates(common, area, read)
            or _configs(top, git, area, read, findings))


WALKED = ("refs", "logs", "rr-cache")
"""Folders of a git directory whose every entry git may write through (a ref, a reflog, a recorded resolution),
walked whole."""
READ_ONLY = frozenset({"hooks", "info", "description", "config"})
"""Entries of a git directory that rhapsody's git calls never write through (hooks never run; a config file is
checked where it leads by `_configs`): a link there is the user's own arrangement."""
MAX_ENTRIES = 100_000
"""Entries looked at, at most: a git directory with more (loose refs, reflogs) is refused, not vouched for."""


def _links(git_dir: Path, read: list[Path]) -> str | None:
    """A link among the git directory's own entries, in `objects/`, or anywhere under `refs/` and `logs/`: git
    writes through it (a reflog appended to a shell's start-up file, a branch of another repository moved, an
    outside file truncated as COMMIT_EDITMSG). Each folder looked in is read, so a link planted later is seen."""
    pending, seen = [git_dir, git_dir / "objects", *(git_dir / name for name in WALKED)], 0
    pending.reverse()  # the git directory's own entries and objects/ first
    while pending:
        folder = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        read.append(folder)
        for entry in entries:
            seen += 1
            if seen > MAX_ENTRIES:
                return f"refused: the repository's {git_dir.name} holds more than {MAX_ENTRIES:,} entries to look at"
            if entry.is_symlink() and not (folder == git_dir and entry.name in READ_ONLY):
                return f"refused: the repository's {Path(entry.path).relative_to(git_dir.parent)} is a link"
            if entry.is_dir(follow_symlinks=False) and folder != git_dir and folder.name != "objects":
                pending.append(Path(entry.path))
    return None


_READ = ("", "HEAD", "config", "config.worktree", "commondir", "gitdir", "objects", "objects/info",
         "objects/info/alternates")
"""What git reads in a git directory to find the repository and its config (and the folders holding them)."""


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
        for line in text.split("\n")[:SMALL_CAP]:
            if not line or line.startswith("#"):  # git: a comment in the first column only
                continue
            if line != line.strip() or line.startswith('"') or any(c in line for c in ("\\", "\ufffd", "\0")):
                return f"refused: the repository's objects/info/alternates has a line git reads otherwise: {line!r}"
            read += _route(objects, line)
            store = (objects / line).resolve()
            if not _within(store, area):
                return f"refused: the repository borrows objects from {store} (objects/info/alternates), outside {area[0]}"
            pending.append(store)
    return None


def _configs(top: Path, git: Git, area: list[Path], read: list[Path], findings: Findings) -> str | None:
    """Config files of the repository's own scopes (with every include git follows) lie inside the area. git names
    a config relatively to the working tree's top (`file:.git/config`, `file:.git/../cfg/inc`: its working folder
    is the top), and lists each include as an entry of the file that holds it, its condition met or not and its
    file there or not: each one named is read (stamped) as git would name it, link by link, and resolved."""
    listed = git("config", "--list", "--show-origin", "--show-scope", "-z")
    fields = listed.split("\0")
    for scope, origin, entry in zip(fields[0::3], fields[1::3], fields[2::3]):
        if scope == "command":
            continue
        key, _, value = entry.partition("\n")
        findings.names.append(key)
        if scope not in SCOPES:
            continue
        if "=" in key or "\ufffd" in key:  # `-c` would split it; a byte git wrote that is not UTF-8
            return f"refused: the repository's config has a name no override can be given for: {key!r}"
        if not origin.startswith("file:"):
            continue
        if "\ufffd" in origin + value:
            return f"refused: the repository's config names a path that is not UTF-8: {origin[5:]!r}"
        written = top / origin[5:]
        path = written.resolve()
        if not _within(path, area):
            return f"refused: the repository's config includes {path}, outside {area[0]}"
        read += [*_named(written), path, path.parent]
        lowered = key.lower()
        if lowered == "include.path" or lowered.startswith("includeif.") and lowered.endswith(".path"):
            if value.startswith(("%(", "/proc/", "/dev/fd/")):  # expanded by git, or named from git's own process
                return f"refused: the repository's config includes {value!r}, which git would expand on its own"
            named = Path(os.path.expanduser(value))
            named = named if named.is_absolute() else written.parent / named  # relative to the file as git names it
            target = named.resolve()
            if not _within(target, area):  # its condition met or not: a branch switch would meet it
                return f"refused: the repository's config includes {target}, outside {area[0]}"
            read += [*_named(named), target, target.parent]
    return None


def _pointed(file: Path, prefix: str) -> list[Path]:
    """Every step of the path a discovery file names (a `.git` file's `gitdir:`, a `commondir`), as git names
    it: a link on the way retargeted changes a stamp, where its resolved form would not."""
    try:
        text = small_bytes(file).decode("utf-8", errors="replace").strip() if os.path.isfile(file) else ""
    except OSError:
        return []
    if not text.startswith(prefix):
        return []
    if "\0" in text:
        raise ValueError(f"{file.name} holds a NUL byte")  # git stops reading there: `checked` refuses
    return _route(file.parent, text[len(prefix):].strip())


def _route(base: Path, written: str) -> list[Path]:
    """Each folder and file on the way from `base` to `written` (relative to it, or absolute), link by link."""
    out: list[Path] = []
    path = base
    for part in Path(written).parts:
        path = path / part
        out += _named(path)
    return out


def _named(path: Path) -> list[Path]:
    """`path` and its folder, then each link it leads through and its folder (a link retargeted anywhere on the
    way changes a stamp), up to git's own limit of links."""
    out = [path, path.parent]
    for _ in range(40):
        try:
            target = os.readlink(path)
        except OSError:
            return out
        path = path.parent / target
        out += [path, path.parent]
    return out


Stamp = tuple[int, int, int, int, int] | None
SETTLE_NS = 2_000_000_000
"""A stamp this close to the check's start is not trusted (coarse file system clocks: 2 s on FAT)."""
FINE_SETTLE_NS = 50_000_000
"""The same on a file system that stamps from the kernel's own clock in nanoseconds (FINE_KINDS): that clock lags
the one `started` reads by a tick or so (at most 6.9 ms in 20,000 changes under load, with 4 ms ticks), so a
change after the check began gets a later stamp than one that stood this long before it."""
FINE_KINDS = frozenset({"tmpfs", "ext4", "ext3", "ext2", "xfs", "btrfs", "f2fs", "overlay"})
"""Local file systems whose stamps come from the kernel's clock in nanoseconds (ext4 with small inodes keeps
whole seconds, which `settle_ns` sees). A network or FUSE file system takes its stamps from another clock."""


def settle_ns(stamp: tuple[int, int, int, int, int], kinds: dict[int, str]) -> int:
    """How long `stamp` must have stood before the check to be trusted to show any later change: FINE_SETTLE_NS
    where its file system (`kinds`: device → type, as `mount_kinds` reads them) is one of FINE_KINDS and both its
    times have a fraction of a second, else SETTLE_NS."""
    fine = kinds.get(stamp[0]) in FINE_KINDS and stamp[2] % 1_000_000_000 != 0 and stamp[3] % 1_000_000_000 != 0
    return FINE_SETTLE_NS if fine else SETTLE_NS


def settled(found: Iterable[Stamp], started: int) -> bool:
    """Whether every stamp is older than `started` (a clock reading) by its file system's settle time (`settle_ns`):
    trusted to show any later change. The mount table is read only when a stamp is younger than SETTLE_NS."""
    recent = [s for s in found if s is not None and max(s[2], s[3]) >= started - SETTLE_NS]
    kinds = mount_kinds() if recent else {}
    return all(max(s[2], s[3]) < started - settle_ns(s, kinds) for s in recent)


def mount_kinds() -> dict[int, str]:
    """Each mounted device's file system type, from /proc/self/mountinfo (read afresh: a device number freed by
    an unmount can come back as another file system); empty where it cannot be read."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            return kinds_of(f.read(4 * 1024 * 1024))
    except OSError:
        return {}


def kinds_of(mountinfo: str) -> dict[int, str]:
    """`mount_kinds` of the text of a mountinfo file: a line it cannot read names nothing (its device then
    settles in SETTLE_NS)."""
    kinds: dict[int, str] = {}
    for line in mountinfo.splitlines():
        fields, _, rest = line.partition(" - ")
        numbers, kind = fields.split(" "), rest.split(" ", 1)[0]
        if len(numbers) < 3 or numbers[2].count(":") != 1 or not kind:
            continue
        major, minor = numbers[2].split(":")
        if major.isascii() and major.isdigit() and minor.isascii() and minor.isdigit() and \
                len(major) < 10 and len(minor) < 10:  # as the kernel prints them; os.makedev takes 32 bits
            device = os.makedev(int(major), int(minor))
            kinds[device] = kind if kinds.get(device, kind) == kind else ""  # two kinds for one device: neither
    return kinds


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
    """One check's verdict, what it found on the way (`Findings`: no working tree and no names for a refused
    repository or none) and what it was bound to."""

    verdict: str | None
    paths: tuple[Path, ...]
    stamps: tuple[Stamp, ...]
    top: Path | None = None
    names: tuple[str, ...] | None = None
    """None: not listed by this call (a kept verdict, no repository, a refusal); the caller lists the config."""


class Verdicts:
    """Each root's last verdict, kept while nothing the check read has changed; `checks` counts full checks."""

    def __init__(self, clock: Callable[[], int] = time.time_ns, settle_ns: int | None = None) -> None:
        self._clock = clock
        self._settle_ns = settle_ns
        self._kept: dict[Path, Verdict] = {}
        self._lock = threading.Lock()
        self.checks = 0

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
        listed = tuple(findings.names) if verdict is None and findings.top is not None else None
        found = Verdict(verdict, paths, stamps(paths), findings.top if verdict is None else None, listed)
        keep = self.settled(found.stamps, started) and not findings.unsettled  # the mount table read outside the lock
        with self._lock:
            self.checks += 1
            if keep:
                self._kept[root] = dataclasses.replace(found, names=None)  # listed again by the next call
            else:
                self._kept.pop(root, None)
        return found

    def settled(self, found: tuple[Stamp, ...], started: int) -> bool:
        """Whether every stamp is older than `started` (a clock reading) by its settle time (the one given, else its
        file system's: `settle_ns`): trusted to show a change."""
        if self._settle_ns is not None:
            return all(s is None or max(s[2], s[3]) < started - self._settle_ns for s in found)
        return settled(found, started)

    def kept(self, root: Path) -> Verdict | None:
        """The verdict kept for `root` if it still holds (its stamps unchanged), else None; it names no config."""
        kept = self._kept.get(root.resolve())
        return kept if kept is not None and stamps(kept.paths) == kept.stamps else None
