"""The history file: an append-only JSONL record of every event of a session.

Each record is one line `{"v": 1, "seq", "ts", "kind", ...}` written with a single
`write`, flushed and fsynced, in a file of mode 0600. On open, a file whose last byte is
not a newline (a torn write) gets one, so the next record cannot merge with the torn one.
On read, a line that does not parse is skipped and counted; the last line torn by a crash
is expected and silent; a record that parses but has fields of the wrong type (see
records.py) refuses the whole file with a one-line error naming its line, because skipping
it could leave a conversation the API refuses. Every record is parsed into its type once,
on write (a record of the wrong shape is a bug, refused before a byte is written) or on
read. Nothing is ever rewritten. See docs/history-format.md.

Imports: stdlib and rhapsody.core only; records.py (pydantic) on first use, so the
prompt's input history reaches the first frame without pydantic.
"""

from __future__ import annotations

import errno
import gc
import json
import os
import secrets
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from rhapsody.core.errors import HistoryError, StorageError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from rhapsody.core.session.records import Record

R = TypeVar("R", bound="BaseModel")

VERSION = 1
STATE_DIR = ".rhapsody"


def state_dir(root: Path) -> Path:
    """The project's `.rhapsody/` folder, created with a `.gitignore` so git never sees it."""
    folder = private_dir(root / STATE_DIR)
    ignore = folder / ".gitignore"
    if not os.path.lexists(ignore):
        _write_new(ignore, b"*\n")
    elif ignore.is_symlink():
        raise StorageError(f"refusing {ignore}: a symbolic link (rhapsody never writes its state through a link)")
    return folder


def history_dir(root: Path) -> Path:
    """Where the project's session histories live."""
    return private_dir(state_dir(root) / "history")


def private_dir(folder: Path) -> Path:
    """`folder`, created with any missing parents as mode 0700 whatever the umask.

    Raises StorageError with one line when it cannot be created (a read-only or full
    file system, a file in the way, no permission).
    """
    _refuse_links(folder)
    missing = [folder, *folder.parents]
    missing = missing[: next((i for i, p in enumerate(missing) if p.is_dir()), len(missing))]
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        for created in missing:
            os.chmod(created, 0o700)  # mkdir's mode is masked by the umask; chmod is not
    except OSError as exc:
        raise StorageError(f"cannot create {folder}: {_why(exc)}") from None
    return folder


def write_private(path: Path, text: str) -> None:
    """Write `path` as mode 0600, never through a symbolic link; StorageError with one line when it cannot."""
    _write_new(path, text.encode("utf-8"))


def write_private_bytes(path: Path, data: bytes) -> None:
    """`write_private` for bytes (a stored image)."""
    _write_new(path, data)


def _refuse_links(folder: Path) -> None:
    """StorageError when `folder`, or a folder above it up to the state folder, is a symbolic link:
    a cloned project can commit `.rhapsody` (or `.rhapsody/history`) as a link to anywhere."""
    for path in [folder, *folder.parents]:
        if path.is_symlink():
            raise StorageError(f"refusing {path}: a symbolic link (rhapsody never writes its state through a link)")
        if path.name == STATE_DIR or STATE_DIR not in folder.parts:
            return


def _write_new(path: Path, data: bytes) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            _write_all(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {_why(exc)}") from None


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte: a regular file takes a short write when the disk fills, then ENOSPC."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def new_session_id() -> str:
    """A session id that sorts by time and is never reused: the UTC second, then six hex digits, the first
    three the millisecond (zero-padded, so two sessions begun in one second sort in the order they began:
    "latest" is the later one) and three random."""
    now = time.time()
    millisecond = int(now * 1000) % 1000
    return f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime(now))}-{millisecond:03x}{secrets.randbelow(4096):03x}"


