"""Claude Code session transcripts (`~/.claude/projects/<project>/<session-uuid>.jsonl`).

Each line is a record with a `type`: `user` and `assistant` records carry a Messages API
`message` and link to their parent by `parentUuid`; `system` records are the harness's own
(`subtype: compact_boundary` marks a compaction, its `logicalParentUuid` the message before
it); `summary` records title a branch; `queue-operation` records mark messages the human
queued; `file-history-snapshot` and `progress` records are UI bookkeeping. One assistant
API message is written as several lines sharing `message.id`, one per content block; they
are merged back here, whatever was written between them (parallel calls: each call's line
hangs off the progress/hook records of the one before, each result off its own call).

The main conversation is the chain of parents from the last message, widened by what that
chain alone misses: every line of an API message the chain passes through (by `message.id`),
and every tool result that answers a call of the conversation (by `tool_use_id`, wherever
its line sits in the file). What is left off (abandoned branches: a rewind or an edited
message), `isSidechain` records and the subagent files in `<session-uuid>/subagents/` become
asides. See docs/history-format.md, "Imported sessions".

Imports: stdlib, rhapsody.core.errors and rhapsody.importer only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rhapsody.core.errors import InputError
from rhapsody.core.pricing import WRITE_1H_KEY
from rhapsody.core.session.session_figures import USAGE_KEYS
from rhapsody.importer.schemas import check_claude
from rhapsody.importer.transcript import (Aside, Compacted, Item, Queued, Source, ImportedTurn, as_dict, digest, expect,
                                          read_lines, text_block, timestamp)
from rhapsody.core.json_types import JsonObject

FORMAT = "claude-code"
TYPES = ("user", "assistant", "system", "summary", "queue-operation", "file-history-snapshot", "progress",
         "attachment")
"""Record types Claude Code writes; `file-history-snapshot`, `progress` and `attachment` are its UI's
bookkeeping (file backups for undo, hook progress) and are not imported."""
SYNTHETIC = "<synthetic>"
"""The model Claude Code names on assistant messages it wrote itself (no API request behind them)."""


def looks_like(first: JsonObject) -> bool:
    """Whether the first record of a file is Claude Code's."""
    return "payload" not in first and (first.get("type") in TYPES or isinstance(first.get("sessionId"), str))


def parse(path: Path, data: bytes, subagents: list[tuple[Path, bytes]]) -> Source:
    """The session in `data` (the file at `path`), its subagents' transcripts as sidechain asides."""
    records = check_claude(path, list(read_lines(path, data)))  # typed at the boundary: the walk trusts the fields
    on_path = _main_conversation(records)
    head = next((r for _, r in records if r.get("sessionId")), {})
    reader = _ClaudeReader(path)
    for line, record in records:
        reader.take(line, record, on_path)
    for sub_path, sub_data in subagents:
        for line, record in check_claude(sub_path, list(read_lines(sub_path, sub_data))):
            if record.get("type") in ("user", "assistant"):
                reader.items.append(_sidechain(sub_path, line, record, reader.now))
    extra = {"git_branch": head.get("gitBranch", ""), "source_version": head.get("version", ""),
             "subagent_files": [str(p) for p, _ in subagents]}
    return Source(FORMAT, path, str(head.get("sessionId") or path.stem), digest(data), len(records), reader.items,
                  cwd=str(head.get("cwd", "")), model=reader.model, extra=extra)


def _main_conversation(records: list[tuple[int, JsonObject]]) -> set[str]:
    """The uuids of the main conversation's user and assistant lines (module docstring)."""
    chain = _main_chain(records)
    lines = [r for _, r in records if r.get("type") in ("user", "assistant") and not r.get("isSidechain")
             and isinstance(r.get("uuid"), str)]
    ids = {_message_id(r) for r in lines if r["uuid"] in chain and r["type"] == "assistant"} - {None}
    members = chain | {r["uuid"] for r in lines if r["type"] == "assistant" and _message_id(r) in ids}
    calls = {b.get("id") for r in lines if r["uuid"] in members for b in _blocks_of(r) if b.get("type") == "tool_use"}
    answered = {b.get("tool_use_id") for r in lines if r["uuid"] in members for b in _blocks_of(r)
                if b.get("type") == "tool_result"}
    for record in lines:
        results = [b.get("tool_use_id") for b in _blocks_of(record) if b.get("type") == "tool_result"]
        if (record["type"] == "user" and record["uuid"] not in members and results
                and all(r in calls and r not in answered for r in results)):
            members.add(record["uuid"])  # a parallel call's result, on its own call's branch
            answered.update(results)
    return members


def _message_id(record: JsonObject) -> str | None:
    message = record.get("message")
    value = message.get("id") if isinstance(message, dict) else None
    return value if isinstance(value, str) else None


def _blocks_of(record: JsonObject) -> list[JsonObject]:
    """The blocks of a line's message, leniently (the strict reading, with its errors, comes after)."""
    message = record.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _main_chain(records: list[tuple[int, JsonObject]]) -> set[str]:
    """The uuids of the conversation that was current when the file ended: the last message's ancestors,
    across compaction boundaries (a boundary starts a new root; `logicalParentUuid` links it back). A
    parent missing from the file (a link into another file) continues at the record written before."""
    main = [r for _, r in records if isinstance(r.get("uuid"), str) and not r.get("isSidechain")]
    where = {r["uuid"]: i for i, r in enumerate(main)}
    at = next((i for i in range(len(main) - 1, -1, -1) if main[i].get("type") in ("user", "assistant")), None)
    chain: set[str] = set()
    while at is not None and main[at]["uuid"] not in chain:
        chain.add(main[at]["uuid"])
        parent = main[at].get("parentUuid") or main[at].get("logicalParentUuid")
        if not isinstance(parent, str):
            break
        at = where.get(parent, at - 1 if at else None)
    return chain


