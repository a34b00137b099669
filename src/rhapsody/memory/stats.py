"""The seed's measurements of a memory folder: who read what, when, and its size over time."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rhapsody.core.history import read_history, sessions
from rhapsody.tools.git import path_sizes


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


def size_over_time(root: Path, path: str, limit: int = 50) -> list[dict[str, Any]]:
    """Files and bytes of the memory folder at each of its last `limit` commits, oldest first."""
    return [{"date": time.strftime("%Y-%m-%d", time.gmtime(when)), "commit": commit, "files": files, "bytes": size}
            for when, commit, files, size in path_sizes(root, path, limit)]


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
