"""The harness facts of a field note stay short however much ran since the last seam: every note stays
in the context for good (docs/performance.md, "The size a field note aims at")."""

from __future__ import annotations

from pathlib import Path

from rhapsody.core.session.context import RequestSpec
from rhapsody.core.session.messages import TextBlock, ToolResultBlock, ToolUseBlock
from rhapsody.core.session.session import Session
from rhapsody.tools.handoff import FACTS_CHARS, harness_facts
from rhapsody.core.session import records as rec

LONG = "src/" + "deeply/nested/" * 6
FAILED = "cat <<'EOF' > build.sh\n" + "echo building\n" * 357 + "EOF\nsh build.sh"


def busy_session(project: Path) -> Session:
    """200 files read, 100 written, 80 distinct long commands, then one 5,000-character command that failed
    with 20,000 characters of output."""
    session = Session.start(project, RequestSpec(model="m", system="s", tools=[]))
    session.append_message("user", [TextBlock(text="work")])
    for n in range(200):
        session.append(rec.ToolRun(tool_use_id=f"r{n}", name="read_file", op="read", path=f"{LONG}read_{n}.py"))
    for n in range(100):
        session.append(rec.ToolRun(tool_use_id=f"w{n}", name="write_file", op="write", path=f"{LONG}written_{n}.py"))
    for n in range(80):
        session.append(rec.ToolRun(tool_use_id=f"c{n}", name="bash", command=f"run step {n} " + "x" * 200, exit_code=0))
    session.append_message("assistant", [TextBlock(text="build"), ToolUseBlock(id="f", name="bash", input={})])
    output = "noise line\n" * 1800 + "error: linker failed at main.o\n[exit code 2]"
    session.append_message("user", [ToolResultBlock(tool_use_id="f", content=output)])
    session.append(rec.ToolRun(tool_use_id="f", name="bash", command=FAILED, exit_code=2))
    return session


def test_harness_facts_are_bounded_and_keep_what_matters_most(project: Path) -> None:
    facts = harness_facts(project, busy_session(project))
    assert len(facts) <= FACTS_CHARS
    assert "- git root: " in facts and "branch" in facts
    assert "- files read (200): " in facts and "- files written (100): " in facts and "more" in facts
    assert "### Last failing command (exit 2; verbatim)" in facts
    assert "error: linker failed at main.o\n[exit code 2]" in facts  # the output's final lines, verbatim
    assert f"(cut: {len(FAILED):,} characters; recall the call for all of it)" in facts
    assert "- `run step 79 " in facts  # the newest of the other commands, after the long one cut
