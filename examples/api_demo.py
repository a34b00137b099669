"""The Python API, offline: rhapsody's loopback server plays a scripted model, as `rhapsody --demo` does.

    python examples/api_demo.py

It opens a session in a fresh sample project, sends a turn whose tool call asks for approval (answered
by a callback), sends a hint while the call runs, asks for a micro-handoff, prints the figures, and
resumes the session by its id. With a real key, drop the server and the two environment variables.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from pathlib import Path

from rhapsody.api import Agent, Answer, ApprovalAsked, as_json, events
from rhapsody.loopback.script import ScriptedResponder, call, say
from rhapsody.loopback.server import LoopbackServer

NOTE = {"done": ["logged one run to log.txt [measured: the file holds it]"], "open": [], "went_wrong": [],
        "working_directory": "the sample project's root", "tool_quirks": [], "recipes": ["cat log.txt"]}
SCRIPT = [
    call("I will append one line to log.txt so the run is visible on disk, then check it.", "bash",
         command="sleep 0.5; echo run >> log.txt"),
    say("Logged one run; I will use tabs from now on."),
    {"content": [{"type": "text", "text": "Writing my field note now, facts first, as the harness asked."},
                 {"type": "tool_use", "name": "micro_handoff", "input": NOTE}]},
    say("Note written; the context is fresh."),
    say("Resumed: log.txt still holds one run."),
]


def approve(question: ApprovalAsked) -> Answer:
    """Every question the agent asks comes here; a script decides as a person would."""
    print(f"  asked: {question.tool} {question.argument!r} ({question.why})")
    return Answer.allow() if "log.txt" in question.argument else Answer.deny("only log.txt may change")


async def main(project: Path) -> None:
    async with Agent.open(project, on_approval=approve, sandbox="off") as agent:
        async for event in agent.send("log a run"):
            print(as_json(event)["event"])
            if isinstance(event, events.ToolStarted):
                print("  hint", agent.hint("use tabs, not spaces"), "sent while the call runs")
        seams = [e for e in [e async for e in agent.handoff()] if isinstance(e, events.SeamCommitted)]
        print("handoff:", [as_json(e)["event"] for e in seams])
        figures = agent.figures()
        print(f"figures: {figures.requests} requests, {figures.input_tokens} input tokens, "
              f"${figures.cost_usd:.4f}, context {figures.context_share:.1%}, {figures.seams} seam")
        session_id = agent.session_id
    async with Agent.open(project, resume=session_id, on_approval=approve, sandbox="off") as again:
        said = [e.text for e in [e async for e in again.send("go on")] if isinstance(e, events.TextDelta)]
        print(f"resumed {session_id}:", "".join(said))


if __name__ == "__main__":
    server = LoopbackServer(ScriptedResponder(SCRIPT)).start()
    os.environ.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="loopback-needs-no-key",
                      RHAPSODY_MODEL="claude-sonnet-5-5")
    with tempfile.TemporaryDirectory() as folder:
        os.environ.setdefault("XDG_STATE_HOME", str(Path(folder) / "state"))  # keep the demo's checkpoints here
        project = Path(folder) / "sample"
        project.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=False)
        try:
            asyncio.run(main(project))
        finally:
            server.stop()
