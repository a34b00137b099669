"""The seed's measurements of a memory folder: who read what, when, and its size over time."""

from __future__ import annotations

from collections.abc import Sequence

import json
import re
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rhapsody.core.session import records as rec
from rhapsody.core.session.messages import ToolResultBlock, ToolUseBlock
from rhapsody.core.session.history import read_history, sessions
from rhapsody.core.counts import counted
from rhapsody.tools.git import path_sizes


@dataclass(frozen=True)
class Access:
    """One read or write of a memory file, from a session's history.

    `via` is how: the tool that read or wrote it, or "map" for the memory map placed in the
    system prompt at the start of the conversation. `chars` is what the read brought into
    the context (a tool output shared by several files is split evenly between them).
    """

    session: str
    started: float
    ts: float
    file: str
    op: str
    via: str = "read_file"
    chars: int = 0


NOT_READS = ("find_files", "micro_handoff", "recall")
"""Tools whose output names memory files without reading them (a listing, a note, a search of stripped output)."""


def accesses(root: Path, path: str) -> list[Access]:
    """Every read and write of a memory file in the project's sessions, in time order.

    Reads count through any tool (read_file, bash, search_text…: every memory file a call's
    arguments or output name) and through the memory map in the system prompt.
    """
    out: list[Access] = []
    for history in sessions(root):
        out += _session_accesses(history.stem, read_history(history, typed=True).typed, path)
    return sorted(out, key=lambda a: a.ts)


