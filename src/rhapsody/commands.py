"""Slash commands shared by the TUI and the plain mode."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rhapsody.core.handoff import undo_seam
from rhapsody.core.loop import Agent
from rhapsody.core.session import Session
from rhapsody.render import seam_line

COMMANDS = {
    "/handoff": "write a field note, then strip tool traffic from the context",
    "/unhandoff": "put the last seam's stripped blocks back",
    "/stats": "every seam of this session, before → after, and what the seams saved",
    "/recall": "QUERY: search stripped tool calls (--all: earlier sessions too)",
    "/model": "NAME: switch model (earlier thinking leaves the context)",
    "/mcp": "MCP servers, their state and their tools",
    "/clear": "start a new session",
    "/help": "this list",
    "/quit": "leave rhapsody",
}


@dataclass(frozen=True)
class Outcome:
    """What a command produced: text to show, and whether to start a turn or quit."""

    text: str = ""
    run_turn: bool = False
    quit: bool = False


def is_command(line: str) -> bool:
    """Whether a typed line is a slash command."""
    return line.startswith("/") and line.split(maxsplit=1)[0] in COMMANDS


def run_command(agent: Agent, line: str) -> Outcome:
    """Execute one slash command."""
    name, _, arg = line.strip().partition(" ")
    arg = arg.strip()
    if name == "/handoff":
        agent.request_handoff()
        return Outcome("micro-handoff requested" + (" (at the next tool boundary)" if agent.busy else ""),
                       run_turn=not agent.busy)
    if name == "/unhandoff":
        if agent.busy:
            return Outcome("wait for the turn to end before undoing a seam")
        record = undo_seam(agent.session)
        return Outcome(undo_text(record) if record else "no seam to undo")
    if name == "/stats":
        return Outcome(stats_text(agent.session))
    if name == "/recall":
        return Outcome(_recall(agent, arg))
    if name == "/model":
        return Outcome(_switch_model(agent, arg))
    if name == "/mcp":
        lines = [line for source in agent.toolbox.sources for line in source.status()]
        return Outcome("\n".join(lines) or "no MCP servers configured")
    if name == "/clear":
        if agent.busy:
            return Outcome("wait for the turn to end before starting a new session")
        agent.replace_session(Session.start(agent.session.root, agent.session.spec))
        return Outcome(f"new session {agent.session.id}")
    if name == "/quit":
        return Outcome(quit=True)
    return Outcome("\n".join(f"{k:<11} {v}" for k, v in COMMANDS.items()))


def undo_text(record: dict[str, Any]) -> str:
    """What `/unhandoff` says: the seam undone, and whether what came back is exactly what left."""
    head = f"seam {record['seam']} undone: its tool traffic is back in context"
    n = record.get("returned_calls", 0)
    if record.get("verified") is None:
        return f"{head} ({n} calls; not verified: the seam recorded no hash of what it stripped)"
    if record["verified"]:
        return f"{head}; verified: the {n} calls put back hash to the SHA-256 the seam recorded ({record['returned_sha256'][:12]}…)"
    return f"{head}; NOT VERIFIED: the {n} calls put back do not hash to what the seam recorded"


def _recall(agent: Agent, arg: str) -> str:
    from rhapsody.tools.handoff import recall_text

    wide = arg.startswith("--all")
    query = arg.removeprefix("--all").strip()
    if not query:
        return "usage: /recall [--all] QUERY"
    return recall_text(agent.session.root, agent.session, query, all_sessions=wide)


def _switch_model(agent: Agent, name: str) -> str:
    session = agent.session
    if not name:
        return f"model: {session.spec.model}"
    if agent.busy:
        return "wait for the turn to end before switching models"
    session.switch_model(name)
    return f"model switched to {name}; earlier thinking blocks leave the context"


def stats_text(session: Session) -> str:
    """Seams and counters of a session as plain lines."""
    from rhapsody.stats import billing, saving_line, seam_rows

    rows = seam_rows(session.records)
    lines = [seam_line(r) + (" (undone)" if r["undone"] else "") for r in rows] or ["no seams yet"]
    c = session.counters
    lines.append(f"requests {c.requests}, tool calls {c.tool_calls}, narration violations {c.violations}, "
                 f"context ~{session.context_tokens():,} tokens")
    if c.requests:
        lines.append(saving_line(billing(session.records)))
    return "\n".join(lines)
