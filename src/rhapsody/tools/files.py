"""File tools: read, write, edit, find by glob, search text. All confined to the project root."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import stat
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from rhapsody.core.permissions import PROTECTED_READS, protected
from rhapsody.core.tools import ToolContext, ToolFailure, ToolOutcome
from rhapsody.prompts import load
from rhapsody.tools.git import git_blob
from rhapsody.tools.paths import cap_text, confine, shown

READ_CAP = 200_000
SKIP_DIRS = {".git", ".rhapsody", "node_modules", "__pycache__", ".venv", "venv"}


class ReadInput(BaseModel):
    path: str = Field(description="File path, relative to the project root.")
    start_line: int | None = Field(None, ge=1, description="First line to show (1-based).")
    end_line: int | None = Field(None, ge=1, description="Last line to show (inclusive).")


class ReadFile:
    """Read a text file, optionally a line range, with line numbers."""

    name: ClassVar[str] = "read_file"
    description: ClassVar[str] = load("tools/read_file")
    Input: ClassVar[type[BaseModel]] = ReadInput
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = True

    async def run(self, args: ReadInput, ctx: ToolContext) -> ToolOutcome:
        path = confine(ctx.root, args.path)
        text, blob = await asyncio.to_thread(_read_with_blob, path)
        lines = text.splitlines()
        first = args.start_line or 1
        last = min(args.end_line or len(lines), len(lines))
        if first > max(len(lines), 1):
            raise ToolFailure(f"{args.path} has {len(lines)} lines; start_line {first} is past the end")
        body = "\n".join(f"{n:>6}\t{lines[n - 1]}" for n in range(first, last + 1))
        header = f"{shown(ctx.root, path)} lines {first}-{last} of {len(lines)}\n"
        facts = {"path": shown(ctx.root, path), "op": "read", "blob": blob}
        return ToolOutcome(header + cap_text(body, ctx.output_cap), facts=facts)


def _read_with_blob(path: Path) -> tuple[str, str]:
    text = _read_regular(path)
    return text, git_blob(path.read_bytes())


def _read_regular(path: Path) -> str:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ToolFailure(f"no such file: {path.name}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ToolFailure(f"refused: {path.name} is not a regular file")
    if info.st_size > READ_CAP * 4:
        raise ToolFailure(f"{path.name} is {info.st_size} bytes; read a line range or search it instead")
    data = path.read_bytes()
    if b"\x00" in data[:8192]:
        raise ToolFailure(f"{path.name} looks binary ({info.st_size} bytes); not shown")
    return data.decode("utf-8", errors="replace")


class WriteInput(BaseModel):
    path: str = Field(description="File path, relative to the project root.")
    content: str = Field(description="The whole new content of the file.")


class WriteFile:
    """Create or overwrite a file."""

    name: ClassVar[str] = "write_file"
    description: ClassVar[str] = load("tools/write_file")
    Input: ClassVar[type[BaseModel]] = WriteInput
    writes: ClassVar[bool] = True
    reads_files: ClassVar[bool] = False

    async def run(self, args: WriteInput, ctx: ToolContext) -> ToolOutcome:
        path = confine(ctx.root, args.path)
        _refuse_state(ctx.root, path)
        if path.exists() and not path.is_file():
            raise ToolFailure(f"refused: {args.path} exists and is not a regular file")
        await asyncio.to_thread(_write, path, args.content)
        lines = args.content.count("\n") + (1 if args.content and not args.content.endswith("\n") else 0)
        where = shown(ctx.root, path)
        return ToolOutcome(f"wrote {where}: {len(args.content)} characters, {lines} lines", facts={"path": where, "op": "write"})


def _refuse_state(root: Path, path: Path) -> None:
    if shown(root, path).split("/")[0] == ".rhapsody":
        raise ToolFailure("refused: .rhapsody/ holds rhapsody's own history and notes; tools never write there")


def _write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")


class EditInput(BaseModel):
    path: str = Field(description="File path, relative to the project root.")
    old: str = Field(description="Exact text to replace; must occur exactly once unless replace_all.")
    new: str = Field(description="Replacement text.")
    replace_all: bool = Field(False, description="Replace every occurrence.")


class EditFile:
    """Replace an exact string in a file."""

    name: ClassVar[str] = "edit_file"
    description: ClassVar[str] = load("tools/edit_file")
    Input: ClassVar[type[BaseModel]] = EditInput
    writes: ClassVar[bool] = True
    reads_files: ClassVar[bool] = False

    async def run(self, args: EditInput, ctx: ToolContext) -> ToolOutcome:
        path = confine(ctx.root, args.path)
        _refuse_state(ctx.root, path)
        text = await asyncio.to_thread(_read_regular, path)
        if not args.old:
            raise ToolFailure("old is empty; give the exact text to replace")
        count = text.count(args.old)
        if count == 0:
            raise ToolFailure(f"old text not found in {args.path}; read the file and copy the text exactly")
        if count > 1 and not args.replace_all:
            raise ToolFailure(f"old text occurs {count} times in {args.path}; add context to make it unique or set replace_all")
        updated = text.replace(args.old, args.new) if args.replace_all else text.replace(args.old, args.new, 1)
        await asyncio.to_thread(_write, path, updated)
        where = shown(ctx.root, path)
        return ToolOutcome(f"edited {where}: {count if args.replace_all else 1} replacement(s)", facts={"path": where, "op": "write"})


class FindInput(BaseModel):
    pattern: str = Field(description="Glob pattern relative to the project root, e.g. 'src/**/*.py'.")


class FindFiles:
    """Find files by glob."""

    name: ClassVar[str] = "find_files"
    description: ClassVar[str] = load("tools/find_files")
    Input: ClassVar[type[BaseModel]] = FindInput
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = False

    async def run(self, args: FindInput, ctx: ToolContext) -> ToolOutcome:
        if args.pattern.startswith("/") or ".." in Path(args.pattern).parts:
            raise ToolFailure("refused: the pattern must stay inside the project root")
        root = ctx.root.resolve()
        found = await asyncio.to_thread(lambda: sorted(
            shown(root, p) for p in root.glob(args.pattern)
            if p.is_file() and not SKIP_DIRS.intersection(p.relative_to(root).parts)
        ))
        listing = "\n".join(found[:1000]) or "(no files match)"
        more = f"\n[{len(found) - 1000} more not shown]" if len(found) > 1000 else ""
        return ToolOutcome(f"{len(found)} files\n{listing}{more}")


class SearchInput(BaseModel):
    pattern: str = Field(description="Regular expression to search for.")
    path: str = Field(".", description="File or folder to search, relative to the project root.")
    ignore_case: bool = Field(False, description="Case-insensitive match.")


class SearchText:
    """Search file contents by regular expression (ripgrep when installed)."""

    name: ClassVar[str] = "search_text"
    description: ClassVar[str] = load("tools/search_text")
    Input: ClassVar[type[BaseModel]] = SearchInput
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = True

    async def run(self, args: SearchInput, ctx: ToolContext) -> ToolOutcome:
        target = confine(ctx.root, args.path)
        try:
            regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
        except re.error as exc:
            raise ToolFailure(f"bad regular expression: {exc}") from None
        rg = shutil.which("rg")
        if rg:
            out = await _ripgrep(rg, args, target, ctx.root)
        else:
            out = await asyncio.to_thread(_python_search, regex, target, ctx.root.resolve())
        return ToolOutcome(cap_text(out or "(no matches)", ctx.output_cap))


async def _ripgrep(rg: str, args: SearchInput, target: Path, root: Path) -> str:
    cmd = [rg, "--line-number", "--no-heading", "--color=never", "--max-count=200"]
    for pattern in PROTECTED_READS:
        cmd += ["--glob", f"!{pattern}"]
    if args.ignore_case:
        cmd.append("-i")
    cmd += ["--", args.pattern, str(target)]
    proc = await asyncio.create_subprocess_exec(*cmd, cwd=root, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    prefix = str(root.resolve()) + os.sep
    return out.decode("utf-8", errors="replace").replace(prefix, "")


def _python_search(regex: re.Pattern[str], target: Path, root: Path) -> str:
    files = [target] if target.is_file() else (
        p for p in sorted(target.rglob("*"))
        if p.is_file() and not SKIP_DIRS.intersection(p.relative_to(root).parts) and not protected(shown(root, p))
    )
    hits: list[str] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                hits.append(f"{shown(root, path)}:{n}:{line[:400]}")
                if len(hits) >= 2000:
                    return "\n".join(hits) + "\n[stopped at 2000 matches]"
    return "\n".join(hits)
