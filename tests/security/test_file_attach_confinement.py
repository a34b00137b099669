"""Attached files are reads: a hostile project links outside, names protected and absolute paths, hides `@` words.

A file or folder named with `@` is read for the provider as read_file reads for the model: inside the project,
through no link that leaves it, never a protected path; and only what the human typed attaches. Each test
checks the human's words did arrive, so a refusal is not a turn that never ran.
"""

from __future__ import annotations

from tests.frontends.test_plain import plain_exchange
import io
import json
import os
from pathlib import Path
from typing import Any


from rhapsody.core.events import FilesAttached, Notice
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.widgets import PromptInput
from rhapsody.frontends.headless import run_headless
from rhapsody.loopback.script import say

from tests.conftest import Stub, collect, until

SECRET = "OUTSIDE-SECRET-7781"
OUTSIDE = "outside the project"
PROTECTED = "protected path"


def notices(events: list[Any]) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice)]


def sent(stub: Stub) -> str:
    """Every request body the loopback server recorded, as one string."""
    return json.dumps(stub.bodies())


async def test_links_to_a_file_or_folder_outside_the_project_attach_nothing(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "notes.txt").write_text(SECRET, encoding="utf-8")
    (outside / f"{SECRET}.txt").write_text("x", encoding="utf-8")
    (project / "notes.txt").symlink_to(outside / "notes.txt")
    (project / "away").symlink_to(outside, target_is_directory=True)
    (project / "mine.txt").write_text("my own words\n", encoding="utf-8")
    stub.script(say("One file."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("compare @notes.txt, @away and @away/notes.txt with @mine.txt"))
    refused = notices(events)
    assert [line.split(" not attached")[0] for line in refused] == ["@notes.txt", "@away", "@away/notes.txt"]
    assert all(OUTSIDE in line for line in refused), refused
    assert len([e for e in events if isinstance(e, FilesAttached)]) == 1
    assert "compare @notes.txt, @away and @away/notes.txt with @mine.txt" in sent(stub)
    assert "my own words" in sent(stub) and SECRET not in sent(stub)


async def test_absolute_and_home_paths_outside_the_project_attach_nothing(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    (tmp_path / "dragged.txt").write_text(SECRET, encoding="utf-8")
    (Path(os.environ["HOME"]) / "diary.txt").write_text(SECRET, encoding="utf-8")
    (project / "inside.txt").write_text("inside words\n", encoding="utf-8")
    stub.script(say("Only inside."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run(f"read @{tmp_path}/dragged.txt @~/diary.txt @{project}/inside.txt"))
    refused = notices(events)
    assert [line.split(" not attached")[0] for line in refused] == [f"@{tmp_path}/dragged.txt", "@~/diary.txt"]
    assert all(OUTSIDE in line for line in refused), refused
    assert f"read @{tmp_path}/dragged.txt" in sent(stub) and "inside words" in sent(stub) and SECRET not in sent(stub)


async def test_protected_paths_inside_the_project_attach_nothing(stub: Stub, project: Path) -> None:
    (project / ".env").write_text(f"API_KEY={SECRET}\n", encoding="utf-8")
    (project / ".rhapsody").mkdir(exist_ok=True)
    (project / ".rhapsody" / "notes.md").write_text(SECRET, encoding="utf-8")
    (project / "private").mkdir()
    (project / "private" / "plan.txt").write_text(SECRET, encoding="utf-8")
    (project / "ok.txt").write_text("fine to read\n", encoding="utf-8")
    stub.script(say("One file."))
    wiring = stub.wire(project, protected_paths=["private"])
    events = await collect(wiring.agent.run("see @.env @.rhapsody/notes.md @.rhapsody @private/plan.txt @ok.txt"))
    refused = notices(events)
    assert len(refused) == 4 and all(PROTECTED in line for line in refused), refused
    assert "see @.env @.rhapsody/notes.md" in sent(stub) and "fine to read" in sent(stub)
    assert SECRET not in sent(stub)


async def test_a_folder_listing_leaves_out_protected_names_and_links_stay_names(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    (project / "conf").mkdir()
    (project / "conf" / ".env").write_text(SECRET, encoding="utf-8")
    (project / "conf" / "id_rsa").write_text(SECRET, encoding="utf-8")
    (project / "conf" / "app.toml").write_text("x = 1\n", encoding="utf-8")
    (project / "conf" / "away").symlink_to(tmp_path, target_is_directory=True)
    stub.script(say("Listed."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("what is in @conf"))
    listing = stub.bodies()[0]["messages"][0]["content"][1]["text"]
    assert listing == '<folder path="conf" entries="2">\napp.toml\naway\n</folder>'
    assert "what is in @conf" in sent(stub)


COMMAND = "---\ndescription: summarize the plan\n---\nSummarize @docs/plan.txt for me.\n"


def hostile_command(project: Path) -> None:
    """A project's command whose own text names a file inside the project with `@`."""
    (project / "docs").mkdir()
    (project / "docs" / "plan.txt").write_text(SECRET, encoding="utf-8")
    (project / "mine.txt").write_text("typed by the human\n", encoding="utf-8")
    folder = project / ".claude" / "commands"
    folder.mkdir(parents=True)
    (folder / "summarize.md").write_text(COMMAND, encoding="utf-8")


async def test_a_custom_commands_own_at_word_attaches_nothing_in_plain_mode(stub: Stub, project: Path) -> None:
    hostile_command(project)
    stub.script(say("Summarized."))
    wiring = stub.wire(project)
    await plain_exchange(wiring, "/summarize @mine.txt", "Summarized.")
    assert "Summarize @docs/plan.txt" in sent(stub) and "typed by the human" in sent(stub)
    assert SECRET not in sent(stub)


async def test_a_custom_commands_own_at_word_attaches_nothing_in_the_app(stub: Stub, project: Path) -> None:
    hostile_command(project)
    stub.script(say("Summarized."))
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        app.query_one(PromptInput).text = "/summarize @mine.txt"
        await pilot.press("enter")
        await until(lambda: len(stub.server.requests) >= 1 and not app.busy, pause=pilot.pause)
    assert "Summarize @docs/plan.txt" in sent(stub) and "typed by the human" in sent(stub)
    assert SECRET not in sent(stub)


async def test_headless_attaches_the_file_and_refuses_a_link_outside(stub: Stub, project: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text(SECRET, encoding="utf-8")
    (project / "link.txt").symlink_to(tmp_path / "secret.txt")
    (project / "README.md").write_text("headless marker QUAIL\n", encoding="utf-8")
    stub.script(say("Read."))
    wiring = stub.wire(project)
    out, err = io.StringIO(), io.StringIO()
    assert await run_headless(wiring.agent, "read @README.md and @link.txt", "text", out, err) == 0
    assert "attached README.md (22 B)" in out.getvalue() and "@link.txt not attached" in out.getvalue()
    assert "headless marker QUAIL" in sent(stub) and SECRET not in sent(stub)
