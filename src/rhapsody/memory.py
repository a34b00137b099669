"""Project memory (seed 001): Markdown files in the repository, versioned by git.

`init` lays out the folder; `memory_map` is what goes into the system prompt at the start
of each conversation; `write_dialog` records a task or a seam; `read_log`, `stats` and
`audit` measure and check the memory. The agent itself reads and edits memory with the
ordinary file tools.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rhapsody.core.history import read_history, sessions

FILES = {
    "PROJECT_STATUS.md": "# Project status\n\nWhat we are doing now, what blocks it, where the details are.\n\n"
                         "## Now\n- (nothing recorded yet)\n\n## Blocked\n- (nothing)\n",
    "DECISIONS.md": "# Decision register\n\nOne line per decision, linking its card in decisions/.\n\n"
                    "<!-- - [D-001 Short title](decisions/D-001.md): one-line summary -->\n",
    "TECH_DEBT.md": "# Technical debt\n\n- (nothing recorded yet)\n",
}
FOLDERS = ("status", "decisions", "errors", "dialogs")
DIALOGS_IN_MAP = 3


def init(root: Path, path: str) -> list[str]:
    """Create the memory layout; returns what was created (existing files are kept)."""
    base = root / path
    created = []
    for folder in FOLDERS:
        target = base / folder
        if not target.exists():
            target.mkdir(parents=True)
            (target / ".gitkeep").write_text("")
            created.append(f"{path}/{folder}/")
    for name, text in FILES.items():
        target = base / name
        if not target.exists():
            target.write_text(text, encoding="utf-8")
            created.append(f"{path}/{name}")
    return created


def memory_map(root: Path, path: str, cap: int) -> str:
    """Status, decision register and the newest dialog logs, cut at `cap` characters, saying so."""
    base = root / path
    if not base.is_dir():
        return ""
    parts = []
    for name in ("PROJECT_STATUS.md", "DECISIONS.md"):
        file = base / name
        if file.is_file():
            parts.append(f"### {path}/{name}\n{file.read_text(encoding='utf-8', errors='replace').strip()}")
    dialogs = sorted((base / "dialogs").glob("*.md"))[-DIALOGS_IN_MAP:]
    for file in reversed(dialogs):
        parts.append(f"### {path}/dialogs/{file.name}\n{file.read_text(encoding='utf-8', errors='replace').strip()}")
    text = "\n\n".join(parts)
    if len(text) > cap:
        text = text[:cap] + f"\n[memory map cut at {cap} of {len(text)} characters; open the files for the rest]"
    return text


def write_dialog(root: Path, path: str, session_id: str, request: str, work: str, result: str) -> Path | None:
    """Append a dialog log (request, work done, result) to dialogs/; None when memory is not set up."""
    folder = root / path / "dialogs"
    if not folder.is_dir():
        return None
    stamp = time.strftime("%Y-%m-%d-%H%M%S", time.gmtime())
    file = folder / f"{stamp}-{session_id}.md"
    file.write_text(f"# Dialog {stamp} ({session_id})\n\n## Request\n{request.strip()}\n\n"
                    f"## Work done\n{work.strip()}\n\n## Result\n{result.strip()}\n", encoding="utf-8")
    return file


def git_blob(data: bytes) -> str:
    """The git blob id of `data` (what `git hash-object` prints), computed without git."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def commit_memory(root: Path, path: str, message: str) -> str | None:
    """Commit changes under the memory folder alone; returns the commit id, None when nothing changed."""
    import git

    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return None
    repo.git.add("--all", "--", str(root / path))
    if not repo.git.diff("--cached", "--name-only", "--", str(root / path)):
        return None
    repo.git.commit("-m", message, "--", str(root / path))
    return str(repo.head.commit.hexsha)


@dataclass(frozen=True)
class Access:
    """One read or write of a memory file, from a session's history."""

    session: str
    started: float
    ts: float
    file: str
    op: str


def accesses(root: Path, path: str) -> list[Access]:
    """Every read and write of a memory file in the project's sessions, in time order."""
    out = []
    for history in sessions(root):
        records = read_history(history).records
        started = records[0].get("ts", 0.0) if records else 0.0
        for r in records:
            if r["kind"] == "tool_run" and r.get("op") in ("read", "write") and str(r.get("path", "")).startswith(path + "/"):
                out.append(Access(history.stem, started, r.get("ts", 0.0), r["path"], r["op"]))
    return sorted(out, key=lambda a: a.ts)


def _started(history: Path) -> float:
    with history.open("rb") as f:
        first = f.readline()
    try:
        return float(json.loads(first).get("ts", 0.0))
    except (ValueError, AttributeError):
        return 0.0


def _spread(values: list[float]) -> dict[str, float]:
    if not values:
        return {"median": 0.0, "p90": 0.0, "max": 0.0}
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "p90": ordered[int(0.9 * (len(ordered) - 1))], "max": ordered[-1]}


def stats(root: Path, path: str) -> dict[str, Any]:
    """The seed's measurements: share of memory read per conversation, cross-conversation reads."""
    files = [p for p in (root / path).rglob("*.md")] if (root / path).is_dir() else []
    log = accesses(root, path)
    starts = {h.stem: _started(h) for h in sessions(root)}
    order = {s: i for i, s in enumerate(sorted(starts, key=lambda s: (starts[s], s)))}
    per_session: dict[str, set[str]] = {}
    last_write: dict[str, Access] = {}
    cross_conv, cross_days = [], []
    for a in log:
        if a.op == "write":
            last_write[a.file] = a
            continue
        per_session.setdefault(a.session, set()).add(a.file)
        w = last_write.get(a.file)
        if w and w.session != a.session:
            cross_conv.append(float(order[a.session] - order[w.session]))
            cross_days.append((a.ts - w.ts) / 86400)
    shares = [len(read) / len(files) for read in per_session.values()] if files else []
    return {
        "size_over_time": size_over_time(root, path),
        "memory_files": len(files),
        "memory_bytes": sum(p.stat().st_size for p in files),
        "conversations": len(order),
        "conversations_reading_memory": len(per_session),
        "reads": sum(1 for a in log if a.op == "read"),
        "share_read_per_conversation": _spread(shares),
        "cross_conversation_reads": len(cross_conv),
        "distance_conversations": _spread(cross_conv),
        "distance_days": _spread(cross_days),
    }