def _session_accesses(session: str, records: Sequence[rec.Record], path: str) -> list[Access]:
    if not records:
        return []
    started = records[0].ts
    head = records[0]
    out = [Access(session, started, started, file, "read", "map", chars)
           for file, chars in _map_sections(head.system if isinstance(head, rec.SessionStarted) else "", path)]
    inputs, outputs = _calls(records)
    for r in rec.of(records, rec.ToolRun):
        ts, name, output = r.ts, r.name, outputs.get(r.tool_use_id, "")
        if r.op in ("read", "write") and r.path:
            if r.path.startswith(path + "/"):
                chars = len(output) if r.op == "read" else 0
                out.append(Access(session, started, ts, r.path, r.op, name, chars))
        elif name not in NOT_READS:
            named = _named_files(inputs.get(r.tool_use_id, "") + "\n" + output, path)
            out += [Access(session, started, ts, f, "read", name, len(output) // len(named)) for f in named]
    return out


def _map_sections(system: str, path: str) -> list[tuple[str, int]]:
    """(file, characters) of every memory file the map in a system prompt carried."""
    heads = list(re.finditer(rf"^### ({re.escape(path)}/\S+)$", system, re.M))
    ends = [h.start() for h in heads[1:]] + [len(system)]
    return [(h.group(1), end - h.end()) for h, end in zip(heads, ends)]


def _calls(records: Sequence[rec.Record]) -> tuple[dict[str, str], dict[str, str]]:
    """Tool inputs (as JSON) and result texts by tool_use id."""
    inputs: dict[str, str] = {}
    outputs: dict[str, str] = {}
    for r in rec.of(records, rec.MessageAdded):
        for block in r.content:
            if isinstance(block, ToolUseBlock):
                inputs[block.id] = json.dumps(block.input, ensure_ascii=False)
            elif isinstance(block, ToolResultBlock):
                content = block.content
                text = content if isinstance(content, str) else " ".join(
                    str(c.get("text", "")) for c in content or [] if isinstance(c, dict))
                outputs[block.tool_use_id] = text
    return inputs, outputs


def _named_files(text: str, path: str) -> list[str]:
    """Memory files named in a call's arguments or output, each once, in order."""
    found = re.findall(rf"(?<![\w/.-])({re.escape(path)}/[\w./-]+\.md)\b", text)
    return list(dict.fromkeys(found))


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
    """The seed's measurements: share and characters read per conversation, cross-conversation
    reads, conversations per day, the reminders and whether memory was updated after them."""
    files = [p for p in (root / path).rglob("*.md")] if (root / path).is_dir() else []
    log = accesses(root, path)
    starts = {h.stem: _started(h) for h in sessions(root)}
    order = {s: i for i, s in enumerate(sorted(starts, key=lambda s: (starts[s], s)))}
    per_session: dict[str, set[str]] = {}
    by_tools: dict[str, set[str]] = {}
    chars: dict[str, int] = {}
    last_write: dict[str, Access] = {}
    cross_conv, cross_days = [], []
    for a in log:
        if a.op == "write":
            last_write[a.file] = a
            continue
        per_session.setdefault(a.session, set()).add(a.file)
        if a.via != "map":
            by_tools.setdefault(a.session, set()).add(a.file)
        chars[a.session] = chars.get(a.session, 0) + a.chars
        w = last_write.get(a.file)
        if w and w.session != a.session:
            cross_conv.append(float(order[a.session] - order[w.session]))
            cross_days.append((a.ts - w.ts) / 86400)
    reads = [a for a in log if a.op == "read"]
    return {
        "size_over_time": size_over_time(root, path),
        "memory_files": len(files),
        "memory_bytes": sum(p.stat().st_size for p in files),
        "conversations": len(order),
        "conversations_reading_memory": len(per_session),
        "reads": len(reads),
        "reads_by_way": dict(Counter(a.via for a in reads)),
        "share_read_per_conversation": _spread([len(r) / len(files) for r in per_session.values()] if files else []),
        "share_read_by_tools_per_conversation": _spread([len(r) / len(files) for r in by_tools.values()] if files else []),
        "characters_read": {"total": sum(chars.values()), "per_conversation": _spread([float(c) for c in chars.values()])},
        "cross_conversation_reads": len(cross_conv),
        "distance_conversations": _spread(cross_conv),
        "distance_days": _spread(cross_days),
        "conversations_per_day": per_day(list(starts.values())),
        **reminders(root, path),
    }


def per_day(starts: list[float]) -> dict[str, Any]:
    """New conversations per active day (UTC): the seed's mean, median, max and days with 2+, 3+, 5+."""
    days = Counter(time.strftime("%Y-%m-%d", time.gmtime(t)) for t in starts if t)
    counts = sorted(days.values())
    if not counts:
        return {"active_days": 0, "mean": 0.0, "median": 0.0, "max": 0, "days_with_2_or_more": 0,
                "days_with_3_or_more": 0, "days_with_5_or_more": 0}
    return {"active_days": len(counts), "mean": round(sum(counts) / len(counts), 2),
            "median": statistics.median(counts), "max": counts[-1],
            **{f"days_with_{n}_or_more": sum(1 for c in counts if c >= n) for n in (2, 3, 5)}}


def reminders(root: Path, path: str) -> dict[str, int]:
    """End-of-task memory reminders sent, and how many were followed by a write to memory in the same turn."""
    sent = followed = 0
    for history in sessions(root):
        records = read_history(history, typed=True).typed
        for i, r in enumerate(records):
            if not isinstance(r, rec.MemoryReminder):
                continue
            sent += 1
            after: list[rec.Record] = []
            for later in records[i + 2:]:  # i + 1 is the reminder's own message
                if isinstance(later, rec.MessageAdded) and later.role == "user" and _typed(later):
                    break
                after.append(later)
            followed += any(a.op == "write" and (a.path or "").startswith(path + "/") for a in rec.of(after, rec.ToolRun))
    return {"memory_reminders": sent, "memory_reminders_followed_by_update": followed}


def _typed(message: rec.MessageAdded) -> bool:
    """Whether a user message starts a new turn (text of its own, no tool results)."""
    return not any(isinstance(b, ToolResultBlock) for b in message.content)


def size_over_time(root: Path, path: str, limit: int = 50) -> list[dict[str, Any]]:
    """Files and bytes of the memory folder at each of its last `limit` commits, oldest first."""
    return [{"date": time.strftime("%Y-%m-%d", time.gmtime(when)), "commit": commit, "files": files, "bytes": size}
            for when, commit, files, size in path_sizes(root, path, limit)]


def format_stats(f: dict[str, Any]) -> str:
    """The stats as a few lines."""
    def spread(d: dict[str, float], fmt: str) -> str:
        return f"median {format(d['median'], fmt)}, p90 {format(d['p90'], fmt)}, max {format(d['max'], fmt)}"

    return "\n".join([
        f"memory: {counted(f['memory_files'], 'file')}, {f['memory_bytes']:,} bytes",
        f"conversations: {f['conversations']}, of which {f['conversations_reading_memory']} read memory; {f['reads']} reads "
        f"({', '.join(f'{k} {v}' for k, v in sorted(f['reads_by_way'].items())) or 'none'})",
        f"share of memory files read per conversation: {spread(f['share_read_per_conversation'], '.0%')} "
        f"(by tools alone: {spread(f['share_read_by_tools_per_conversation'], '.0%')})",
        f"characters read: {f['characters_read']['total']:,} in all; per conversation "
        f"{spread(f['characters_read']['per_conversation'], ',.0f')}",
        "new conversations per active day: "
        + (f"mean {d['mean']}, median {d['median']}, max {d['max']} over {d['active_days']} days; "
           f"2+ on {d['days_with_2_or_more']}, 3+ on {d['days_with_3_or_more']}, 5+ on {d['days_with_5_or_more']}"
           if (d := f["conversations_per_day"])["active_days"] else "none"),
        f"end-of-task memory reminders: {f['memory_reminders']}, followed by a memory update "
        f"{f['memory_reminders_followed_by_update']}",
        f"cross-conversation reads (a file last written in another conversation): {f['cross_conversation_reads']}",
        f"  distance in conversations: {spread(f['distance_conversations'], '.0f')}",
        f"  distance in days: {spread(f['distance_days'], '.1f')}",
        "size over time (commits touching memory): "
        + (", ".join(f"{p['date']} {p['files']} files {p['bytes']:,} B" for p in f["size_over_time"][-8:]) or "none"),
    ])
