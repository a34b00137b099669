"""Checkpoints of the working tree in a private shadow git repository in the user's state folder.

The shadow lives in `core/userstate.py`'s folder for the project (`~/.local/state/rhapsody/
projects/NAME-KEY/checkpoints/`), never in the project: a cloned project can ship a
`.rhapsody/checkpoints/` whose `commondir` points git at a config naming a filter, and git
would run it outside the sandbox. A `.rhapsody/checkpoints/` an older rhapsody left in the
project is never read (`legacy`); the checkpoints it held are listed as unavailable.

Every git call pins GIT_DIR and GIT_COMMON_DIR to the shadow, GIT_OBJECT_DIRECTORY to its
objects, GIT_WORK_TREE to the project root and a private index file, so the user's `.git`
(index, stash, refs, hooks, config) is never opened and no `commondir` is followed. No
system or global config or attributes file is read, hooks point at /dev/null and the
hardened overrides of tools/git.py apply. Before any call the shadow must hold only what
rhapsody writes (`gitguard.store_refusal`: no file git would follow out of it, no link),
its config must be the exact text rhapsody writes, and its `info/attributes` unsets every
conversion so a blob is the file's bytes.

Speed: the private index is kept between checkpoints, so git's stat cache lists only the
files that changed (`ls-files --modified --others --deleted`); those are re-hashed with
`update-index`, then `write-tree`; the commit is written here, as `commit-tree` would write it.
When nothing changed and the index file is the one the last checkpoint left, that checkpoint's
commit is taken again (one git process in all; none in a tree of at most STAMPS_UNDER entries whose
stamps, every folder's and file's, are those the last scan saw, all settled then: `_unchanged`). In a
tree of WATCH_FROM files or more, the checkpoints between a turn's calls (`tool`, `end`; not `thorough`)
look only at the paths rewind/treewatch.py's events name, so they cost what changed; each turn's
checkpoint, and any the events cannot vouch for, scan it all. Objects are shared by every checkpoint.
Files over the size limit, nested repositories and special files are left out and named. Commits have
no parents and no refs: the history records name them, and `clean` keeps those still wanted (`git
prune` with them as heads).

Stdlib only (plus rhapsody's git hardening).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from rhapsody.core.errors import StorageError
from rhapsody.core.session.history import STATE_DIR, private_dir, write_private
from rhapsody.core.userstate import project_state, project_state_path, state_home
from rhapsody.sandbox import lifeline
from rhapsody.tools.git import STATIC, hardened_env
from rhapsody.tools.gitscope import Stamp, settled, stamps
from rhapsody.sandbox.gitguard import store_refusal
from rhapsody.rewind.treewatch import TreeWatch

CONFIG = ("[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = false\n"
          "\tautocrlf = false\n\tsymlinks = true\n\tpreloadindex = true\n[gc]\n\tauto = 0\n")
"""The shadow's whole config; anything else in that file refuses the shadow."""
EXCLUDE = f"/{STATE_DIR}/\n"
ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding\n"
"""$GIT_DIR/info/attributes outranks every .gitattributes in the tree: no conversion of any file."""
AUTHOR = {"GIT_AUTHOR_NAME": "rhapsody", "GIT_AUTHOR_EMAIL": "rhapsody@localhost",
          "GIT_COMMITTER_NAME": "rhapsody", "GIT_COMMITTER_EMAIL": "rhapsody@localhost"}
TIMEOUT = 300.0
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
OWN = {"": frozenset({"HEAD", "config", "objects", "refs", "info", "rhapsody-index", "rhapsody-index.lock",
                      "rhapsody-cleaned"}),
       "info": frozenset({"exclude", "attributes"}), "objects/info": frozenset()}
