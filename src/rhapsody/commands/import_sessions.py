"""`rhapsody import PATH...`: Claude Code transcripts and Codex rollouts as rhapsody sessions.

A folder is searched for `*.jsonl` files at any depth. Every file is read and checked before
anything is written, so a malformed or partial file stops the command with one line naming
the file and the line (exit 2) and no history is written; each history is written whole to a
temporary file and renamed. A file whose content was imported before (same SHA-256) is not
imported again: the command names the session it became. Subagent transcripts
(`<session>/subagents/*.jsonl`, `agent-*.jsonl`) are read with their parent session.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rhapsody.core.session import records as rec
from rhapsody.core.accounting.billing import head_of
from rhapsody.core.session.messages import ToolResultBlock
from rhapsody.core.errors import InputError
from rhapsody.importer.subagents import link
from rhapsody.core.session.history import STATE_DIR, history_dir, new_session_id, read_plain, sessions, write_history
from rhapsody.importer import to_history as build, claude_code, codex
from rhapsody.core.window import history_window
from rhapsody.importer.to_history import INTERRUPTED
from rhapsody.importer.transcript import Source, ImportedTurn, read_lines
from rhapsody.sandbox.bwrap import secret_values


def main(root: Path, paths: list[Path]) -> int:
    """Import every session under `paths` into `root`'s histories; returns the exit status."""
    files = _files(paths)
    if not files:
        raise InputError(f"no .jsonl files in {', '.join(str(p) for p in paths)}")
    sources = [s for s in (_read(path, files) for path in files) if s is not None]
    known = imported(root)
    spec_for = _spec_maker(root)
    made: list[str] = []
    for source in sources:
        done = known.get(source.sha256)
        earlier = known.get(f"session:{source.session_id}")
        if done:
            print(f"{source.path}: already imported as {done}")
            continue
        if not any(isinstance(i, ImportedTurn) for i in source.items):
            print(f"{source.path}: no conversation in it; nothing imported")
            continue
        session_id = new_session_id()
        children, linked = link(source, session_id, new_session_id, spec_for, str(root), secret_values())
        records = build.records(source, spec_for(source.model), session_id, str(root), secret_values(), linked)
        for child in children:
            write_history(history_dir(root) / f"{child[0]['session']}.jsonl", child)
        write_history(history_dir(root) / f"{session_id}.jsonl", records)
        known[source.sha256] = known[f"session:{source.session_id}"] = session_id
        made.append(session_id)
        print(f"{source.path}: imported as {session_id} ({_summary([rec.parse(r) for r in records])})"
              + (f"; the file has changed since an earlier copy was imported as {earlier}" if earlier else ""))
    _how_to_resume(made, sources)
    return 0


def _files(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise InputError(f"{path}: no such file or folder")
        found += sorted(p for p in path.rglob("*.jsonl") if p.is_file()) if path.is_dir() else [path]
    return list(dict.fromkeys(found))


def _is_subagent(path: Path) -> bool:
    return path.parent.name == "subagents" or path.name.startswith("agent-")


def _read(path: Path, files: list[Path]) -> Source | None:
    """The source in `path`; None for a subagent transcript (read with its parent) or skipped."""
    if _is_subagent(path):
        if not any(_parent_of(path, f) for f in files if not _is_subagent(f)):
            print(f"{path}: a subagent transcript; import its parent session's file to keep it")
        return None
    data = read_plain(path)
    if not data.strip():
        print(f"{path}: empty; nothing imported")
        return None
    first = next(read_lines(path, data), (1, {}))[1]
    if codex.looks_like(first):
        return codex.parse(path, data)
    if claude_code.looks_like(first):
        return claude_code.parse(path, data, [(p, read_plain(p)) for p in _subagents(path)])
    raise InputError(f"{path} line 1: neither a Claude Code transcript nor a Codex rollout (no session_meta, no "
                     "user/assistant/summary record)")


def _subagents(path: Path) -> list[Path]:
    """Subagent transcripts of a Claude Code session: `<session>/subagents/*.jsonl` beside it, and
    `agent-*.jsonl` files in its folder that name it as their session."""
    nested = sorted((path.parent / path.stem / "subagents").glob("*.jsonl"))
    flat = [p for p in sorted(path.parent.glob("agent-*.jsonl")) if _parent_of(p, path)]
    return nested + flat


def _parent_of(sub: Path, parent: Path) -> bool:
    if sub.parent.name == "subagents":
        return sub.parent.parent == parent.parent / parent.stem
    try:
        head = read_plain(sub).split(b"\n", 1)[0]
        return parent.stem.encode() in head and sub.parent == parent.parent
    except OSError:
        return False


def imported(root: Path) -> dict[str, str]:
    """Source SHA-256, and `session:` + source session id, → session id, from the `import` record of
    every history in the project but sub-agents' (theirs names their parent's source)."""
    found: dict[str, str] = {}
    for history in sessions(root):
        try:
            lines = read_plain(history).split(b"\n", 2)[:2]
        except OSError:
            continue
        parsed = _quiet(history, lines)
        if parsed and isinstance(parsed[0][1].get("parent"), dict):
            continue  # an imported sub-agent's: its source is its parent's file
        for _, record in parsed:
            if record.get("kind") == "import" and isinstance(record.get("sha256"), str):
                found[record["sha256"]] = found[f"session:{record.get('source_session')}"] = history.stem
    return found


def _quiet(path: Path, lines: list[bytes]) -> list[tuple[int, dict[str, Any]]]:
    try:
        return list(read_lines(path, b"\n".join(lines)))
    except InputError:
        return []


def _spec_maker(root: Path) -> Any:
    """The request spec of a new session here (rhapsody's own system prompt and tools), per model."""
    from rhapsody.config.settings import load_settings
    from rhapsody.tools import default_toolbox
    from rhapsody.wiring import new_spec

    settings = load_settings(root)
    toolbox = default_toolbox(settings.permission_mode or "auto-edit", sandbox=settings.sandbox)
    return lambda model: new_spec(root, settings, model or "unknown", toolbox)


def _summary(records: list[rec.Record]) -> str:
    kinds: dict[str, type[rec.Known]] = {"message": rec.MessageAdded, "tool_run": rec.ToolRun, "request": rec.RequestMade,
                                         "aside": rec.KeptAside}
    count = {name: sum(1 for r in records if isinstance(r, kind)) for name, kind in kinds.items()}
    missing = sum(1 for r in rec.of(records, rec.MessageAdded) for b in r.content
                  if isinstance(b, ToolResultBlock) and b.content == INTERRUPTED)
    window = history_window(records, head_of(records).model)
    return (f"{count['message']} messages, {count['tool_run']} tool calls"
            + (f" ({missing} without a result in the file)" if missing else "")
            + f", {count['request']} requests with usage, {count['aside']} records kept aside; "
            f"window {window.tokens:,}: {window.source}")


def _how_to_resume(made: list[str], sources: list[Source]) -> None:
    if not made:
        return
    print(f"continue with: rhapsody --resume {made[-1]}" + ("  (or another id above)" if len(made) > 1 else ""))
    if any(s.format == codex.FORMAT for s in sources):
        print("a Codex session names an OpenAI model: resume it with --model (a Claude model) or --provider openai")
    print(f"histories are in {STATE_DIR}/history/; `rhapsody stats ID --what-if sweep` shows what seams would save")
