"""Headless mode: `rhapsody -p TASK` runs one turn and prints what happens.

Text output streams the narration and one line per tool call; `--output-format jsonl`
prints every event as a JSON object instead. Exit status: 0 when the turn ended, 2 when it
failed, 3 when a limit (`max_steps_per_turn`, `max_cost_usd`) ended it (the reason is on
stderr).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from contextlib import aclosing
from typing import Any, TextIO

from rhapsody.core import events as ev
from rhapsody.core.loop import Agent
from rhapsody.render import limit_line, print_event


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
            elif isinstance(event, ev.LimitsExceeded):
                err.write(f"rhapsody: {limit_line(event)}\n")
                status = 3
            out.flush()
    return status


def event_dict(event: ev.Event) -> dict[str, Any]:
    """An event as a JSON-ready dict with its type name."""
    data: dict[str, Any] = {"event": type(event).__name__}
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        if hasattr(value, "dump"):
            value = value.dump()
        elif hasattr(value, "to_api"):
            value = value.to_api()
        data[field.name] = value
    return data
