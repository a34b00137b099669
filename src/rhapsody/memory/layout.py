"""The memory folder's layout: creating it, the map for the system prompt, dialog logs, commits."""

from __future__ import annotations

import os
import time
from pathlib import Path

from rhapsody.core.own_files import inside, own_files, read_own
from rhapsody.tools.git import commit_paths
from rhapsody.sandbox.bwrap import secret_values

FILES = {
    "PROJECT_STATUS.md": "# Project status\n\nWhat we are doing now, what blocks it, where the details are.\n\n"
                         "## Now\n- (nothing recorded yet)\n\n## Blocked\n- (nothing)\n",
    "DECISIONS.md": "# Decision register\n\nOne line per decision, linking its card in decisions/.\n\n"
                    "<!-- - [D-001 Short title](decisions/D-001.md): one-line summary -->\n",
    "TECH_DEBT.md": "# Technical debt\n\n- (nothing recorded yet)\n",
}
FOLDERS = ("status", "decisions", "errors", "dialogs")
DIALOGS_IN_MAP = 3


class LayoutError(Exception):
    """The memory folder cannot be created safely (a link on the way, outside the project)."""


def init(root: Path, path: str) -> list[str]:
    """Create the memory layout; returns what was created (existing files are kept).

    Never through a symbolic link: a link anywhere from the root down to a file it would
    create raises LayoutError, and files are created with O_EXCL | O_NOFOLLOW."""
    base = root / path
    created = []
    for folder in FOLDERS:
        target = base / folder
        _no_link_below(root, target / ".gitkeep")
        if not os.path.lexists(target):
            target.mkdir(parents=True)
            _create(target / ".gitkeep", "")
            created.append(f"{path}/{folder}/")
    for name, text in FILES.items():
        target = base / name
        _no_link_below(root, target)
        if not os.path.lexists(target):
            _create(target, text)
            created.append(f"{path}/{name}")
    return created


def _no_link_below(root: Path, path: Path) -> None:
    """LayoutError when `path`, or a folder between `root` and it, is a symbolic link or leaves the root."""
    rel = path.relative_to(root)
    for depth in range(1, len(rel.parts) + 1):
        step = root.joinpath(*rel.parts[:depth])
        if step.is_symlink():
            raise LayoutError(f"refusing {step}: a symbolic link (memory files are never written through a link)")
    if not inside(root, path):
        raise LayoutError(f"refusing {path}: outside the project")


def _create(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def memory_map(root: Path, path: str, cap: int) -> str:
    """Status, decision register and the newest dialog logs, cut at `cap` characters, saying so."""
    base = root / path
    if not base.is_dir() or base.is_symlink() or not inside(root, base):
        return ""
    parts = []
    for name in ("PROJECT_STATUS.md", "DECISIONS.md"):
        text = read_own(root, base / name, cap + 1, secret_values())
        if text is not None:
            parts.append(f"### {path}/{name}\n{text.strip()}")
    dialogs = own_files(root, base / "dialogs", "*.md")[-DIALOGS_IN_MAP:]
    for file in reversed(dialogs):
        text = read_own(root, file, cap + 1, secret_values())
        if text is not None:
            parts.append(f"### {path}/dialogs/{file.name}\n{text.strip()}")
    text = "\n\n".join(parts)
    if len(text) > cap:
        text = text[:cap] + f"\n[memory map cut at {cap} of {len(text)} characters; open the files for the rest]"
    return text


def write_dialog(root: Path, path: str, session_id: str, request: str, work: str, result: str) -> Path | None:
    """Append a dialog log (request, work done, result) to dialogs/; None when memory is not set up."""
    folder = root / path / "dialogs"
    if not folder.is_dir() or folder.is_symlink() or not inside(root, folder):
        return None  # never written through a link or outside the project
    stamp = time.strftime("%Y-%m-%d-%H%M%S", time.gmtime())
    text = (f"# Dialog {stamp} ({session_id})\n\n## Request\n{request.strip()}\n\n"
            f"## Work done\n{work.strip()}\n\n## Result\n{result.strip()}\n")
    for n in range(1, 1000):
        # Two logs in the same second (a seam and a task end) get -01, -02…: never overwritten,
        # and names still sort in the order they were written.
        file = folder / f"{stamp}-{session_id}-{n:02d}.md"
        try:
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return file
    return None


def commit_memory(root: Path, path: str, message: str) -> str | None:
    """Commit changes under the memory folder alone; returns the commit id, None when nothing changed."""
    return commit_paths(root, root / path, message)
