"""A parsed source session as rhapsody history records: the same kinds the native writer uses.

First the turns are made a conversation the Messages API accepts, as the source's own API
did: same-role neighbours merged (never across a compaction), tool_result blocks first in
their message, every tool_use answered in the next message (an interrupted call gets an
error result saying so), results without their call set aside, an opening user message when
the source begins with the assistant. Then each turn becomes records in the order rhapsody
writes them live: `request` and `usage` for every source request behind an assistant message
(the usage as the source reported it, so `rhapsody stats` prices what happened), the
`message`, a `tool_run` per answered call. `aside`, `compaction` and `hint`/`hint_delivered`
keep the rest, and a final `thinking_cut` takes the imported thinking out of the view: its
signatures bind it to the source's system prompt and tools, which a resumed request does not
carry. See docs/history-format.md, "Imported sessions".
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from pydantic import ValidationError

from rhapsody import __version__
from rhapsody.core.session.context import Conversation, RequestSpec, measure_messages, spec_fields
from rhapsody.core.errors import InputError
from rhapsody.core.session.messages import THINKING_TYPES, Message
from rhapsody.core.session.records import parse
from rhapsody.core.secrets import mask
from rhapsody.core.session.todo import from_imported
from rhapsody.core.pricing import WRITE_1H_KEY
from rhapsody.core.session.session_figures import USAGE_KEYS
from rhapsody.importer.transcript import Aside, Compacted, Item, Queued, Source, ImportedTurn
from rhapsody.core.json_types import JsonObject

INTERRUPTED = ("No result in the imported transcript: the call was interrupted or its output was lost. "
               "Check its effects before running it again.")
OPENING = "[imported session: the source transcript begins with an assistant message]"
THINKING_CUT = "imported: the thinking signatures bind it to the source's system prompt and tools"
SHELL_TOOLS = ("Bash", "bash", "shell", "local_shell", "shell_command", "exec_command")


def normalize(items: list[Item]) -> list[Item]:
    """The items with their turns made a valid conversation (module docstring)."""
    items = _merged(items)
    items = _paired(items)
    items = _merged(items)
    first = next((item for item in items if isinstance(item, ImportedTurn)), None)
    if first is not None and first.role == "assistant":
        items.insert(items.index(first), ImportedTurn("user", [{"type": "text", "text": OPENING}], first.ts))
    return items


def _merged(items: list[Item]) -> list[Item]:
    out: list[Item] = []
    last: ImportedTurn | None = None
    for item in items:
        if isinstance(item, Compacted):
            last = None
        elif isinstance(item, ImportedTurn):
            if not item.content:
                continue
            if last is not None and last.role == item.role:
                last.content.extend(item.content)
                last.usages.extend(item.usages)
                if not item.flags.get("meta"):  # the merged message holds words the human typed too
                    last.flags.pop("meta", None)
                continue
            last = item
        out.append(item)
    for item in out:
        if isinstance(item, ImportedTurn) and item.role == "user":
            item.content.sort(key=lambda b: b.get("type") != "tool_result")  # stable: results first
    return out


def _paired(items: list[Item]) -> list[Item]:
    out: list[Item] = []
    calls: list[str] = []
    for at, item in enumerate(items):
        if isinstance(item, ImportedTurn) and item.role == "user":
            item.content = _found(item.content, calls, items[at + 1:]) if calls else item.content
            item.content, orphans = _answered(item.content, calls, item.ts)
            out.append(item)
            out += [Aside("orphan_result", item.ts, {"block": b}) for b in orphans]
            calls = []
            continue
        if isinstance(item, (ImportedTurn, Compacted)) and calls:  # the calls' answer never came
            out.append(ImportedTurn("user", [_interrupted(c) for c in calls], out[-1].ts))
            calls = []
        if isinstance(item, ImportedTurn):
            calls = [b["id"] for b in item.content if b.get("type") == "tool_use"]
        out.append(item)
    if calls:
        out.append(ImportedTurn("user", [_interrupted(c) for c in calls], out[-1].ts))
    return out


def _found(content: list[JsonObject], calls: list[str], later: list[Item]) -> list[JsonObject]:
    """`content` with the results of `calls` it lacks taken from later user turns: a result is matched to
    its call by `tool_use_id`, wherever the source wrote it (before the source compacted again)."""
    missing = set(calls) - {b.get("tool_use_id") for b in content if b.get("type") == "tool_result"}
    taken: list[JsonObject] = []
    for item in later:
        if not missing or isinstance(item, Compacted):
            break
        if isinstance(item, ImportedTurn) and item.role == "user":
            mine = [b for b in item.content if b.get("type") == "tool_result" and b.get("tool_use_id") in missing]
            item.content = [b for b in item.content if not any(b is m for m in mine)]
            missing -= {b.get("tool_use_id") for b in mine}
            taken += mine
    return taken + content


def _answered(content: list[JsonObject], calls: list[str],
              ts: float) -> tuple[list[JsonObject], list[JsonObject]]:
    """(content with a result for every call first, results that answer no call)."""
    results = [b for b in content if b.get("type") == "tool_result"]
    kept = [b for b in results if b.get("tool_use_id") in calls]
    orphans = [b for b in results if b.get("tool_use_id") not in calls]
    answered = {b.get("tool_use_id") for b in kept}
    missing = [_interrupted(c) for c in calls if c not in answered]
    return missing + kept + [b for b in content if b.get("type") != "tool_result"], orphans


def _interrupted(call_id: str) -> JsonObject:
    return {"type": "tool_result", "tool_use_id": call_id, "content": INTERRUPTED, "is_error": True}


TODO_CALLS = ("TodoWrite", "update_plan", "todo_write")
"""The sources' todo list tools, whose lists become `todo` records (core/session/todo.py)."""