class _ClaudeReader:
    """Turns records into items in file order, merging the lines of one API message."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[Item] = []
        self.model = ""
        self.now = 0.0
        self._turns: dict[str, ImportedTurn] = {}
        """Assistant turns by API message id: a later line of the message adds its blocks there."""

    def take(self, line: int, record: JsonObject, on_path: set[str]) -> None:
        kind = record.get("type")
        self.now = timestamp(record.get("timestamp"), self.now)
        if kind == "summary":
            self.items.append(Aside("summary", self.now, {"summary": str(record.get("summary", "")),
                                                          "leaf_uuid": record.get("leafUuid")}))
        elif kind == "queue-operation":
            self._queue(record)
        elif kind == "system":
            self._system(record)
        elif kind in ("user", "assistant"):
            if record.get("isSidechain"):
                self.items.append(_sidechain(self.path, line, record, self.now))
            elif record.get("uuid") not in on_path:
                self.items.append(Aside("branch", self.now, _message_fields(self.path, line, record)))
            elif kind == "user":
                self._user(line, record)
            else:
                self._assistant(line, record)

    def _queue(self, record: JsonObject) -> None:
        content = record.get("content")
        if record.get("operation") == "enqueue" and isinstance(content, str) and content.strip():
            self.items.append(Queued(self.now, content))

    def _system(self, record: JsonObject) -> None:
        if record.get("subtype") == "compact_boundary":
            meta = as_dict(record.get("compactMetadata"))
            self.items.append(Compacted(self.now, {"trigger": meta.get("trigger"), "pre_tokens": meta.get("preTokens"),
                                                   "source_uuid": record.get("uuid")}))
            return
        self.items.append(Aside("system", self.now, {"subtype": record.get("subtype"),
                                                     "text": str(record.get("content", ""))}))

    def _user(self, line: int, record: JsonObject) -> None:
        message = expect(self.path, line, record.get("message"), dict, "'message'")
        flags = {"source_id": record.get("uuid")}
        if record.get("isCompactSummary"):
            flags["compact_summary"] = True
        if record.get("isMeta"):
            flags["meta"] = True
        content = blocks(self.path, line, message.get("content"))
        if content:
            self.items.append(ImportedTurn("user", content, self.now, flags=flags, line=line))

    def _assistant(self, line: int, record: JsonObject) -> None:
        message = expect(self.path, line, record.get("message"), dict, "'message'")
        content = blocks(self.path, line, message.get("content"))
        message_id = message.get("id")
        usage = _usage(message, self.now)
        turn = self._turns.get(message_id) if isinstance(message_id, str) else None
        if turn is not None:  # usage repeats on every line of a message: one request, the output as it grew
            turn.content.extend(content)
            if usage and turn.usages:
                turn.usages[-1] = {**usage, "output_tokens": max(usage["output_tokens"], turn.usages[-1]["output_tokens"]),
                                   "ts": turn.usages[-1]["ts"]}
            return
        if message.get("model") and message.get("model") != SYNTHETIC:
            self.model = str(message["model"])
        turn = ImportedTurn("assistant", content, self.now, usages=[usage] if usage else [], flags={"source_id": message_id},
                    line=line)
        if isinstance(message_id, str):
            self._turns[message_id] = turn
        self.items.append(turn)


def _usage(message: JsonObject, ts: float) -> JsonObject | None:
    usage = message.get("usage")
    if not isinstance(usage, dict) or message.get("model") == SYNTHETIC:
        return None
    figures = {k: usage[k] if isinstance(usage.get(k), int) else 0 for k in USAGE_KEYS}
    hour = as_dict(usage.get("cache_creation")).get("ephemeral_1h_input_tokens")
    if isinstance(hour, int) and hour > 0:  # billed at 2x base, the 5-minute rest at 1.25x
        figures[WRITE_1H_KEY] = min(hour, figures["cache_creation_input_tokens"])
    return {**figures, "model": str(message.get("model", "")), "stop_reason": message.get("stop_reason"), "ts": ts}


def _message_fields(path: Path, line: int, record: JsonObject) -> JsonObject:
    message = expect(path, line, record.get("message"), dict, "'message'")
    return {"role": record["type"], "content": blocks(path, line, message.get("content")), "source_uuid": record.get("uuid")}


def _sidechain(path: Path, line: int, record: JsonObject, now: float) -> Aside:
    fields = _message_fields(path, line, record)
    message = record.get("message") or {}
    usage = _usage(message, now)
    if usage:
        fields["usage"] = {k: usage[k] for k in (*USAGE_KEYS, WRITE_1H_KEY) if k in usage}
        fields["model"] = usage["model"]
    return Aside("sidechain", timestamp(record.get("timestamp"), now), {**fields, "agent_id": record.get("agentId")})


def blocks(path: Path, line: int, content: Any) -> list[JsonObject]:
    """Message content as a list of blocks: a string becomes a text block; empty text is dropped
    (the API refuses it); anything that is not a block is an InputError naming the line."""
    if isinstance(content, str):
        return text_block(content)
    expect(path, line, content, list, "message content")
    out = []
    for i, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise InputError(f"{path} line {line}: content block {i} has no 'type'")
        if block["type"] == "text" and not str(block.get("text", "")).strip():
            continue
        out.append(block)
    return out