COMMENT = re.compile(r"<!--.*?-->")
LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)(?:#[^)]*)?\)")
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
    return findings + _register_mismatches(root, base) + _stale_status(root, base, stale_days)


def _stale_status(root: Path, base: Path, stale_days: int) -> list[Finding]:
    """Status entries older than `stale_days` whose named files were committed to since."""
    import git

    try:
        repo = git.Repo(root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        return []
    out = []
    now = time.time()
    for entry in sorted((base / "status").glob("*.md")):
        written = _last_commit(repo, entry) or entry.stat().st_mtime
        if now - written < stale_days * 86400:
            continue
        text = entry.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            for target in FILE_REF.findall(line):
                changed = _last_commit(repo, root / target)
                if changed and changed > written:
                    day = time.strftime("%Y-%m-%d", time.gmtime(changed))
                    out.append(Finding(str(entry.relative_to(root)), n, f"{target} changed on {day}, after this entry"))
    return out


def _last_commit(repo: Any, file: Path) -> float | None:
    stamp = repo.git.log("-1", "--format=%ct", "--", str(file))
    return float(stamp) if stamp.strip() else None


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
        card = base / match.group(2) if match else None
        if card is None or not card.is_file():
            continue
        heading = next((l.lstrip("# ").strip() for l in card.read_text(encoding="utf-8").splitlines() if l.startswith("#")), "")
        if heading != match.group(1).strip():  # type: ignore[union-attr]
            out.append(Finding(str(register.relative_to(root)), n,
                               f"register says {match.group(1)!r} but {card.relative_to(root)} says {heading!r}"))  # type: ignore[union-attr]
    return out


class DialogRecorder:
    """Writes a dialog log at the end of each task that used tools, and at each seam."""

    def __init__(self, agent: Any, path: str, commit: bool) -> None:
        self.agent = agent
        self.path = path
        self.commit = commit
        self.request = ""
        self.calls: list[str] = []
        self.text: list[str] = []

    def __call__(self, event: Any) -> None:
        from rhapsody.core import events as ev
        from rhapsody.render import finished_view, tool_title

        if isinstance(event, ev.TurnStarted):
            if event.user_text:
                self.request, self.calls, self.text = event.user_text, [], []
        elif isinstance(event, ev.ToolFinished) and event.call.name not in ("micro_handoff", "recall"):
            self.calls.append(tool_title(finished_view(event)))
        elif isinstance(event, ev.TextDelta):
            self.text.append(event.text)
        elif isinstance(event, ev.BlockStopped) and event.kind == "text":
            self.text.append("\n")
        elif isinstance(event, ev.SeamCommitted):
            note = event.record.get("note_path", "")
            self._write("micro-handoff", f"seam {event.record['seam']}; field note {note}", "context stripped")
        elif isinstance(event, ev.TurnEnded) and self.calls:
            result = "".join(self.text).strip().split("\n\n")[-1] if self.text else "(no closing text)"
            self._write(self.request, "\n".join(f"- {c}" for c in self.calls[-40:]), result)
            self.calls = []

    def _write(self, request: str, work: str, result: str) -> None:
        session = self.agent.session
        written = write_dialog(session.root, self.path, session.id, request, work, result)
        if written is not None and self.commit:
            commit_memory(session.root, self.path, f"memory: dialog {written.name}")


def size_over_time(root: Path, path: str, limit: int = 50) -> list[dict[str, Any]]:
    """Files and bytes of the memory folder at each of its last `limit` commits, oldest first."""
    import git

    try:
        repo = git.Repo(root, search_parent_directories=True)
        commits = list(repo.iter_commits(paths=path, max_count=limit))
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError, git.GitCommandError):
        return []
    out = []
    for commit in reversed(commits):
        try:
            tree = commit.tree / path
        except KeyError:
            continue
        blobs = [b for b in tree.traverse() if b.type == "blob"]
        out.append({"date": time.strftime("%Y-%m-%d", time.gmtime(commit.committed_date)),
                    "commit": commit.hexsha[:10], "files": len(blobs), "bytes": sum(b.size for b in blobs)})
    return out


def format_stats(f: dict[str, Any]) -> str:
    """The stats as a few lines."""
    def spread(d: dict[str, float], fmt: str) -> str:
        return f"median {format(d['median'], fmt)}, p90 {format(d['p90'], fmt)}, max {format(d['max'], fmt)}"

    return "\n".join([
        f"memory: {f['memory_files']} files, {f['memory_bytes']:,} bytes",
        f"conversations: {f['conversations']}, of which {f['conversations_reading_memory']} read memory; {f['reads']} reads",
        f"share of memory files read per conversation: {spread(f['share_read_per_conversation'], '.0%')}",
        f"cross-conversation reads (a file last written in another conversation): {f['cross_conversation_reads']}",
        f"  distance in conversations: {spread(f['distance_conversations'], '.0f')}",
        f"  distance in days: {spread(f['distance_days'], '.1f')}",
        "size over time (commits touching memory): "
        + (", ".join(f"{p['date']} {p['files']} files {p['bytes']:,} B" for p in f["size_over_time"][-8:]) or "none"),
    ])