class _Writer:
    """Collects records and folds messages, so each request record measures the view it had."""

    def __init__(self, source: Source, spec: RequestSpec, known: tuple[str, ...]) -> None:
        self.source = source
        self.spec = spec
        self.known = known
        self.records: list[JsonObject] = []
        self.conv = Conversation()
        self.names: dict[str, str] = {}
        self.inputs: JsonObject = {}
        self.pending: list[tuple[str, str]] = []
        self.hints = 0
        self.linked: dict[str, list[JsonObject]] = {}
        """Records to write before a call's run, by call id (an imported sub-agent's; '' for those of no call)."""

    def add(self, ts: float, kind: str, **fields: Any) -> int:
        self.records.append({"ts": round(ts, 3), "kind": kind, **fields})
        if kind in ("message", "compaction", "thinking_cut"):
            self.conv.apply(parse(self.records[-1]))
        return len(self.records) - 1

    def turn(self, turn: ImportedTurn) -> None:
        if turn.role == "user":
            turn.content = [self._masked(b) for b in turn.content]
        try:
            message = Message(role=turn.role, content=turn.content)  # type: ignore[arg-type]
        except ValidationError as exc:
            reason = str(exc).splitlines()[0]
            raise InputError(f"{self.source.path} line {turn.line}: a {turn.role} message cannot be read ({reason})") from None
        if turn.role == "assistant":
            self._requests(turn)
        else:
            self._runs(turn)
        flags = {k: v for k, v in turn.flags.items() if v is not None}
        seq = self.add(turn.ts, "message", role=turn.role, content=[b.dump() for b in message.content], **flags)
        for block in turn.content:
            if block.get("type") == "tool_use":
                self.names[block["id"]], self.inputs[block["id"]] = block["name"], block.get("input")
        if turn.role == "user":
            self._deliver(turn, seq)

    def _requests(self, turn: ImportedTurn) -> None:
        view = self.conv.active()
        size, tokens = measure_messages(self.spec, view)
        for usage in turn.usages:
            model = usage.get("model") or self.source.model
            self.add(usage["ts"], "request", bytes=size, est_tokens=tokens, messages=len(view), model=model)
            self.add(usage["ts"], "usage", stop_reason=usage.get("stop_reason"),
                     **{k: usage[k] for k in (*USAGE_KEYS, WRITE_1H_KEY) if k in usage})

    def _masked(self, block: JsonObject) -> JsonObject:
        """A tool result with credentials masked, as rhapsody masks its own tools' output."""
        if block.get("type") != "tool_result":
            return block
        content = block.get("content")
        if isinstance(content, str):
            return {**block, "content": mask(content, self.known)}
        if isinstance(content, list):
            return {**block, "content": [{**c, "text": mask(c["text"], self.known)}
                                         if isinstance(c, dict) and isinstance(c.get("text"), str) else c
                                         for c in content]}
        return block

    def _runs(self, turn: ImportedTurn) -> None:
        for block in turn.content:
            call_id = block.get("tool_use_id")
            if block.get("type") != "tool_result" or call_id not in self.names:
                continue
            fields: JsonObject = {"tool_use_id": call_id, "name": self.names[call_id],
                                      "is_error": bool(block.get("is_error")), "imported": True}
            command = _command(self.names[call_id], self.inputs.get(call_id))
            if command:
                fields["command"] = command
                code = exit_code(block.get("content"))
                if code is not None:  # only where the source says it: a result without one shows none
                    fields["exit_code"] = code
            self._linked(call_id)
            self.add(turn.ts, "tool_run", **fields)
            self._todo(turn.ts, call_id, block)

    def _linked(self, call_id: str) -> None:
        """The records that stand before this call's run: a sub-agent's, as a native `delegate` call writes them."""
        for record in self.linked.pop(call_id, []):
            self.add(record["ts"], record["kind"], **{k: v for k, v in record.items() if k not in ("ts", "kind")})

    def _todo(self, ts: float, call_id: str, result: JsonObject) -> None:
        """A todo list call that ran (Claude Code's TodoWrite, Codex's update_plan) becomes rhapsody's list."""
        if self.names[call_id] not in TODO_CALLS or result.get("is_error"):
            return
        items = from_imported(self.inputs.get(call_id))
        if items is not None:
            self.add(ts, "todo", items=[i.model_dump() for i in items], at=len(self.conv.messages),
                     tool_use_id=call_id)

    def queued(self, item: Queued) -> None:
        self.hints += 1
        hint_id = f"h{self.hints}"
        self.add(item.ts, "hint", id=hint_id, text=item.text, mode="queue")
        self.pending.append((hint_id, item.text))

    def _deliver(self, turn: ImportedTurn, seq: int) -> None:
        texts = " ".join(b.get("text", "") for b in turn.content if b.get("type") == "text")
        landed = [hint_id for hint_id, text in self.pending if text.strip() and text.strip() in texts]
        if landed:
            self.add(turn.ts, "hint_delivered", ids=landed, message_seq=seq, where="in the source session")
            self.pending = [p for p in self.pending if p[0] not in landed]

    def finish(self) -> None:
        """Hints the source never delivered are closed, so a resume does not send them; thinking is cut."""
        last = max((i for i, r in enumerate(self.records) if r["kind"] == "message"), default=None)
        ts = self.records[-1]["ts"]
        if self.pending and last is not None:
            self.add(ts, "hint_delivered", ids=[p[0] for p in self.pending], message_seq=last,
                     where="never delivered in the source session")
        if any(b.type in THINKING_TYPES for m in self.conv.messages for b in m.content):
            self.add(ts, "thinking_cut", boundary=len(self.conv.messages), reason=THINKING_CUT)


