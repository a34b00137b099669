"""File tools: read, write, edit, find by glob, search text. All confined to the project root."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import os
import re
import secrets
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from rhapsody.core.toolbox.protocol import Tool, ToolContext, ToolFailure, ToolOutcome
from rhapsody.core.counts import counted
from rhapsody.core.userstate import state_home
from rhapsody.prompts import load
from rhapsody.sandbox import gitguard, procs
from rhapsody.tools import search
from rhapsody.tools.git import git_blob, gitlinks
from rhapsody.tools.paths import cap_text, confine, shown
from rhapsody.sandbox.bwrap import scrubbed_env
from rhapsody.core.session import records as rec

READ_CAP = 200_000


class ReadInput(BaseModel):
    path: str = Field(description="File path, relative to the project root.")
    start_line: int | None = Field(None, ge=1, description="First line to show (1-based).")
    end_line: int | None = Field(None, ge=1, description="Last line to show (inclusive).")


class ReadFile(Tool):
    """Read a text file, optionally a line range, with line numbers."""

    name: ClassVar[str] = "read_file"
    description: ClassVar[str] = load("tools/read_file")
    Input: ClassVar[type[BaseModel]] = ReadInput
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = True

    def path_of(self, args: ReadInput) -> str:
        """The file the call names."""
        return args.path

    async def run(self, args: ReadInput, ctx: ToolContext) -> ToolOutcome:
        path = confine(ctx.root, args.path, ctx.protected, outside=ctx.read_outside)
        text, blob = await asyncio.to_thread(_read_with_blob, path, args.path)  # the disk's refusals hold either way
        if ctx.files is not None:  # the editor's copy, unsaved changes included
            text = await ctx.files.read(path)
            blob = git_blob(text.encode("utf-8", "replace"))
        lines = text.splitlines()
        first = args.start_line or 1
        last = min(args.end_line or len(lines), len(lines))
        if first > max(len(lines), 1):
            raise ToolFailure(f"{args.path} has {counted(len(lines), 'line')}; start_line {first} is past the end")
        body = "\n".join(f"{n:>6}\t{lines[n - 1]}" for n in range(first, last + 1))
        header = f"{shown(ctx.root, path)} lines {first}-{last} of {len(lines)}\n"
        facts = rec.FileFacts(path=shown(ctx.root, path), op="read", blob=blob)
        return ToolOutcome(header + cap_text(body, ctx.output_cap), facts=facts)


def _read_with_blob(path: Path, given: str) -> tuple[str, str]:
    data = _read_data(path, given)
    return data.decode("utf-8", errors="replace"), git_blob(data)


def _read_data(path: Path, given: str) -> bytes:
    """The bytes of a regular file, checked on the descriptor that reads them: a link or a pipe
    swapped in after the path was resolved is refused, not followed or waited on. Refusals name
    the path as `given`, directories included, as the model and the human wrote it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise ToolFailure(f"no such file: {given}") from None
    except OSError as exc:
        raise ToolFailure(f"refused: {given}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ToolFailure(f"refused: {given} is not a regular file")
        if info.st_size > READ_CAP * 4:
            raise ToolFailure(f"{given} is {info.st_size} bytes; read a line range or search it instead")
        data = f.read(READ_CAP * 4 + 1)
    if b"\x00" in data[:8192]:
        raise ToolFailure(f"{given} looks binary ({info.st_size} bytes); not shown")
    return data


class WriteInput(BaseModel):
    path: str = Field(description="File path, relative to the project root.")
    content: str = Field(description="The whole new content of the file.")


class WriteFile(Tool):
    """Create or overwrite a file."""

    name: ClassVar[str] = "write_file"
    description: ClassVar[str] = load("tools/write_file")
    Input: ClassVar[type[BaseModel]] = WriteInput
    writes: ClassVar[bool] = True
    reads_files: ClassVar[bool] = False

    def path_of(self, args: WriteInput) -> str:
        """The file the call names."""
        return args.path

    async def run(self, args: WriteInput, ctx: ToolContext) -> ToolOutcome:
        path = confine(ctx.root, args.path, ctx.protected)
        _refuse_state(ctx.root, path)
        if path.exists() and not path.is_file():
            raise ToolFailure(f"refused: {args.path} exists and is not a regular file")
        # A secret or read-denied file's old content must not reach the history through the diff.
        hidden = search.readable_hidden(shown(ctx.root, path), ctx.read_deny)
        before = "" if hidden else await asyncio.to_thread(_old_text, path)
        if ctx.files is not None:
            await ctx.files.write(path, args.content)
        else:
            await asyncio.to_thread(_write, path, args.content, args.path)
        lines = args.content.count("\n") + (1 if args.content and not args.content.endswith("\n") else 0)
        where = shown(ctx.root, path)
        return ToolOutcome(f"wrote {where}: {counted(len(args.content), 'character')}, {counted(lines, 'line')}",
                           facts=rec.FileFacts(path=where, op="write", diff=applied_diff(before, args.content, where)))

    def proposal(self, args: WriteInput, ctx: ToolContext) -> str:
        """The diff this write would apply, kept with a denied call ("" when it cannot be shown)."""
        return _proposed(ctx, args.path, lambda before: args.content)


def _old_text(path: Path) -> str:
    """What a write replaces, for the diff kept in history ("" for a new or huge file)."""
    if not path.is_file() or path.stat().st_size > 2_000_000:
        return ""
    return path.read_bytes().decode("utf-8", "replace")


def applied_diff(before: str, after: str, where: str) -> str:
    """The unified diff a write or edit applied, as history keeps it for the human (not sent to the model)."""
    lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                 f"a/{where}", f"b/{where}", n=3)
    text = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
    return text.rstrip("\n").encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _refuse_state(root: Path, path: Path) -> None:
    """Writes that would let code run later outside any sandbox, or touch rhapsody's own records."""
    parts = shown(root, path).split("/")
    first = parts[0]
    if first == ".mcp.json":
        raise ToolFailure("refused: .mcp.json starts programs (MCP servers) when rhapsody opens a trusted project; "
                          "tools never write it")
    if "/".join(parts[:2]) in (".claude/settings.json", ".claude/settings.local.json"):
        raise ToolFailure("refused: .claude/settings.json's hooks run programs and its rules allow calls when "
                          "rhapsody opens a trusted project; tools never write it")
    if first == ".rhapsody":
        raise ToolFailure("refused: .rhapsody/ holds rhapsody's own history and notes; tools never write there")
    base = root.resolve()
    own = state_home().resolve()
    if path.resolve() == own or own in path.resolve().parents:  # rhapsody run in the home folder
        raise ToolFailure(f"refused: {shown(root, own)}/ holds rhapsody's own checkpoints; tools never write there")
    if ".git" in (p.lower() for p in parts) or gitguard.guarded(base, path, [base / p / ".git" for p in gitlinks(base)]):
        raise ToolFailure("refused: tools never write inside a .git/ folder (nested ones too) or the hooks folder (git config and hooks run "
                          "programs); use bash for git commands")


