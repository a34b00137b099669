"""Ask mode runs read-only commands without asking, in the read-only sandbox, and a scripted hostile model
cannot pass a write off as one; a read outside the project asks, and credentials stay refused."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
from pathlib import Path
from typing import Any

import pytest

from rhapsody.core.toolbox.approval import Approval
from rhapsody.loopback.script import call, say
from rhapsody.sandbox.bwrap import bwrap_path

from tests.conftest import Stub, collect

NARRATE = "I will run this command to look at the project; I expect it to only read."
needs_sandbox = pytest.mark.skipif(bwrap_path() is None, reason="bubblewrap is not installed")


class Asked:
    """An approver that records every question and answers with `allow`."""

    def __init__(self, allow: bool = False) -> None:
        self.allow = allow
        self.questions: list[tuple[str, str, str]] = []

    async def __call__(self, tool: str, argument: str, why: str, args: dict[str, Any] | None = None,
                       rules: tuple[str, ...] = ()) -> Approval:
        self.questions.append((tool, argument, why))
        return Approval(self.allow)


def results(stub: Stub) -> list[str]:
    return [str(b["content"]) for m in stub.bodies()[-1]["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


async def run_in_ask(stub: Stub, project: Path, *commands: str, asked: Asked | None = None) -> tuple[Asked, Any]:
    stub.script(*(call(NARRATE, "bash", command=c) for c in commands), say("done"))
    wiring = stub.wire(project, permission_mode="ask")
    asked = asked or Asked()
    wiring.agent.toolbox.approver = asked
    await collect(wiring.agent.run("look around"))
    return asked, wiring


@needs_sandbox
async def test_read_only_commands_run_unasked_in_ask_mode_in_the_read_only_sandbox(stub: Stub, project: Path) -> None:
    asked, wiring = await run_in_ask(stub, project, "ls -la", "cat app.py | wc -l && git status")
    assert asked.questions == []  # neither asked
    out = results(stub)
    assert "app.py" in out[0] and "[exit code 0]" in out[0] and "[exit code 0]" in out[1]
    records = [r for r in dumped(wiring.session.records) if r["kind"] == "permission"]
    assert [(r["decision"], r["by"], r["confinement"]) for r in records] == [("allow", "rules", "read-only")] * 2
    assert "read-only command" in records[0]["reason"]


@needs_sandbox
@pytest.mark.parametrize("command", [
    "find . -name victim.txt -delete",  # find's own delete
    "ls > victim.txt",  # a redirection to a file
    "git -c core.pager='rm victim.txt' log",  # a config that runs a program
    "ls $(rm victim.txt)",  # a command substitution that writes
    "cat `rm victim.txt`",
    "./ls victim.txt",  # the project's own program named like a read-only one
    "echo gone | tee victim.txt",  # a writer in a pipeline of readers
    "sort -o victim.txt app.py",  # sort writing its output file
    "git log --output=victim.txt",
    "rg --pre 'rm victim.txt' x",
])
async def test_a_hostile_model_cannot_pass_a_write_off_as_a_read_only_command(stub: Stub, project: Path,
                                                                             command: str) -> None:
    (project / "victim.txt").write_text("keep me\n")
    (project / "ls").write_text("#!/bin/sh\nrm -f victim.txt\n")
    (project / "ls").chmod(0o755)
    asked, wiring = await run_in_ask(stub, project, command)
    assert [q[1] for q in asked.questions] == [command]  # asked, not run unasked
    assert (project / "victim.txt").read_text() == "keep me\n"
    records = [r for r in dumped(wiring.session.records) if r["kind"] == "permission"]
    assert [(r["decision"], r["by"]) for r in records] == [("deny", "human")]


@needs_sandbox
@pytest.mark.parametrize("command", ["cat /etc/hosts", "ls ../", "grep -r root ~/", "grep --file=/etc/hosts x"])
async def test_a_read_only_command_that_names_a_path_outside_the_project_asks(stub: Stub, project: Path,
                                                                             command: str) -> None:
    asked, _ = await run_in_ask(stub, project, command)
    assert [q[1] for q in asked.questions] == [command]
    assert "permission denied" in results(stub)[0]  # not run: the human said no


async def test_a_read_outside_the_project_asks_and_runs_once_allowed(stub: Stub, project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "notes.txt"
    outside.write_text("the outside notes\n")
    stub.script(call(NARRATE, "read_file", path=str(outside)), call(NARRATE, "read_file", path=str(outside)),
                say("done"))
    wiring = stub.wire(project, permission_mode="auto-edit")
    asked = Asked()
    wiring.agent.toolbox.approver = asked
    await collect(wiring.agent.run("read it"))
    assert len(asked.questions) == 2 and "outside the project" in asked.questions[0][2]
    out = results(stub)
    assert "the outside notes" not in out[0] and "permission denied" in out[0]
    asked.allow = True
    stub.script(call(NARRATE, "read_file", path=str(outside)), say("done"))
    await collect(wiring.agent.run("read it now"))
    assert len(asked.questions) == 3 and "the outside notes" in results(stub)[-1]


@pytest.mark.parametrize("mode", ["read-only", "yolo"])
async def test_read_only_mode_refuses_an_outside_read_and_yolo_still_asks(stub: Stub, project: Path, tmp_path: Path,
                                                                         mode: str) -> None:
    outside = tmp_path / "notes.txt"
    outside.write_text("the outside notes\n")
    stub.script(call(NARRATE, "read_file", path=str(outside)), say("done"))
    wiring = stub.wire(project, permission_mode=mode)
    asked = Asked(allow=True)
    wiring.agent.toolbox.approver = asked
    await collect(wiring.agent.run("read it"))
    assert len(asked.questions) == (0 if mode == "read-only" else 1)
    shown = results(stub)[0]
    assert ("read-only mode reads only inside the project" in shown) == (mode == "read-only")
    assert ("the outside notes" in shown) == (mode == "yolo")


async def test_credentials_and_other_projects_state_stay_refused_even_when_the_human_allows(
        stub: Stub, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    monkeypatch.setenv("HOME", str(home))
    other = tmp_path / "other"
    (other / ".rhapsody").mkdir(parents=True)
    (other / ".rhapsody" / "trusted").write_text("OTHER STATE\n")
    (other / ".env").write_text("TOKEN=abc\n")
    paths = [str(home / ".ssh" / "id_rsa"), str(other / ".rhapsody" / "trusted"), str(other / ".env")]
    stub.script(*(call(NARRATE, "read_file", path=p) for p in paths), say("done"))
    wiring = stub.wire(project, permission_mode="ask")
    asked = Asked(allow=True)
    wiring.agent.toolbox.approver = asked
    await collect(wiring.agent.run("read them"))
    out = results(stub)
    assert len(out) == 3 and all("refused" in o or "may hold secrets" in o for o in out), out
    assert not any(secret in " ".join(out) for secret in ("PRIVATE KEY", "OTHER STATE", "TOKEN=abc"))