_EXIT = re.compile(r"^(?:Exit code:? |Process exited with code )(-?\d+)\b")
"""How the sources state a command's exit status: Claude Code's failed Bash results begin `Exit code N`,
Codex's newer outputs `Exit code: N` (or `Process exited with code N`)."""


def exit_code(content: Any) -> int | None:
    """The exit status a shell call's result states, or None where the source does not state one (Claude
    Code says nothing for a command that succeeded); Codex's JSON outputs carry `metadata.exit_code`."""
    text = content if isinstance(content, str) else "".join(
        str(c.get("text", "")) for c in content if isinstance(c, dict)) if isinstance(content, list) else ""
    if text.startswith("{"):
        try:
            meta = json.loads(text).get("metadata")
        except (ValueError, AttributeError, RecursionError):
            meta = None
        code = meta.get("exit_code") if isinstance(meta, dict) else None
        return code if isinstance(code, int) and not isinstance(code, bool) else None
    found = _EXIT.match(text)
    return int(found.group(1)) if found else None


def _command(name: str, arguments: Any) -> str:
    """The shell command of a shell-like call, for the field note's harness facts."""
    if name not in SHELL_TOOLS or not isinstance(arguments, dict):
        return ""
    command = arguments.get("command")
    if isinstance(command, list):
        return " ".join(str(part) for part in command)
    return command if isinstance(command, str) else ""


def records(source: Source, spec: RequestSpec, session_id: str, cwd: str,
            known: tuple[str, ...] = (), linked: dict[str, list[JsonObject]] | None = None) -> list[JsonObject]:
    """Every record of the imported session's history, in order, without `v` and `seq`; tool results
    have `known` secret values and credential shapes masked; `linked`: records to write before a call's run,
    by its id (those under '' or of a call that never ran go last)."""
    items = normalize(source.items)
    writer = _Writer(source, spec, known)
    writer.linked = dict(linked or {})
    start = next((i.ts for i in items if isinstance(i, ImportedTurn)), time.time())
    writer.add(start, "session", session=session_id, cwd=cwd, version=__version__, **spec_fields(spec))
    writer.add(time.time(), "import", source=str(source.path), format=source.format, sha256=source.sha256,
               source_session=source.session_id, source_cwd=source.cwd, lines=source.lines,
               context_window=source.context_window, **source.extra)
    for item in items:
        if isinstance(item, ImportedTurn):
            writer.turn(item)
        elif isinstance(item, Aside):
            writer.add(item.ts, "aside", what=item.what, **item.data)
        elif isinstance(item, Compacted):
            writer.add(item.ts, "compaction", boundary=len(writer.conv.messages), **item.data)
        else:
            writer.queued(item)
    for call in list(writer.linked):
        writer._linked(call)
    writer.finish()
    return writer.records