def _write(path: Path, content: str, given: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_bytes(path, content.encode("utf-8"), given)


class EditInput(BaseModel):
    path: str = Field(description="File path, relative to the project root.")
    old: str = Field(description="Exact text to replace; must occur exactly once unless replace_all.")
    new: str = Field(description="Replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence.")


class EditFile(Tool):
    """Replace an exact string in a file."""

    name: ClassVar[str] = "edit_file"
    description: ClassVar[str] = load("tools/edit_file")
    Input: ClassVar[type[BaseModel]] = EditInput
    writes: ClassVar[bool] = True
    reads_files: ClassVar[bool] = True  # its answers ("found 2 times") would reveal a secret file's text

    def path_of(self, args: EditInput) -> str:
        """The file the call names."""
        return args.path

    async def run(self, args: EditInput, ctx: ToolContext) -> ToolOutcome:
        path = confine(ctx.root, args.path, ctx.protected)
        _refuse_state(ctx.root, path)
        text, bad_byte = await asyncio.to_thread(_read_for_edit, path, args.path)
        if ctx.files is not None:
            text, bad_byte = await ctx.files.read(path), None
        if not args.old:
            raise ToolFailure("old is empty; give the exact text to replace")
        _check_edit_encoding(args, bad_byte)
        count = text.count(args.old)
        if count == 0:
            raise ToolFailure(f"old text not found in {args.path}; read the file and copy the text exactly"
                              + (_NOT_UTF8_HINT if bad_byte is not None and "\ufffd" in args.old else ""))
        if count > 1 and not args.replace_all:
            raise ToolFailure(f"old text occurs {count} times in {args.path}; add context to make it unique or set replace_all")
        updated = text.replace(args.old, args.new) if args.replace_all else text.replace(args.old, args.new, 1)
        # surrogateescape: every byte that is not UTF-8 went in as one escape and comes back out as itself.
        if ctx.files is not None:
            await ctx.files.write(path, updated)
        else:
            await asyncio.to_thread(_write_bytes, path, updated.encode("utf-8", "surrogateescape"), args.path)
        where = shown(ctx.root, path)
        return ToolOutcome(f"edited {where}: {counted(count if args.replace_all else 1, 'replacement')}",
                           facts=rec.FileFacts(path=where, op="write", diff=applied_diff(text, updated, where)))

    def proposal(self, args: EditInput, ctx: ToolContext) -> str:
        """The diff this edit would apply, kept with a denied call ("" when it would fail or cannot be shown)."""
        def edited(before: str) -> str | None:
            count = before.count(args.old) if args.old else 0
            if count == 0 or (count > 1 and not args.replace_all):
                return None
            return before.replace(args.old, args.new) if args.replace_all else before.replace(args.old, args.new, 1)

        return _proposed(ctx, args.path, edited)


def _proposed(ctx: ToolContext, given: str, change: Callable[[str], str | None]) -> str:
    """The diff `change` would make to a file; "" outside the root, for a secret or read-denied file
    (its text must not reach the history), or when the change would fail."""
    try:
        path = confine(ctx.root, given, ctx.protected)
    except ToolFailure:
        return ""
    where = shown(ctx.root, path)
    if search.readable_hidden(where, ctx.read_deny) or (path.exists() and not path.is_file()):
        return ""
    try:
        before = _old_text(path)
    except OSError:
        return ""
    after = change(before)
    return "" if after is None else applied_diff(before, after, where)


_NOT_UTF8_HINT = ("; this file is not UTF-8, and each \ufffd that read_file shows stands for a byte that is "
                  "not: choose old text around those bytes")


def _read_for_edit(path: Path, given: str) -> tuple[str, int | None]:
    """The file's text with non-UTF-8 bytes kept as surrogate escapes, and the offset of the first such byte."""
    data = _read_data(path, given)  # the same refusals as read_file: missing, not regular, too large, binary
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return data.decode("utf-8", "surrogateescape"), exc.start


def _check_edit_encoding(args: EditInput, bad_byte: int | None) -> None:
    for name, value in (("old", args.old), ("new", args.new)):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolFailure(f"refused: {name} holds a lone surrogate, which is not text") from None
    if bad_byte is not None and not args.new.isascii():
        raise ToolFailure(
            f"refused: {args.path} is not UTF-8 (the first byte that is not is at offset {bad_byte}), and new holds "
            "non-ASCII text whose encoding the file would not share; use ASCII in new, or convert the file first")


def _write_bytes(path: Path, data: bytes, given: str) -> None:
    """Write `data` to a new file beside `path`, then rename it over `path`.

    Never through the old file: a hard link whose other name is outside the root (made before
    the session) keeps its content, and a symbolic link swapped in after the path was checked
    is replaced, not followed. The parent is checked again just before the rename.
    """
    try:
        mode: int | None = stat.S_IMODE(os.lstat(path).st_mode)
    except FileNotFoundError:
        mode = None  # a new file: the umask decides, as for any other
    if mode is not None and not os.access(path, os.W_OK, follow_symlinks=False):
        raise ToolFailure(f"refused: {given} is read-only")  # as it was when the tools wrote through the file
    temp = path.with_name(f".{path.name}.rhapsody-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        if mode is not None:
            os.chmod(temp, mode)
        if path.parent.resolve() != path.parent:
            raise ToolFailure(f"refused: the folder of {given} changed into a link while writing")
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


class FindInput(BaseModel):
    pattern: str = Field(description="Glob pattern relative to the project root, e.g. 'src/**/*.py'.")


class FindFiles(Tool):
    """Find files by glob."""

    name: ClassVar[str] = "find_files"
    description: ClassVar[str] = load("tools/find_files")
    Input: ClassVar[type[BaseModel]] = FindInput
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = False

    async def run(self, args: FindInput, ctx: ToolContext) -> ToolOutcome:
        if args.pattern.startswith("/") or ".." in Path(args.pattern).parts:
            raise ToolFailure("refused: the pattern must stay inside the project root")
        pattern = args.pattern[2:] if args.pattern.startswith("./") else args.pattern
        found = await asyncio.to_thread(search.find, ctx.root.resolve(), pattern, ctx.read_deny, ctx.protected)
        listing = "\n".join(found[:1000]) or "(no files match)"
        more = f"\n[{len(found) - 1000} more not shown]" if len(found) > 1000 else ""
        return ToolOutcome(f"{counted(len(found), 'file')}\n{listing}{more}")


class SearchInput(BaseModel):
    pattern: str = Field(description="Regular expression to search for.")
    path: str = Field(".", description="File or folder to search, relative to the project root.")
    ignore_case: bool = Field(False, description="Case-insensitive match.")


class SearchText(Tool):
    """Search file contents by regular expression (ripgrep when installed), within a time limit."""

    name: ClassVar[str] = "search_text"
    description: ClassVar[str] = load("tools/search_text")
    Input: ClassVar[type[BaseModel]] = SearchInput
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = True

    def path_of(self, args: SearchInput) -> str:
        """The file or folder the call names."""
        return args.path

    async def run(self, args: SearchInput, ctx: ToolContext) -> ToolOutcome:
        root = ctx.root.resolve()
        target = confine(root, args.path, ctx.protected)
        if target.exists() and not (target.is_dir() or target.is_file()):
            raise ToolFailure(f"refused: {args.path} is not a regular file or a folder (a pipe or a device never ends)")
        try:
            re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
        except (re.error, RecursionError, OverflowError) as exc:
            raise ToolFailure(f"bad regular expression: {exc}") from None
        rg = shutil.which("rg")
        if rg:
            argv = search.ripgrep_argv(rg, args.pattern, target, args.ignore_case)
        else:
            job = {"root": str(root), "target": str(target), "pattern": args.pattern, "ignore_case": args.ignore_case,
                   "hidden": list(ctx.read_deny), "protected": list(ctx.protected)}
            # -I: isolated, so the project folder (the working directory) is not on sys.path
            argv = [sys.executable, "-I", "-m", "rhapsody.tools.search", json.dumps(job)]
        limit = min(search.SEARCH_SECONDS, ctx.bash_timeout)
        done = await procs.run(argv, str(root), scrubbed_env(), limit, ctx.output_cap * 4)
        if done.timed_out:
            raise ToolFailure(f"search stopped after {limit:g} s (the time limit); narrow the path "
                              "or simplify the pattern")
        out = search.drop_hidden(done.output, root, ctx.read_deny, ctx.protected) if rg else done.output
        if not rg and done.exit_code != 0:
            raise ToolFailure(f"search failed: {out.strip().splitlines()[-1] if out.strip() else done.exit_code}")
        return ToolOutcome(cap_text(out.strip() or "(no matches)", ctx.output_cap))