"""Everything rhapsody writes in those folders of the shadow (objects/ and refs/ aside): anything else refuses it."""
WATCH_FROM = 2_000
"""Files in the index from which the checkpoints between a turn's calls look only where the tree's events say."""
STAMPS_UNDER = 500
"""Entries (files, links and folders) a tree has at most for a checkpoint to look at its stamps before asking git: a
scan in Python costs what `ls-files` costs at about 800 (`bench/checkpoint_bench.py --unchanged`), and a tree that
changed pays for both."""
MAX_PATHS = 500
"""Changed paths passed to git at most; more and the tree is scanned whole."""
PINNED = [*STATIC, ("core.bare", "false"), ("core.attributesFile", os.devnull)]


class CheckpointError(StorageError):
    """A checkpoint could not be taken or read; one line saying why."""


LeftOut = tuple[str, int, str, int]
"""A file a checkpoint left out: path, size in bytes, why, modification time (ns; 0 for a nested repository)."""


@dataclass(frozen=True)
class Snapshot:
    """One checkpoint: the commit, and what it left out."""

    commit: str
    left_out: list[LeftOut] = field(default_factory=list)


@dataclass(frozen=True)
class Change:
    """One path that differs between two checkpoints: its mode on each side ('' where absent), the new blob."""

    path: str
    old_mode: str
    new_mode: str
    new_blob: str