class HistoryWriter:
    """Appends records to one history file; every append is on disk when it returns."""

    def __init__(self, path: Path, next_seq: int = 0) -> None:
        self.path = path
        self.seq = next_seq
        self._fd = -1
        private_dir(path.parent)
        try:
            nofollow = os.O_NOFOLLOW if STATE_DIR in path.parts else 0  # a project's state is never a link
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | nofollow, 0o600)
            os.chmod(path, 0o600)
            self._terminate_torn_line()
        except OSError as exc:
            self.close()
            raise StorageError(f"cannot write history {path}: {_why(exc)}") from None

    def _terminate_torn_line(self) -> None:
        size = os.fstat(self._fd).st_size
        if size == 0:
            return
        with open(self.path, "rb") as f:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                _write_all(self._fd, b"\n")
                os.fsync(self._fd)

    def append(self, record: R) -> R:
        """Write one record, numbered and dated, and fsync it; returns it as written.

        The record is a model (records.py), checked when it was built, so no record of the
        wrong shape reaches the disk. A failed write (a full disk, an I/O error) closes the
        writer and raises StorageError: the record may be torn on disk, which the reader
        tolerates, and every later append fails too, so nothing is ever written after a torn
        record in the same run.
        """
        from rhapsody.core.session.records import dump, stamped

        written = stamped(record, VERSION, self.seq, round(time.time(), 3))
        if self._fd < 0:
            raise StorageError(f"history {self.path} is closed after an earlier failure; resume the session to go on")
        try:
            _write_all(self._fd, _encode(dump(written)))
            os.fsync(self._fd)
        except OSError as exc:
            self.close()
            raise StorageError(f"cannot write history {self.path}: {_why(exc)}; what was written before is "
                               "kept: free space and resume with --continue") from None
        self.seq += 1
        return written

    def close(self) -> None:
        """Close the file; further appends fail."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def write_history(path: Path, records: list[dict[str, Any]]) -> None:
    """Write a whole new history file at once: records numbered from 0, written to a hidden
    temporary file beside `path`, fsynced, then renamed, so `path` is either complete or absent.

    Each record needs `kind` and `ts`; `v` and `seq` are set here. StorageError with one line
    when it cannot be written (the temporary file is removed).
    """
    from rhapsody.core.session.records import parse

    private_dir(path.parent)
    numbered = [{"v": VERSION, "seq": i, **record} for i, record in enumerate(records)]
    for record in numbered:  # InvalidRecord before a byte is written, as `HistoryWriter.append` does
        parse(record)
    data = b"".join(_encode(record) for record in numbered)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.part")
    try:
        _write_new(temp, data)
        fd = os.open(temp, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, path)
    except OSError as exc:
        raise StorageError(f"cannot write history {path}: {_why(exc)}") from None
    finally:
        if os.path.lexists(temp):
            os.unlink(temp)


def _encode(record: dict[str, Any]) -> bytes:
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: keep it, escaped, rather than fail
        return (json.dumps(record, separators=(",", ":")) + "\n").encode("ascii")


@dataclass
class HistoryRead:
    """What reading a history file found."""

    records: list[dict[str, Any]] = field(default_factory=list)
    typed: list[Record] = field(default_factory=list)
    """Each record parsed into its type (see records.py), in the same order; read with `typed=True` only."""
    lines: list[int] = field(default_factory=list)
    """The line number (from 1) of each record, for errors that name it."""
    skipped: int = 0
    first_skipped: int = 0
    """The line number of the first line skipped (0: none)."""
    torn_tail: bool = False


def read_history(path: Path, typed: bool = False) -> HistoryRead:
    """Read every record; malformed lines are skipped and counted, a torn tail noted.

    Every record is parsed into its type, which refuses one of the wrong shape. With `typed`
    the types are kept (`HistoryRead.typed`, for a fold); without, they are let go as soon as
    checked, so a caller that wants the JSON pays no memory (and no collector time) for them.
    """
    try:
        data = read_plain(path)
    except OSError as exc:
        raise HistoryError(f"cannot read history {path}: {exc.strerror}") from None
    result = HistoryRead()
    lines = data.split(b"\n")
    with collector_paused():
        _read_lines(path, lines, result, typed)
    return result


def _read_lines(path: Path, lines: list[bytes], result: HistoryRead, keep: bool) -> None:
    from rhapsody.core.session.records import InvalidRecord, parse

    last = len(lines) - 1
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        record = parse_line(raw)
        if record is None:
            if i == last:
                result.torn_tail = True
            else:
                result.skipped += 1
                result.first_skipped = result.first_skipped or i + 1
            continue
        version = record.get("v", 1)
        if isinstance(version, int) and version > VERSION:
            raise HistoryError(
                f"{path.name} was written by a newer rhapsody (history v{version}, this reads v{VERSION})"
            )
        try:
            checked = parse(record)
        except InvalidRecord as exc:
            raise HistoryError(f"{path.name} line {i + 1}: {exc}") from None
        if keep:
            result.typed.append(checked)
        result.records.append(record)
        result.lines.append(i + 1)


def read_leniently(data: bytes) -> HistoryRead:
    """Every record of a history file's bytes that reads as its type, typed; a line that is no JSON record, or a
    record of the wrong shape, is skipped and counted instead of refusing the file as `read_history` does.

    The one reader that must survive a malformed file (docs/history-format.md, "Readers that survive a
    malformed file"): the session picker lists every history of the project, and one torn, hand-edited or
    hostile file must cost its own line in the list, never the list. `records` holds each line's JSON
    object (the picker says why a file is no history from them), `typed` the records that read."""
    from rhapsody.core.session.records import InvalidRecord, parse

    result = HistoryRead()
    lines = data.split(b"\n")
    with collector_paused():
        for i, raw in enumerate(lines):
            record = parse_line(raw) if raw.strip() else None
            if record is None:
                result.torn_tail = result.torn_tail or (i == len(lines) - 1 and bool(raw.strip()))
                result.first_skipped = result.first_skipped or (i + 1 if raw.strip() and i < len(lines) - 1 else 0)
                continue
            result.records.append(record)
            result.lines.append(i + 1)
            try:
                result.typed.append(parse(record))
            except InvalidRecord:
                result.skipped += 1
    return result


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused for a bulk read: reading a history makes tens of
    thousands of objects and no cycles, so every collection pass over them is wasted work
    (a third of the time to resume a 12 MB history; docs/performance.md)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def parse_line(raw: bytes) -> dict[str, Any] | None:
    """One line of a history file as a record (a dict with a string `kind`), or None when it is none."""
    try:
        record = json.loads(raw.decode().removeprefix("\ufeff"))  # decoded here: json.loads sniffs each line's encoding
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return None
    if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
        return None
    return record


def named_session(root: Path, session_id: str | None) -> Path:
    """The history a command names: a .jsonl file, else a session id or prefix, else the latest with a turn."""
    given = Path(session_id) if session_id else None
    return given if given is not None and given.is_file() else find_session(root, session_id)


def read_session(path: Path, typed: bool = False) -> HistoryRead:
    """A history file a command reads whole; HistoryError, one line naming the file and what is wrong, when it is
    not a rhapsody history (every command answers a bad file with this line: stats, export, rewind, the picker)."""
    read = read_history(path, typed)
    why = not_history(read)
    if why:
        raise HistoryError(f"{path} is not a rhapsody history file ({why})")
    return read


def not_history(read: HistoryRead) -> str:
    """What makes a read file no rhapsody history ('' when it is one): no record, or no session record first."""
    if read.records and read.records[0]["kind"] == "session":
        return ""
    if read.records:
        return f"line {read.lines[0]} is a {read.records[0]['kind']!r} record; a history starts with its session record"
    if read.first_skipped:
        return f"line {read.first_skipped} is not a JSON record with a 'kind'"
    return "a partial line only" if read.torn_tail else "it is empty"


def sessions(root: Path) -> Iterator[Path]:
    """The project's history files, oldest first."""
    folder = root / STATE_DIR / "history"
    if folder.is_dir() and not folder.is_symlink() and not folder.parent.is_symlink():
        yield from sorted(p for p in folder.glob("*.jsonl") if not p.is_symlink())  # never a link out of the project


def find_session(root: Path, session_id: str | None) -> Path:
    """The history file of `session_id`, or when None the newest with a turn (a message):
    a session opened and closed without one is never "latest"."""
    found = list(sessions(root))
    if session_id is None:
        newest = next((p for p in reversed(found) if has_turns(p) and not started_by_another(p)), None)  # stops at one
        found = [newest] if newest else []
    if not found:
        raise HistoryError(f"no sessions{' with a turn' if session_id is None else ''} in "
                           f"{root / STATE_DIR / 'history'}")
    if session_id is None:
        return found[-1]
    matches = [p for p in found if p.stem == session_id or p.stem.startswith(session_id)]
    if len(matches) != 1:
        raise HistoryError(f"no single session matches {session_id!r} ({len(matches)} found)")
    return matches[0]


def read_plain(path: Path) -> bytes:
    """The bytes of a regular file; in a project's state folder never through a link (a cloned
    repository can commit one to another project's history), and never waiting on a pipe."""
    nofollow = os.O_NOFOLLOW if STATE_DIR in path.parts else 0
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | nofollow | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return f.read()


def started_by_another(path: Path) -> bool:
    """Whether the history is a sub-agent's (its `session` record names a parent): never the "latest" session."""
    try:
        with path.open("rb") as f:
            first = f.readline(1 << 20)
    except OSError:
        return False
    record = parse_line(first) if b'"parent"' in first else None
    return record is not None and isinstance(record.get("parent"), dict)


def has_turns(path: Path) -> bool:
    """Whether the history file holds a message (the first is always the human's; unreadable: False)."""
    try:
        data = read_plain(path)
    except OSError:
        return False
    for raw in data.split(b"\n"):
        if b"message" in raw:
            record = parse_line(raw)
            if record is not None and record["kind"] == "message":
                return True
    return False


def discard_if_empty(path: Path) -> bool:
    """Remove a history file that holds nothing but its session header and command outputs
    (`notice` records: `/stats` and the like, with no turn); True when removed.

    Anything else in it (a message, a model switch, a line that does not parse) keeps it."""
    try:
        read = read_history(path)
    except HistoryError:
        return False
    kinds = [r["kind"] for r in read.records]
    if read.skipped or read.torn_tail or kinds[:1] != ["session"] or set(kinds[1:]) - {"notice"}:
        return False
    try:
        path.unlink()
    except OSError:
        return False
    return True
