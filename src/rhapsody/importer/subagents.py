"""Imported Claude Code `Task` sub-agents as rhapsody sub-agents: a history of their own, linked both ways.

Claude Code writes a sub-agent's messages as `isSidechain` lines (in the session's file, or in
`<session-uuid>/subagents/agent-*.jsonl`), each with its `agentId`; the parser keeps them as `sidechain`
asides. Here each agent's lines become a session of its own whose `session` record names the parent
session and the `Task` call (the call whose `prompt` is the agent's first message), and the parent gets the
`subagent` records a native `delegate` call writes, after that call's run, with what the agent spent and
the traffic it kept out. See docs/history-format.md, `subagent`.

Imports: stdlib, rhapsody.core and rhapsody.importer only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rhapsody.core.session import records as rec
from rhapsody.core.session.context import RequestSpec
from rhapsody.core.session.session_figures import USAGE_KEYS, figures
from rhapsody.core.session.tokens import estimate_chars
from rhapsody.importer.to_history import records as history_records
from rhapsody.importer.transcript import Aside, Source, ImportedTurn

TASK_TOOLS = ("Task", "Agent")
"""The names Claude Code gives its sub-agent tool."""


def sidechains(source: Source) -> dict[str, list[Aside]]:
    """The source's sub-agents: each agent's sidechain lines in order, by agent id."""
    found: dict[str, list[Aside]] = {}
    for item in source.items:
        if isinstance(item, Aside) and item.what == "sidechain" and isinstance(item.data.get("agent_id"), str):
            found.setdefault(item.data["agent_id"], []).append(item)
    return found


def child_source(source: Source, agent: str, lines: list[Aside]) -> Source:
    """One agent's lines as a source of its own: its messages as turns, each reply with the usage it reported."""
    items: list[Any] = []
    model = ""
    for line in lines:
        usage = line.data.get("usage")
        usages = []
        if isinstance(usage, dict):
            model = str(line.data.get("model") or model)
            usages = [{**{k: int(usage.get(k) or 0) for k in USAGE_KEYS}, "model": model, "ts": line.ts}]
        items.append(ImportedTurn(str(line.data["role"]), list(line.data["content"]), line.ts, usages=usages))
    return Source(source.format, source.path, f"{source.session_id}:{agent}", source.sha256, len(lines), items,
                  cwd=source.cwd, model=model or source.model)


def task_call(source: Source, task: str) -> str:
    """The id of the source's `Task` call whose prompt is `task` ('' when none is)."""
    for item in source.items:
        if not isinstance(item, ImportedTurn) or item.role != "assistant":
            continue
        for block in item.content:
            if (block.get("type") == "tool_use" and block.get("name") in TASK_TOOLS
                    and isinstance(block.get("input"), dict) and block["input"].get("prompt") == task):
                return str(block.get("id", ""))
    return ""


def first_text(source: Source) -> str:
    """The agent's first message's text: the task it was given."""
    turn = next((i for i in source.items if isinstance(i, ImportedTurn) and i.role == "user"), None)
    return "\n".join(str(b.get("text", "")) for b in turn.content if b.get("type") == "text") if turn else ""


def link(source: Source, parent_id: str, new_id: Callable[[], str], spec_for: Callable[[str], RequestSpec],
         cwd: str, known: tuple[str, ...]) -> tuple[list[list[dict[str, Any]]], dict[str, list[dict[str, Any]]]]:
    """Each sub-agent's history records (its `session` record naming the parent), and the parent's `subagent`
    records by the call they stand before ('' for an agent no call names)."""
    children: list[list[dict[str, Any]]] = []
    linked: dict[str, list[dict[str, Any]]] = {}
    for n, (agent, lines) in enumerate(sidechains(source).items(), 1):
        child = child_source(source, agent, lines)
        if not any(isinstance(i, ImportedTurn) for i in child.items):
            continue
        child_id, sid, task = new_id(), f"sa{n}", first_text(child)
        call = task_call(source, task)
        made = history_records(child, spec_for(child.model), child_id, cwd, known)
        made[0]["parent"] = {"session": parent_id, "tool_use_id": call, "subagent": sid}
        children.append(made)
        linked.setdefault(call, []).extend(subagent_records(made, sid, child_id, call, task))
    return children, linked


def subagent_records(made: list[dict[str, Any]], sid: str, child_id: str, call: str,
                     task: str) -> list[dict[str, Any]]:
    """The parent's two `subagent` records for an imported agent: started, and done with its figures."""
    f = figures(rec.parsed(made))
    ts = made[-1]["ts"]
    common = {"kind": "subagent", "id": sid, "session": child_id, "tool_use_id": call, "model": f.model}
    traffic = sum(len(json.dumps(b, separators=(",", ":"))) for r in made if r["kind"] == "message"
                  for b in r["content"] if b.get("type") in ("tool_use", "tool_result"))
    return [{"ts": made[0]["ts"], **common, "state": "started", "task": task},
            {"ts": ts, **common, "state": "done", "tool_calls": f.tool_calls, "requests": f.requests,
             "usage": {k: f.usage[k] for k in USAGE_KEYS}, "cost_usd": round(f.cost, 6), "priced": f.priced,
             "kept_out_tokens": estimate_chars(traffic) if traffic else 0}]