class Shadow:
    """The shadow repository of one project root."""

    def __init__(self, root: Path, max_file_bytes: int = 5 * 1024 * 1024,
                 clock: Callable[[], int] = time.time_ns) -> None:
        self.root = root
        self.max_file_bytes = max_file_bytes
        self.home = project_state_path(root)
        self.git_dir = self.home / "checkpoints"
        self.index = self.git_dir / "rhapsody-index"
        self.exclude = _exclude(root)
        self._checked = False
        self._watch: TreeWatch | None = None
        self._left: list[LeftOut] = []
        """What the last checkpoint left out (a scan limited to the changed paths keeps the rest)."""
        self._last: tuple[tuple[int, ...] | None, str] | None = None
        """The index file's stamp after the last checkpoint, and its commit: the next one that finds nothing
        changed and the same index file takes that commit again."""
        self._seen: tuple[dict[str, Stamp], tuple[int, ...] | None] | None = None
        """A small tree's stamps just before the last checkpoint's whole scan, all settled then, and the index file's
        stamp after it: while both are the same, `ls-files` would list nothing (`_unchanged`)."""
        self._pending: tuple[dict[str, Stamp], int, int] | None = None
        self._unscanned = False
        """No stamp scan for this tree: it is large, or holds a nested repository (whose `.git` git reads)."""
        self._clock = clock
        """The wall clock in ns, which file systems stamp by (a test gives its own)."""

    # -- setup --------------------------------------------------------------------------

    def ensure(self) -> None:
        """Create the shadow on first use; refuse one whose config rhapsody did not write."""
        with self._locked():
            self._ensure()

    def _ensure(self) -> None:
        if not os.path.lexists(self.git_dir):
            self._create()
        why = store_refusal(self.git_dir, OWN)
        for name, text in (("config", CONFIG), ("info/exclude", self.exclude), ("info/attributes", ATTRIBUTES)):
            if why is None and self._own_file(name) != text.encode():
                why = f"refusing {self.git_dir}: its {name} is not the one rhapsody writes"
        if why is not None:
            raise CheckpointError(f"{why} (remove that folder to start checkpoints afresh)")
        self._checked = True

    def _create(self) -> None:
        """Build the shadow beside its place, then rename it there: a kill leaves none or a whole one. Built by
        hand, as `git init --bare --template=` lays one out (no git process): HEAD, the config, objects/, refs/."""
        building = self.git_dir.with_name(self.git_dir.name + ".new")
        if os.path.islink(building):
            os.unlink(building)
        elif os.path.lexists(building):
            shutil.rmtree(building)  # left by a kill while it was built
        for folder in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
            private_dir(building / folder)
        write_private(building / "HEAD", "ref: refs/heads/main\n")  # no branch is ever made: commits have no refs
        write_private(building / "config", CONFIG)
        private_dir(building / "info")
        write_private(building / "info" / "exclude", self.exclude)
        write_private(building / "info" / "attributes", ATTRIBUTES)
        os.rename(building, self.git_dir)

    def _own_file(self, name: str) -> bytes:
        try:
            fd = os.open(self.git_dir / name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return b""
        with os.fdopen(fd, "rb") as f:
            return f.read(len(CONFIG) + len(self.exclude) + 1) if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else b""

    # -- checkpoint ---------------------------------------------------------------------

    def snapshot(self, message: str, thorough: bool = True) -> Snapshot:
        """Record the working tree now (tracked and untracked files that are not ignored).

        One snapshot at a time per project (a lock every rhapsody process takes), so an
        `index.lock` found while holding it was left by a process killed mid-write: it goes."""
        with self._locked():
            self._ensure()
            stale = self.index.with_name(self.index.name + ".lock")
            if stale.exists():
                stale.unlink()
            try:
                return self._snapshot(message, thorough)
            except BaseException:
                self._watch, self._last, self._seen = None, None, None  # what it saw is not in the index: scan all next
                raise

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One rhapsody at a time creates the shadow or takes a checkpoint (threads and processes alike)."""
        try:
            lock = project_state(self.root) / "checkpoints.lock"
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise CheckpointError(f"checkpoint: cannot lock {self.git_dir}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _snapshot(self, message: str, thorough: bool) -> Snapshot:
        listed, partial = self._listed(thorough)
        if not listed and self._last is not None and self._last[0] == _stamp(self.index):
            self._seen = self._settled()
            return Snapshot(self._last[1], list(self._left))  # the index is the tree the last commit holds
        update, drop, left_out = self._sort(dict.fromkeys(listed))
        if partial is not None:  # what was left out elsewhere still is
            left_out = [x for x in self._left if not _under(x[0], partial)] + left_out
        if update:
            # --replace: a file that became a folder (or the other way) takes the old entry's place
            self._git("update-index", "--add", "--remove", "--replace", "-z", "--stdin",
                      stdin=b"\0".join(update) + b"\0")
        if drop:
            self._git("update-index", "--force-remove", "-z", "--stdin", stdin=b"\0".join(drop) + b"\0")
        tree = self._git("write-tree").decode().strip()
        commit = self._commit(tree, message)
        self._last, self._left = (_stamp(self.index), commit), left_out
        self._seen = self._settled()
        return Snapshot(commit, left_out)

    def _listed(self, thorough: bool) -> tuple[list[bytes], set[str] | None]:
        """What the index may not hold as it is in the tree; with the changed paths it was limited to, or None
        when the whole tree was scanned (`thorough`, no watch, or a change the watch cannot vouch for)."""
        paths = self._watch.changed() if self._watch is not None else None
        scoped = paths is not None and "" not in paths and len(paths) <= MAX_PATHS and not any(
            p.rsplit("/", 1)[-1] == ".gitignore" for p in paths)
        if thorough or paths is None or not scoped:
            if paths is None:
                self._watch = TreeWatch.start(self.root) if _entries(self.index) >= WATCH_FROM else None
            if self._watch is None and self._unchanged():
                return [], None
            found = self._git("ls-files", "-z", "--others", "--modified", "--deleted", "--exclude-standard")
            return [p for p in found.split(b"\0") if p], None
        assert paths is not None
        if not paths:
            return [], set()
        found = self._git("ls-files", "-z", "--others", "--modified", "--deleted", "--exclude-standard", "--",
                          *sorted(paths))
        return [p for p in found.split(b"\0") if p], paths

    def _unchanged(self) -> bool:
        """A small tree's whole scan without git: whether every folder and file stands as it stood just before the
        last checkpoint's scan (when all had settled) and the index file is the one that left. `ls-files` finds a
        change by the same stat fields (a write, a new, moved or deleted name, a mode, a link), so it would list
        nothing. The stamps are kept for this checkpoint, taken before git looks: what changes after is seen next."""
        self._pending = None
        if self._unscanned:
            return False
        started = self._clock()
        try:
            scanned = _tree_stamps(self.root, STAMPS_UNDER)
        except OSError:  # a folder that cannot be read, or went as it was read: git scans it, as before
            return False
        if scanned is None:
            self._unscanned = True
            return False
        found, newest_file = scanned
        found.update(_excludes_stamps())
        self._pending = found, started, newest_file
        return self._seen is not None and self._seen == (found, _stamp(self.index))

    def _settled(self) -> tuple[dict[str, Stamp], tuple[int, ...] | None] | None:
        """This checkpoint's stamps with the index file's, if every stamp had stood long enough before the scan to
        show any later change (tools/gitscope.py's rule: 50 ms on a local file system that stamps in nanoseconds,
        else 2 s); else None, and the next checkpoint asks git."""
        pending, self._pending = self._pending, None
        if pending is None:
            return None
        found, started, newest_file = pending
        if not settled(found.values(), started):
            return None
        index = _stamp(self.index)
        if index is None or newest_file // 1_000_000_000 >= index[2] // 1_000_000_000:
            return None  # git reads such a "racily clean" file again each time (a write through a memory map shows)
        return found, index

    def _commit(self, tree: str, message: str) -> str:
        """Store the commit of `tree` as `git commit-tree TREE -m MESSAGE` would (no parent, rhapsody as author and
        committer, the local time and offset): a loose object written here, one git process fewer a checkpoint."""
        now = time.time()
        offset = time.localtime(now).tm_gmtoff // 60
        when = f"{int(now)} {'-' if offset < 0 else '+'}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"
        who = f"{AUTHOR['GIT_AUTHOR_NAME']} <{AUTHOR['GIT_AUTHOR_EMAIL']}> {when}"
        body = f"tree {tree}\nauthor {who}\ncommitter {who}\n\n{message}".encode()
        body += b"\n" if message and not message.endswith("\n") else b""  # as `-m` ends its line
        raw = b"commit %d\0" % len(body) + body
        name = hashlib.sha1(raw, usedforsecurity=False).hexdigest()
        folder = self.git_dir / "objects" / name[:2]
        final = folder / name[2:]
        if not os.path.lexists(final):
            private_dir(folder)
            fd, part = tempfile.mkstemp(prefix="tmp_obj_", dir=folder)  # git's own name: `prune` clears one left
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(zlib.compress(raw, 1))
                os.chmod(part, 0o444)
                os.replace(part, final)  # whole or not there: a reader never sees half of it
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(part)
                raise
        return name

    def _sort(self, paths: dict[bytes, None]) -> tuple[list[bytes], list[bytes], list[LeftOut]]:
        """Paths to (re)hash, paths to take out of the index, and what is left out and why."""
        update: list[bytes] = []
        drop: list[bytes] = []
        left_out: list[LeftOut] = []
        for raw in paths:
            name = os.fsdecode(raw)
            if raw.endswith(b"/"):
                left_out.append((name.rstrip("/"), 0, "a nested repository", 0))
                continue
            try:
                info = os.lstat(self.root / name)
            except (FileNotFoundError, NotADirectoryError):  # a folder on its way may be a file now
                update.append(raw)  # deleted: --remove takes it out
                continue
            if stat.S_ISREG(info.st_mode) and info.st_size > self.max_file_bytes:
                drop.append(raw)
                left_out.append((name, info.st_size, f"over {self.max_file_bytes / 1024 / 1024:g} MB", info.st_mtime_ns))
            elif stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
                update.append(raw)
        return update, drop, left_out

    def take(self, label: str, thorough: bool = True) -> tuple[str, list[LeftOut]]:
        """The Checkpointer protocol (core/session/checkpoints.py): the commit and what was left out."""
        try:
            snap = self.snapshot(label, thorough)
        except OSError as exc:
            raise CheckpointError(f"checkpoint: {exc.filename or self.git_dir}: {exc.strerror or exc}") from None
        return snap.commit, snap.left_out

    # -- reading ------------------------------------------------------------------------

    def has(self, commit: str) -> bool:
        """Whether the commit and its tree are in the shadow (not cleaned away)."""
        try:
            self._git("cat-file", "-e", f"{commit}^{{tree}}")
        except CheckpointError:
            return False
        return True

    def existing(self, commits: list[str]) -> set[str]:
        """Which of `commits` are still in the shadow, in one git call."""
        if not commits:
            return set()
        out = self._git("cat-file", "--batch-check", stdin="".join(f"{c}\n" for c in commits).encode())
        found = (line.split() for line in out.decode().splitlines())
        return {parts[0] for parts in found if len(parts) == 3 and parts[1] == "commit"}  # else "NAME missing"

    def changes(self, old: str, new: str) -> list[Change]:
        """Every path whose content or mode differs from checkpoint `old` to `new`."""
        out = self._git("diff-tree", "-r", "-z", "--raw", "--no-renames", "--no-ext-diff", old or EMPTY_TREE, new)
        parts = out.split(b"\0")
        changes = []
        for head, raw in zip(parts[0::2], parts[1::2]):
            fields = head.decode().lstrip(":").split()
            if len(fields) >= 5:
                changes.append(Change(os.fsdecode(raw), _mode(fields[0]), _mode(fields[1]),
                                      "" if set(fields[3]) == {"0"} else fields[3]))
        return changes

    def line_counts(self, old: str, new: str) -> list[tuple[str, int, int]]:
        """Per changed path, lines added and removed (binary files count 0)."""
        out = self._git("diff-tree", "-r", "-z", "--numstat", "--no-renames", "--no-ext-diff", "--no-textconv",
                        old or EMPTY_TREE, new)
        counts = []
        for entry in out.split(b"\0"):
            fields = entry.split(b"\t", 2)
            if len(fields) == 3:
                added, removed = (int(x) if x.isdigit() else 0 for x in fields[:2])
                counts.append((os.fsdecode(fields[2]), added, removed))
        return counts

    def blobs(self, shas: list[str]) -> dict[str, bytes]:
        """The bytes of each blob."""
        if not shas:
            return {}
        out = self._git("cat-file", "--batch", stdin="".join(f"{s}\n" for s in shas).encode())
        found: dict[str, bytes] = {}
        pos = 0
        for sha in shas:
            end = out.index(b"\n", pos)
            size = int(out[pos:end].split()[2])
            found[sha] = out[end + 1:end + 1 + size]
            pos = end + 2 + size
        return found

    # -- retention ----------------------------------------------------------------------

    def size_bytes(self) -> int:
        """Bytes of the shadow's object store."""
        total = 0
        for folder, _, files in os.walk(self.git_dir / "objects"):
            total += sum(os.lstat(os.path.join(folder, f)).st_size for f in files)
        return total

    def prune(self, keep: list[str], grace: str = "1.hour.ago") -> None:
        """Remove every object not reachable from `keep` or the index; objects younger than `grace` stay
        (a checkpoint another session is taking has no record yet). `keep` is held by refs while git prunes."""
        refs = [f"refs/rhapsody-keep/{i}" for i in range(len(keep))]
        self._git("update-ref", "--stdin", stdin="".join(f"update {r} {c}\n" for r, c in zip(refs, keep)).encode())
        try:
            self._git("prune", f"--expire={grace}")
        finally:
            self._git("update-ref", "--stdin", stdin="".join(f"delete {r}\n" for r in refs).encode())

    # -- git ----------------------------------------------------------------------------

    def _git(self, *args: str, stdin: bytes | None = None, extra: dict[str, str] | None = None) -> bytes:
        if not self._checked:
            self.ensure()  # no git call reads a shadow whose config could name a program
        env = hardened_env(PINNED)
        env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_SYSTEM=os.devnull, GIT_ATTR_NOSYSTEM="1", **(extra or {}))
        env.update(GIT_DIR=str(self.git_dir), GIT_COMMON_DIR=str(self.git_dir), GIT_WORK_TREE=str(self.root),
                   GIT_OBJECT_DIRECTORY=str(self.git_dir / "objects"), GIT_INDEX_FILE=str(self.index))
        try:
            done = lifeline.run(["git", "--no-pager", *args], cwd=self.root, env=env,
                                input=stdin, capture_output=True, timeout=TIMEOUT)  # dies with rhapsody, as every git call
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CheckpointError(f"checkpoint: git {args[0]}: {exc}") from None
        if done.returncode != 0:
            lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
            raise CheckpointError(f"checkpoint: git {args[0]}: {lines[-1] if lines else 'failed'}")
        return done.stdout


