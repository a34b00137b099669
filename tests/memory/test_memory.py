"""Project memory on real git repositories: init, the map in the system prompt, read log, stats, audit."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import json
import subprocess
from pathlib import Path

from rhapsody import memory
from rhapsody.loopback.script import call, say

from tests import launch
from tests.conftest import Stub, collect

NARRATE = "I will read the project status first, because the memory map says it holds the current plan."


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return launch.run(list(args), timeout=60)


def test_init_creates_the_layout_and_keeps_existing_files(project: Path) -> None:
    (project / "docs" / "memory").mkdir(parents=True)
    (project / "docs" / "memory" / "DECISIONS.md").write_text("# mine\n")
    result = run_cli("memory", "init", "--cwd", str(project))
    assert result.returncode == 0
    for name in ("PROJECT_STATUS.md", "TECH_DEBT.md", "status", "decisions", "errors", "dialogs"):
        assert (project / "docs" / "memory" / name).exists()
    assert (project / "docs" / "memory" / "DECISIONS.md").read_text() == "# mine\n"


async def test_map_goes_into_the_system_prompt_reads_are_logged_and_a_dialog_is_written(stub: Stub, project: Path) -> None:
    memory.init(project, "docs/memory")
    (project / "docs/memory/PROJECT_STATUS.md").write_text("# Status\nShared auth for every portal (see D-001).\n")
    stub.script(call(NARRATE, "read_file", path="docs/memory/PROJECT_STATUS.md"), say("Status read: shared auth."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("add a portal"))
    system = stub.bodies()[0]["system"][0]["text"]
    assert "Shared auth for every portal" in system and "## Project memory (docs/memory/)" in system
    run = [r for r in dumped(wiring.session.records) if r["kind"] == "tool_run"][0]
    data = (project / "docs/memory/PROJECT_STATUS.md").read_bytes()
    expected = subprocess.run(["git", "hash-object", "--stdin"], input=data, capture_output=True, cwd=project).stdout.decode().strip()
    assert run["path"] == "docs/memory/PROJECT_STATUS.md" and run["blob"] == expected
    dialogs = list((project / "docs/memory/dialogs").glob("*.md"))
    assert len(dialogs) == 1
    text = dialogs[0].read_text()
    assert "add a portal" in text and "read_file docs/memory/PROJECT_STATUS.md" in text and "Status read" in text


async def test_stats_count_cross_conversation_reads(stub: Stub, project: Path) -> None:
    memory.init(project, "docs/memory")
    stub.script(
        call(NARRATE, "write_file", path="docs/memory/decisions/D-001.md", content="# D-001 Shared auth\n"), say("saved"),
        call(NARRATE, "read_file", path="docs/memory/decisions/D-001.md"), say("read"),
    )
    await collect(stub.wire(project).agent.run("decide"))
    await collect(stub.wire(project).agent.run("use the decision"))
    result = run_cli("memory", "stats", "--cwd", str(project), "--json")
    figures = json.loads(result.stdout)
    assert figures["cross_conversation_reads"] == 1 and figures["distance_conversations"]["max"] == 1
    assert figures["conversations_reading_memory"] == 2  # both conversations got the memory map


def test_audit_finds_planted_defects_and_nothing_in_a_clean_tree(project: Path) -> None:
    memory.init(project, "docs/memory")
    clean = run_cli("memory", "audit", "--cwd", str(project))
    assert clean.returncode == 0 and "no findings" in clean.stdout
    base = project / "docs/memory"
    (base / "decisions/D-001.md").write_text("# D-001 Shared authentication\nEvery portal uses the shared login module in `app.py`.\n")
    (base / "DECISIONS.md").write_text("# Decisions\n- [D-001 Separate logins](decisions/D-001.md): portals\n"
                                       "- [D-002 Gone](decisions/D-002.md): removed card\n")
    (base / "errors/E-001.md").write_text("# E-001\nEvery portal uses the shared login module in `app.py`.\n"
                                          "See `src/removed_module.py` for the old code.\n")
    result = run_cli("memory", "audit", "--cwd", str(project))
    assert result.returncode == 1
    out = result.stdout
    assert "docs/memory/DECISIONS.md:2: register says 'D-001 Separate logins'" in out
    assert "DECISIONS.md:3: link to decisions/D-002.md that no longer exists" in out
    assert "errors/E-001.md:2: duplicates docs/memory/decisions/D-001.md:2" in out
    assert "errors/E-001.md:3: path src/removed_module.py no longer exists" in out


def test_memory_commit_status_staleness_and_size_over_time(project: Path) -> None:
    import os

    import git

    memory.init(project, "docs/memory")
    repo = git.Repo(project)
    assert memory.commit_memory(project, "docs/memory", "memory: init") is not None
    assert memory.commit_memory(project, "docs/memory", "memory: nothing") is None
    status = project / "docs/memory/status/2026-01-01.md"
    status.write_text("# Status\n- the adder in `app.py` is done\n")
    old = "2026-01-01T00:00:00"
    repo.index.add([str(status.relative_to(project))])
    repo.index.commit("old status", author_date=old, commit_date=old)
    (project / "app.py").write_text("def add(a, b):\n    return a + b\n")
    repo.index.add(["app.py"])
    repo.index.commit("fix add")
    findings = [str(f) for f in memory.audit(project, "docs/memory", stale_days=30)]
    assert any(f.startswith("docs/memory/status/2026-01-01.md:2: app.py changed on") for f in findings)
    sizes = memory.size_over_time(project, "docs/memory")
    assert [s["files"] for s in sizes] == [7, 8]
    assert os.stat(project / "docs/memory/PROJECT_STATUS.md").st_size > 0


async def test_recall_across_sessions_finds_field_notes_with_their_session(stub: Stub, project: Path) -> None:
    from tests.core.session.test_handoff_e2e import handoff_turn
    from rhapsody.tools.handoff import recall_text

    stub.script(handoff_turn(), say("noted"), say("second session"))
    first = stub.wire(project)
    first.agent.request_handoff()
    await collect(first.agent.run())
    second = stub.wire(project)
    await collect(second.agent.run("hello"))
    found = recall_text(project, second.session, "negative numbers", all_sessions=True)
    assert f"note:{first.session.id}-seam1.md (field note" in found and f"{first.session.id}:toolu_" in found
    from rhapsody.core.session.recall import fetch

    note = fetch(project, f"note:{first.session.id}-seam1.md")
    assert note is not None and "add a test for negative numbers" in note
