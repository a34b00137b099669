"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-<stamp>-<uuid>.jsonl`).

Each line is `{timestamp, type, payload}`; the first is `session_meta` (id, cwd, cli_version,
git). `response_item` payloads are the Responses API items the model saw: `message` (role
user, assistant or developer; content `input_text`, `output_text`, `input_image`),
`reasoning` (summary texts, `encrypted_content`), `function_call` (name, `arguments` as a JSON
string, `call_id`), `function_call_output` (call_id, output), `custom_tool_call(_output)`,
`local_shell_call`. `event_msg` payloads are UI events; `token_count` carries
`info.last_token_usage` (input_tokens, cached_input_tokens, output_tokens,
reasoning_output_tokens) for the request just answered and the model's context window.
`turn_context` names the model; `compacted` replaces the context with its `message`.
See docs/history-format.md, "Imported sessions".

Imports: stdlib, rhapsody.core.errors and rhapsody.importer only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rhapsody.core.errors import InputError
from rhapsody.importer.schemas import check_codex
from rhapsody.importer.transcript import (Aside, Compacted, Item, Source, ImportedTurn, as_dict, digest, expect, read_lines,
                                          text_block, timestamp)
from rhapsody.core.json_types import JsonObject

FORMAT = "codex"
CALLS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUTS = ("function_call_output", "custom_tool_call_output")


def looks_like(first: JsonObject) -> bool:
    """Whether the first record of a file is a Codex rollout's `session_meta` (or, in rollouts written
    before it existed, a bare `{id, timestamp, instructions}` header)."""
    return (first.get("type") == "session_meta" and isinstance(first.get("payload"), dict)) or _legacy(first)


def _legacy(first: JsonObject) -> bool:
    return "type" not in first and isinstance(first.get("id"), str) and "timestamp" in first


def parse(path: Path, data: bytes) -> Source:
    """The session in `data` (the rollout at `path`)."""
    records = list(read_lines(path, data))
    if records and _legacy(records[0][1]):
        records = _unwrapped(records)
    check_codex(path, records)  # typed at the boundary: the walk trusts the fields
    meta = as_dict(records[0][1].get("payload")) if records else {}
    reader = _CodexReader(path)
    for line, record in records[1:]:
        reader.take(line, record)
    git = as_dict(meta.get("git"))
    extra = {"git_branch": git.get("branch", ""), "source_version": meta.get("cli_version", "")}
    return Source(FORMAT, path, str(meta.get("id") or path.stem), digest(data), len(records), reader.items,
                  cwd=str(meta.get("cwd", "")), model=reader.model, context_window=reader.window, extra=extra)


def _unwrapped(records: list[tuple[int, JsonObject]]) -> list[tuple[int, JsonObject]]:
    """A rollout of the older form (a bare header, then bare response items and `record_type` state lines)
    in the current one."""
    (line, head), rest = records[0], records[1:]
    items = [(n, {"timestamp": r.get("timestamp", head["timestamp"]), "type": "response_item", "payload": r})
             for n, r in rest if "record_type" not in r]
    return [(line, {"type": "session_meta", "timestamp": head["timestamp"], "payload": head}), *items]


