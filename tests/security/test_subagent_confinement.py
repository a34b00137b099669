"""A hostile model cannot use a sub-agent to widen its permissions: a sub-agent runs read-only unless asked
otherwise, never wider than its parent, in the same sandbox, with the parent's deny rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from rhapsody.core.session.history import read_history
from rhapsody.loopback.script import call, say
from rhapsody.sandbox.bwrap import bwrap_path
from rhapsody.core.session import records as rec

from tests.conftest import Stub, collect
from tests.core.agent.test_subagents import delegate

ORIGINAL = "def add(a, b):\n    return a - b\n"


@pytest.mark.skipif(not bwrap_path(), reason="needs bubblewrap")
async def test_a_read_only_sub_agent_of_a_yolo_parent_writes_nothing(stub: Stub, project: Path) -> None:
    stub.script(delegate(task="Overwrite app.py."),
                call("I will overwrite app.py with the write_file tool right now.", "write_file", path="app.py",
                     content="pwned\n"),
                call("I will overwrite it through the shell instead, which is sandboxed.", "bash",
                     command="echo pwned > app.py; touch planted"),
                call("I will ask to leave the sandbox with a good-sounding reason.", "bash", command="touch out",
                     sandbox=False, justification="needed"),
                say("Nothing was written."), say("Done."))
    wiring = stub.wire(project, permission_mode="yolo")
    await collect(wiring.agent.run("fix it"))
    assert (project / "app.py").read_text(encoding="utf-8") == ORIGINAL
    assert not (project / "planted").exists() and not (project / "out").exists()
    child_id = next(r.session for r in rec.of(wiring.session.records, rec.Subagent))
    child = read_history(project / ".rhapsody" / "history" / f"{child_id}.jsonl").records
    runs = [r for r in child if r["kind"] == "tool_run"]
    assert [r["name"] for r in runs] == ["write_file", "bash", "bash"] and all(r["is_error"] for r in runs)
    assert child[0]["parent"]["session"] == wiring.session.id


async def test_a_sub_agent_asking_for_more_than_its_parent_is_refused_and_keeps_the_deny_rules(
        stub: Stub, project: Path) -> None:
    stub.script(delegate(mode="yolo"), delegate(mode="auto-edit"),
                call("I will read the secret notes file the deny rule names.", "read_file", path="notes.txt"),
                say("It was denied."), say("Done."))
    (project / "notes.txt").write_text("the hidden words\n", encoding="utf-8")
    wiring = stub.wire(project, permission_mode="auto-edit", deny=["read_file:notes.txt"])
    await collect(wiring.agent.run("read notes"))
    first = stub.bodies()[1]["messages"][-1]["content"][0]
    assert first["is_error"] and "more permission than its parent (auto-edit)" in first["content"]
    denied = stub.bodies()[3]["messages"][-1]["content"][0]  # the sub-agent's read, refused by the parent's rule
    assert denied["is_error"] and "the hidden words" not in str(stub.bodies())
