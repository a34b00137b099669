"""Files rhapsody reads on its own account are data from inside the project only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rhapsody.loopback.script import say
from rhapsody.memory import init as memory_init

from tests.conftest import Stub, collect

KEY = "sk-ant-api03-own-files-secret-value-0123456789"


def everything_written(project: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in (project / ".rhapsody").rglob("*") if p.is_file())


async def run_one_turn(stub: Stub, project: Path) -> str:
    stub.script(say("hello"))
    wiring = stub.wire(project, permission_mode="read-only")
    await collect(wiring.agent.run("go"))
    return json.dumps(stub.bodies()) + everything_written(project)


async def test_agents_md_linked_to_proc_environ_reaches_nothing(stub: Stub, project: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    os.symlink("/proc/self/environ", project / "AGENTS.md")
    os.symlink("/proc/self/environ", project / "CLAUDE.md")
    seen = await run_one_turn(stub, project)
    assert len(stub.bodies()) == 1 and "## Tools and the project" in seen, "the prompt was built and sent"
    assert KEY not in seen and "ANTHROPIC_API_KEY" not in seen and "Project instructions" not in seen


async def test_a_memory_file_linked_outside_the_root_reaches_nothing(stub: Stub, project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "id_rsa_like"
    outside.write_text(f"FAKE_SECRET_KEY={KEY}\n")
    memory_init(project, "docs/memory")
    status = project / "docs" / "memory" / "PROJECT_STATUS.md"
    status.unlink()
    os.symlink(outside, status)
    os.symlink(outside, project / "docs" / "memory" / "dialogs" / "2030-01-01-x.md")
    seen = await run_one_turn(stub, project)
    assert "### docs/memory/DECISIONS.md" in seen, "the memory map was read, without the linked files"
    assert KEY not in seen and "FAKE_SECRET_KEY" not in seen


async def test_a_memory_folder_linked_outside_the_root_is_not_read(stub: Stub, project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "PROJECT_STATUS.md").write_text(f"status {KEY}\n")
    (project / "docs").mkdir()
    os.symlink(outside, project / "docs" / "memory")
    seen = await run_one_turn(stub, project)
    assert len(stub.bodies()) == 1 and "## Tools and the project" in seen, "the prompt was built and sent"
    assert KEY not in seen


async def test_credentials_written_into_agents_md_are_masked(stub: Stub, project: Path) -> None:
    (project / "AGENTS.md").write_text(f"Run tests with pytest.\nOPENAI_API_KEY=sk-proj-{'a1' * 20}\nkey: {KEY}\n")
    seen = await run_one_turn(stub, project)
    assert "Run tests with pytest." in seen and KEY not in seen and "a1a1a1a1a1a1" not in seen
    assert "[masked secret]" in seen


async def test_a_fifo_or_huge_agents_md_does_not_hang_or_flood(stub: Stub, project: Path) -> None:
    os.mkfifo(project / "AGENTS.md")
    (project / "CLAUDE.md").write_text("y" * 5_000_000)
    seen = await run_one_turn(stub, project)
    assert seen.count("y" * 1000) < 100
