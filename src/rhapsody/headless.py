"""Headless mode: `rhapsody -p TASK` runs one turn and prints what happens.

Text output streams the narration and one line per tool call; `--output-format jsonl`
prints every event as a JSON object instead. Exit status: 0 when the turn ended, 2 when it
failed (the reason is on stderr).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from contextlib import aclosing
from typing import Any, TextIO

from rhapsody.core import events as ev
from rhapsody.core.loop import Agent
from rhapsody.render import seam_line, tool_line


async def run_headless(agent: Agent, task: str, output: str = "text", out: TextIO | None = None,
                       err: TextIO | None = None) -> int:
    """Run one turn to its end; returns the exit status."""
    out = out or sys.stdout
    err = err or sys.stderr
    status = 0
    async with aclosing(agent.run(task)) as stream:
        async for event in stream:
            if output == "jsonl":
                out.write(json.dumps(event_dict(event), ensure_ascii=False) + "\n")
            else:
                print_event(event, out)
            if isinstance(event, ev.Failed):
                err.write(f"rhapsody: {event.message}\n")
                status = 2
            out.flush()
    return status


def print_event(event: ev.Event, out: TextIO) -> None:
    """One event as the line-based front ends show it."""
    if isinstance(event, ev.TextDelta):
        out.write(event.text)
    elif isinstance(event, ev.BlockStopped) and event.kind == "text":
        out.write("\n")
    elif isinstance(event, ev.ToolFinished):
        out.write(f"  ⏺ {tool_line(event.call, event.is_error, event.duration_ms, event.exit_code)}\n")
    elif isinstance(event, ev.NarrationViolation):
        out.write(f"  ✗ {event.call.name} not run: {event.words} words of narration, {event.required} required "
                  f"(violations: {event.total})\n")
    elif isinstance(event, ev.Retrying):
        asked = f" (server asked {event.asked:g} s)" if event.asked is not None and event.asked > event.delay else ""
        out.write(f"\n  ↻ retry {event.attempt} in {event.delay:.1f} s{asked}: {event.reason}\n")
    elif isinstance(event, ev.SeamCommitted):
        out.write(f"  ── {seam_line(event.record)}\n")
    elif isinstance(event, ev.ContextPruned):
        b, a = event.record["before"], event.record["after"]
        out.write(f"  ── rolling cut: {len(event.record['ids'])} calls out, {b['request_bytes']:,} → {a['request_bytes']:,} bytes\n")
    elif isinstance(event, ev.HandoffFailed):
        out.write(f"  ✗ handoff: {event.reason}\n")
    elif isinstance(event, ev.HintDelivered):
        out.write(f"  ✓ hints {', '.join(event.hint_ids)} delivered ({event.where})\n")


def event_dict(event: ev.Event) -> dict[str, Any]:
    """An event as a JSON-ready dict with its type name."""
    data: dict[str, Any] = {"event": type(event).__name__}
    for field in dataclasses.fields(event):  # type: ignore[arg-type]
        value = getattr(event, field.name)
        if hasattr(value, "dump"):
            value = value.dump()
        elif hasattr(value, "to_api"):
            value = value.to_api()
        data[field.name] = value
    return data
