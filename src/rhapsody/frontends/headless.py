"""Headless mode: `rhapsody -p TASK` runs one turn and prints what happens.

Text output streams the narration and one line per tool call (with the reason of every
refused or failed call); `--output-format jsonl` prints a `session` event first (id,
model, cwd, permission mode), then every loop event as a JSON object named by its `json_name` (`turn_started`,
`text_delta`, `tool_finished`; docs/python-api.md lists them all), and a `result` event last (exit status, API requests, turns, tool
calls, refused calls: by a permission or by the narration rule, seams, tokens, cost), as Claude Code's stream-json does. Exit status: 0 when the turn ended, 2 when it
failed, 3 when a limit (`max_steps_per_turn`, `max_cost_usd`) ended it, 4 when it ended but
a call was refused because it would have asked a human (the reason is on stderr), or when a
`/handoff` task was refused because the seam would not pay (the figures are on stderr).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from contextlib import aclosing
from typing import TextIO

from rhapsody.commands.slash import run_command
from rhapsody.core import events as ev
from rhapsody.core.agent import ops
from rhapsody.core.event_json import as_json
from rhapsody.core.session import records as rec
from rhapsody.core.session.checkpoints import settle
from rhapsody.core.agent.loop import Agent
from rhapsody.core.session.messages import ToolResultBlock
from rhapsody.view.render import limit_line, print_event
from rhapsody.view.sink import json_line, safe_stream
from rhapsody.core.json_types import JsonObject


async def run_headless(agent: Agent, task: str, output: str = "text", out: TextIO | None = None,
                       err: TextIO | None = None, typed: str | None = None) -> int:
    """Run one turn to its end; returns the exit status. `typed`: what the human wrote when `task` holds
    more (a custom command's prompt): only its words attach images, as in the app."""
    out = safe_stream(out or sys.stdout)  # text and JSON lines alike pass the one sink
    err = safe_stream(err or sys.stderr)
    status = 0
    start = history_length(agent)
    denials: list[ev.ToolFinished] = []
    text = output != "jsonl"
    if output == "jsonl":
        _json(out, session_event(agent))
    if task.split(maxsplit=1)[:1] == ["/handoff"]:  # a seam of a resumed session: the one command headless runs
        refused = _handoff(agent, task, err)
        if refused is not None:
            if output == "jsonl":
                _json(out, result_event(agent, refused, []))
            return refused
        task = ""
    async with aclosing(agent.run(task, typed)) as stream:
        async for event in stream:
            if not text:
                _json(out, as_json(event))
            match event:
                case ev.Failed():  # said once, on stderr (and as its JSON line)
                    err.write(f"rhapsody: {event.message}\n")
                    status = 2
                case ev.LimitsExceeded():
                    err.write(f"rhapsody: {limit_line(event)}\n")
                    status = 3
                case ev.ToolFinished() if event.refused:
                    denials.append(event)
                    if text:
                        print_event(event, out)
                case _:
                    if text:
                        print_event(event, out)  # the shared renderer's own match is exhaustive
            out.flush()
    records = written_since(agent, start)
    unanswered = unanswered_refusals(records)
    if unanswered and status == 0:
        status = REFUSED_STATUS
    if output == "jsonl":
        _json(out, result_event(agent, status, records, denials))
        out.flush()
    elif denials:
        err.write(f"rhapsody: {refusal_summary(len(denials), unanswered)}\n")
    await asyncio.to_thread(settle, agent.session)  # a first checkpoint still hashing the tree is recorded
    return status


def history_length(agent: Agent) -> int:
    """How many records the session's history holds: where this run's own begin."""
    return len(agent.session.records)


def written_since(agent: Agent, start: int) -> list[rec.Record]:
    """The records this run wrote, folded once it is over into its exit status and `result` summary."""
    return agent.session.records[start:]


def _handoff(agent: Agent, task: str, err: TextIO) -> int | None:
    """`-p /handoff`: None when the handoff turn is to run, else the exit status after one line on stderr
    (REFUSED_STATUS when the seam would not pay: there is no one to ask)."""
    outcome = run_command(agent, task)
    if isinstance(outcome.op, ops.RequestHandoff) and not outcome.confirm:
        agent.request_handoff()  # headless drives the loop itself: the handoff turn runs as `run_headless`'s turn
        return None
    why = "; not handed off: headless asks no one (`-p '/handoff anyway'` forces it)" if outcome.confirm else ""
    err.write(f"rhapsody: {outcome.text}{why}\n")
    return REFUSED_STATUS if outcome.confirm else 0


REFUSED_STATUS = 4
"""Exit status of a run that otherwise ended well but had a call refused because it would have asked a
human and none can answer headless: the task may be half done, so a script must not read it as success."""


def unanswered_refusals(records: Sequence[rec.Record]) -> int:
    """Calls refused because they would have asked a human (the `mode` refused them, not a rule)."""
    return sum(1 for r in records if isinstance(r, rec.Permission) and r.decision == "deny" and r.by == "mode")


def narration_refusals(records: Sequence[rec.Record]) -> int:
    """Calls the narration rule refused (too few words of narration before them): refused, never run."""
    return sum(1 for r in records if isinstance(r, rec.Violation))


def refusal_summary(refused: int, unanswered: int) -> str:
    """One line on stderr after a run with refused calls."""
    from rhapsody.core.counts import counted

    if unanswered == refused:
        return (f"{counted(refused, 'tool call')} refused: no human to ask in headless mode; allow them with "
                "rules or another --permission-mode")
    line = f"{counted(refused, 'tool call')} refused"
    if unanswered:
        line += f" ({unanswered} for want of a human to ask; allow them with rules or another --permission-mode)"
    return line + " by the permission mode or rules"


def _json(out: TextIO, data: JsonObject) -> None:
    out.write(json_line(data) + "\n")


def session_event(agent: Agent) -> JsonObject:
    """The first jsonl line: which session, model, directory and permission mode."""
    s = agent.session
    return {"event": "session", "session_id": s.id, "model": s.spec.model, "cwd": str(s.root),
            "permission_mode": agent.permission_mode}


def result_event(agent: Agent, status: int, records: Sequence[rec.Record],
                 denials: list[ev.ToolFinished] | None = None) -> JsonObject:
    """The last jsonl line: how the run ended, what it cost, and every call refused (`records`: the run's)."""
    from rhapsody.core.session.session_figures import SessionFigures

    figures = SessionFigures(model=agent.session.spec.model)
    for record in records:
        figures.add(record)
    usage = figures.usage
    refused = [{"tool_name": d.call.name, "tool_use_id": d.call.id, "tool_input": d.call.input, "reason": d.refused}
               for d in denials or []]
    return {"event": "result", "session_id": agent.session.id, "exit_status": status,
            "is_error": status != 0, "requests": figures.requests, "turns": turns(records),
            "tool_calls": figures.tool_calls, "refused_calls": len(refused) + narration_refusals(records),
            "narration_refusals": narration_refusals(records),
            "refused_without_a_human": unanswered_refusals(records), "permission_denials": refused,
            "seams": figures.seams, "usage": usage, "cost_usd": round(figures.cost, 6)}


def turns(records: Sequence[rec.Record]) -> int:
    """Turns opened: user messages that start an exchange (the task, and each one the harness added
    itself: a handoff's ask, the word to go on after a seam, a reminder), not those carrying tool results."""
    return sum(1 for r in records if isinstance(r, rec.MessageAdded) and r.role == "user"
               and not any(isinstance(b, ToolResultBlock) for b in r.content))
