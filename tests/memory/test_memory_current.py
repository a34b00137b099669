"""Memory that keeps itself current (seed 001): the end-of-task reminder, dialog logs that never
overwrite and hold the final answer, reads through any tool and the map counted, the audit's
same-error check, conversations per day and characters read."""

from __future__ import annotations

import json
from pathlib import Path

from rhapsody import memory
from rhapsody.core.events import MemoryReminded
from rhapsody.loopback.script import call, say

from tests.conftest import Stub, collect
from tests.memory.test_memory import run_cli

NARRATE = "I will check the adder first, because the report says it subtracts instead of adding."
UPDATE = "I will record the fix in the project status, because the reminder asks me to keep memory current."


async def test_a_task_that_used_tools_gets_one_reminder_and_the_log_holds_the_final_answer(stub: Stub, project: Path) -> None:
    memory.init(project, "docs/memory")
    stub.script(
        call(NARRATE, "bash", command="grep -n return app.py"),
        {"content": [{"type": "text", "text": "Measured: app.py:2 subtracts."},
                     {"type": "text", "text": "Final answer: add() returns a - b; it should return a + b."}]},
        call(UPDATE, "edit_file", path="docs/memory/PROJECT_STATUS.md", old="- (nothing recorded yet)",
             new="- add() in app.py:2 subtracts; fix pending"),
        say("Memory updated."),
        say("Second answer, no tools."),
    )
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("why does add fail?"))
    assert sum(isinstance(e, MemoryReminded) for e in events) == 1
    reminder = stub.bodies()[2]["messages"][-1]["content"]
    assert len(reminder) == 1 and reminder[0]["text"].startswith("[rhapsody] Before you finish")
    assert "docs/memory/" in reminder[0]["text"] and "errors/" in reminder[0]["text"]
    assert len(stub.bodies()) == 4  # no second reminder after the memory write
    [log] = (project / "docs/memory/dialogs").glob("*.md")
    text = log.read_text()
    result = text.split("## Result\n", 1)[1]
    assert result == "Measured: app.py:2 subtracts.\n\nFinal answer: add() returns a - b; it should return a + b.\n"
    assert "grep -n return app.py" in text and "edit_file docs/memory/PROJECT_STATUS.md" in text
    await collect(wiring.agent.run("and without tools?"))
    assert len(stub.bodies()) == 5  # a turn without tools is not reminded
    figures = json.loads(run_cli("memory", "stats", "--cwd", str(project), "--json").stdout)
    assert figures["memory_reminders"] == 1 and figures["memory_reminders_followed_by_update"] == 1


async def test_without_project_memory_there_is_no_reminder(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command="grep -n return app.py"), say("done"), say("extra"))
    events = await collect(stub.wire(project).agent.run("check"))
    assert not any(isinstance(e, MemoryReminded) for e in events) and len(stub.bodies()) == 2


def test_two_logs_in_the_same_second_both_survive_in_order(project: Path) -> None:
    memory.init(project, "docs/memory")
    first = memory.write_dialog(project, "docs/memory", "s1", "micro-handoff", "seam 1", "context stripped")
    second = memory.write_dialog(project, "docs/memory", "s1", "fix add", "- edit", "fixed")
    assert first is not None and second is not None and first != second
    assert sorted(p.name for p in (project / "docs/memory/dialogs").glob("*.md")) == [first.name, second.name]
    assert "context stripped" in first.read_text() and "fixed" in second.read_text()


async def test_reads_through_bash_search_and_the_map_are_counted_with_characters(stub: Stub, project: Path) -> None:
    memory.init(project, "docs/memory")
    card = project / "docs/memory/decisions/D-001.md"
    card.write_text("# D-001 Shared auth\nEvery portal uses the shared login module.\n")
    stub.script(
        call("I will print the decision card with cat, because it says how portals authenticate.", "bash",
             command="cat docs/memory/decisions/D-001.md"),
        call("I will search the memory for login notes, because another file may mention the module.", "search_text",
             pattern="login", path="docs/memory"),
        call(UPDATE, "write_file", path="docs/memory/status/now.md", content="# Now\n- portal work\n"),
        say("Read and recorded."),
    )
    await collect(stub.wire(project).agent.run("how do portals log in?"))
    figures = json.loads(run_cli("memory", "stats", "--cwd", str(project), "--json").stdout)
    ways = figures["reads_by_way"]
    assert ways["bash"] == 1 and ways["search_text"] == 1 and ways["map"] == 2  # status + register in the map
    assert figures["characters_read"]["total"] > len(card.read_text())
    assert figures["conversations_per_day"]["active_days"] == 1 and figures["conversations_per_day"]["max"] == 1
    assert figures["share_read_by_tools_per_conversation"]["max"] > 0
    lines = run_cli("memory", "stats", "--cwd", str(project)).stdout
    assert "characters read:" in lines and "new conversations per active day: mean 1.0" in lines


def test_audit_finds_the_same_error_described_in_two_files(project: Path) -> None:
    memory.init(project, "docs/memory")
    base = project / "docs/memory"
    (base / "errors/E-001.md").write_text("# E-001 Migration drops tenants\n`KeyError: 'tenant_id'` at migrate.py:88\n")
    (base / "errors/E-007.md").write_text("# E-007 Tenant import\nThe import failed: KeyError: 'TENANT_ID' (migrate.py:91)\n")
    (base / "status/now.md").write_text("# Now\nWorking on E-001: migration drops tenants\n")
    (base / "errors/E-009.md").write_text("# E-009: Migration drops tenants\nSeen again after the rollback.\n")
    (base / "dialogs/2026-01-01-000000-s-01.md").write_text("# Dialog\nKeyError: 'tenant_id' again\n")
    out = run_cli("memory", "audit", "--cwd", str(project)).stdout
    assert "docs/memory/errors/E-007.md:2: describes the same error as docs/memory/errors/E-001.md:2 (KeyError" in out
    assert "docs/memory/errors/E-009.md:1: describes the same error as docs/memory/errors/E-001.md:1 (title" in out
    assert "dialogs/" not in out