class _CodexReader:
    """Turns rollout lines into items, grouping one response's items into one assistant turn."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[Item] = []
        self.model = ""
        self.window: int | None = None
        self.now = 0.0
        self.line = 0
        self._last_total: Any = None

    def take(self, line: int, record: JsonObject) -> None:
        self.now, self.line = timestamp(record.get("timestamp"), self.now), line
        kind = record.get("type")
        if kind not in ("response_item", "event_msg", "turn_context", "compacted"):
            return
        payload: JsonObject = expect(self.path, line, record.get("payload"), dict, "'payload'")
        if kind == "response_item":
            self._item(line, payload)
        elif kind == "event_msg" and payload.get("type") == "token_count":
            self._tokens(payload)
        elif kind == "event_msg" and payload.get("type") == "turn_aborted":
            self.items.append(Aside("turn_aborted", self.now, {"reason": payload.get("reason")}))
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            self.model = payload["model"]
        elif kind == "compacted":
            self.items.append(Compacted(self.now, {"trigger": None, "pre_tokens": None}))
            self._turn("user", text_block(str(payload.get("message", ""))), compact_summary=True)

    def _item(self, line: int, payload: JsonObject) -> None:
        kind = payload.get("type")
        if kind == "message":
            self._message(line, payload)
        elif kind == "reasoning":
            summary = [s.get("text", "") for s in payload.get("summary") or [] if isinstance(s, dict)]
            thinking: JsonObject = {"type": "thinking", "thinking": "\n\n".join(str(s) for s in summary),
                                        "signature": ""}
            if isinstance(payload.get("encrypted_content"), str):
                thinking["encrypted_content"] = payload["encrypted_content"]
            self._turn("assistant", [thinking])
        elif kind in CALLS:
            self._turn("assistant", [_call(self.path, line, payload)])
        elif kind in OUTPUTS:
            call_id = expect(self.path, line, payload.get("call_id"), str, "'call_id'")
            content, failed = _output(payload.get("output"))
            block: JsonObject = {"type": "tool_result", "tool_use_id": call_id, "content": content}
            if failed:
                block["is_error"] = True
            self._turn("user", [block])
        else:
            self.items.append(Aside(str(kind), self.now, {"item": payload}))

    def _message(self, line: int, payload: JsonObject) -> None:
        role = payload.get("role")
        content = expect(self.path, line, payload.get("content"), list, "message content")
        if role not in ("user", "assistant"):
            text = "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
            self.items.append(Aside(str(role), self.now, {"text": text}))
            return
        self._turn(role, [b for c in content for b in _content(self.path, line, c)])

    def _turn(self, role: str, content: list[JsonObject], compact_summary: bool = False) -> None:
        if not content:
            return
        last = next((i for i in reversed(self.items) if not isinstance(i, Aside)), None)
        if isinstance(last, ImportedTurn) and last.role == role and not compact_summary:
            last.content.extend(content)
            return
        self.items.append(ImportedTurn(role, content, self.now, flags={"compact_summary": True} if compact_summary else {},
                               line=self.line))

    def _tokens(self, payload: JsonObject) -> None:
        """The usage of the request just answered, on the assistant turn it produced."""
        info = payload.get("info")
        if not isinstance(info, dict):
            return
        if isinstance(info.get("model_context_window"), int):
            self.window = info["model_context_window"]
        last, total = info.get("last_token_usage"), info.get("total_token_usage")
        turn = self._answered()
        if not isinstance(last, dict) or total == self._last_total or turn is None:
            return  # Codex repeats a token_count when only the rate limits changed
        self._last_total = total
        cached = _int(last.get("cached_input_tokens"))
        turn.usages.append({"input_tokens": max(0, _int(last.get("input_tokens")) - cached),
                            "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached,
                            "output_tokens": _int(last.get("output_tokens")), "model": self.model,
                            "stop_reason": None, "ts": self.now})

    def _answered(self) -> ImportedTurn | None:
        """The assistant turn a token count is for: the latest, past any outputs of its calls (they may be
        written before the count comes), but never past a message the user wrote after it."""
        for item in reversed(self.items):
            if isinstance(item, ImportedTurn) and item.role == "assistant":
                return item
            if isinstance(item, ImportedTurn) and any(b.get("type") != "tool_result" for b in item.content):
                return None
        return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _content(path: Path, line: int, item: Any) -> list[JsonObject]:
    """One Responses API content item as Messages API blocks."""
    if not isinstance(item, dict):
        raise InputError(f"{path} line {line}: a message content item is not an object")
    kind = item.get("type")
    if kind in ("input_text", "output_text", "text"):
        return text_block(str(item.get("text", "")))
    if kind == "input_image" and isinstance(item.get("image_url"), str):
        return [_image(item["image_url"])]
    return [{"type": "text", "text": f"[{kind}]"}]


def _image(url: str) -> JsonObject:
    """An image block: a data URL keeps its bytes (base64), any other URL stays a URL."""
    if url.startswith("data:") and ";base64," in url:
        media, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _call(path: Path, line: int, payload: JsonObject) -> JsonObject:
    """A call item as a tool_use block under its own tool name; arguments that are not a JSON
    object are kept verbatim under `_unparsed`."""
    call_id = payload.get("call_id") or payload.get("id")
    expect(path, line, call_id, str, "'call_id'")
    if payload["type"] == "local_shell_call":
        return {"type": "tool_use", "id": call_id, "name": "local_shell", "input": payload.get("action") or {}}
    name = expect(path, line, payload.get("name"), str, "'name'")
    if payload["type"] == "custom_tool_call":
        return {"type": "tool_use", "id": call_id, "name": name, "input": {"input": str(payload.get("input", ""))}}
    raw = payload.get("arguments", "")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except (ValueError, RecursionError):  # kept verbatim, as any arguments that do not parse
        arguments = None
    return {"type": "tool_use", "id": call_id, "name": name,
            "input": arguments if isinstance(arguments, dict) else {"_unparsed": str(raw)}}


def _output(output: Any) -> tuple[Any, bool]:
    """(tool_result content, failed) of a call's output: a string, a list of content items, or the older
    `{content, success}` object."""
    if isinstance(output, dict):
        return str(output.get("content", "")), output.get("success") is False
    if isinstance(output, list):
        return [b for item in output if isinstance(item, dict) for b in _output_item(item)], False
    return str(output if output is not None else ""), False


def _output_item(item: JsonObject) -> list[JsonObject]:
    if item.get("type") == "input_image" and isinstance(item.get("image_url"), str):
        return [_image(item["image_url"])]
    return text_block(str(item.get("text", "")))