def _under(path: str, changed: set[str]) -> bool:
    return any(path == p or path.startswith(p + "/") for p in changed)


def _entries(index: Path) -> int:
    """How many entries the index file's header counts (0 for none or a header it cannot read)."""
    try:
        with open(index, "rb") as f:
            head = f.read(12)
    except OSError:
        return 0
    return int.from_bytes(head[8:12], "big") if len(head) == 12 and head[:4] == b"DIRC" else 0


def _tree_stamps(root: Path, limit: int) -> tuple[dict[str, Stamp], int] | None:
    """The stamp of the root and of every folder and entry below it (a link not followed; the project's own `.git`
    and rhapsody's folder at the top left out, as the scan leaves them), and the newest modification time of a
    file or link among them. None past `limit` entries, or where a folder below the top holds a `.git`: whether
    that is a nested repository, which the scan leaves out whole, git decides by reading it. OSError where a
    folder cannot be read."""
    top = os.lstat(root)
    found: dict[str, Stamp] = {"": (top.st_dev, top.st_ino, top.st_mtime_ns, top.st_ctime_ns, top.st_size)}
    newest = 0
    folders = [""]
    while folders:
        rel = folders.pop()
        with os.scandir(os.path.join(root, rel) if rel else root) as entries:
            for entry in entries:
                if entry.name == ".git":
                    if rel:
                        return None
                    continue
                if not rel and entry.name == STATE_DIR and entry.is_dir(follow_symlinks=False):
                    continue  # the scan's exclude, `/.rhapsody/`, is a folder's: a file of that name is scanned
                path = f"{rel}/{entry.name}" if rel else entry.name
                st = entry.stat(follow_symlinks=False)
                found[path] = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
                if len(found) > limit:
                    return None
                if stat.S_ISDIR(st.st_mode):
                    folders.append(path)
                else:
                    newest = max(newest, st.st_mtime_ns)
    return found, newest


def _excludes_stamps() -> dict[str, Stamp]:
    """The stamps of the user's own excludes file, which git reads beside the tree's `.gitignore` files (its
    default place: no global config is read to move it); keys no path in the tree can have."""
    places = [os.environ.get("XDG_CONFIG_HOME", ""), os.path.join(os.environ.get("HOME", ""), ".config")]
    files = tuple(Path(place) / "git" / "ignore" for place in places if place)
    return {f"\0excludes{number}": stamp for number, stamp in enumerate(stamps(files))}


def _stamp(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size


def _mode(text: str) -> str:
    return "" if set(text) == {"0"} else text


def _exclude(root: Path) -> str:
    """The shadow's info/exclude: the project's `.rhapsody/`, and the state folder when it lies in the project
    (rhapsody run in the home folder)."""
    home, resolved = state_home().resolve(), root.resolve()
    inside = resolved in home.parents
    return EXCLUDE + (f"/{home.relative_to(resolved).as_posix()}/\n" if inside else "")


def legacy(root: Path) -> bool:
    """Whether the project holds a `.rhapsody/checkpoints/` (an older rhapsody's, or planted): never read."""
    return os.path.lexists(root / STATE_DIR / "checkpoints")
