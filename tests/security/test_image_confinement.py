"""Images are files: a hostile project links an image from outside, names paths outside, hides `@` words in a command.

An image is read for the provider as read_file reads for the model: inside the project, through no link that
leaves it, never a protected path; and only what the human typed attaches.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any


from rhapsody.core.events import ImagesAttached, Notice
from rhapsody.core.session.images import images_dir
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.widgets import PromptInput
from rhapsody.loopback.script import say

from tests.conftest import Stub, collect, plain_mode, until
from tests.core.session.test_images import GIF, images_in, png

OUTSIDE = "outside the project"


def stored(project: Path) -> list[str]:
    """The images rhapsody keeps for the project (wherever its store lives)."""
    return sorted(p.name for p in images_dir(project).iterdir())


def notices(events: list[Any]) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice)]


async def test_an_image_linked_from_outside_the_project_is_not_read_nor_sent(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "private.png").write_bytes(png(5, 5))
    (project / "docs").mkdir()
    (project / "docs" / "diagram.png").symlink_to(outside / "private.png")
    (project / "shots").symlink_to(outside, target_is_directory=True)
    (project / "inside.gif").write_bytes(GIF)
    stub.script(say("I see one image."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("compare @docs/diagram.png, @shots/private.png and @inside.gif"))
    refused = notices(events)
    assert len(refused) == 2 and all(OUTSIDE in line for line in refused)
    assert refused[0].startswith("image @docs/diagram.png not attached")
    assert [e.labels for e in events if isinstance(e, ImagesAttached)] == [("[image inside.gif 7x5]",)]
    assert [i["source"]["media_type"] for i in images_in(stub.bodies()[0])] == ["image/gif"]
    assert len(stored(project)) == 1 and stored(project)[0].endswith(".gif")


async def test_absolute_and_home_paths_outside_the_project_are_refused_and_inside_ones_attach(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    (tmp_path / "dragged.png").write_bytes(png(2, 2))
    (tmp_path / "pasted.png").write_bytes(png(2, 2))
    home = Path(os.environ["HOME"])
    (home / "pic.png").write_bytes(png(3, 3))
    (project / "mine.png").write_bytes(png(4, 4))
    stub.script(say("One image."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run(
        f"look at @{tmp_path}/dragged.png and {tmp_path}/pasted.png and @~/pic.png and '{project}/mine.png'"))
    refused = notices(events)
    assert [line.split(" not attached")[0] for line in refused] == [
        f"image @{tmp_path}/dragged.png", f"image {tmp_path}/pasted.png", "image @~/pic.png"]
    assert all(OUTSIDE in line for line in refused)
    assert [e.labels for e in events if isinstance(e, ImagesAttached)] == [("[image mine.png 4x4]",)]
    assert len(images_in(stub.bodies()[0])) == 1


async def test_protected_paths_inside_the_project_are_not_attached(stub: Stub, project: Path) -> None:
    (project / "keys").mkdir()
    (project / "keys" / "id_rsa.png").write_bytes(png(1, 1))
    (project / ".env.png").write_bytes(png(1, 1))
    (project / "private").mkdir()
    (project / "private" / "scan.png").write_bytes(png(1, 1))
    (project / "ok.png").write_bytes(png(2, 1))
    stub.script(say("One image."))
    wiring = stub.wire(project, protected_paths=["private"])
    events = await collect(wiring.agent.run("see @keys/id_rsa.png @.env.png @private/scan.png @ok.png"))
    refused = notices(events)
    assert len(refused) == 3 and all("protected path" in line for line in refused), refused
    assert [e.labels for e in events if isinstance(e, ImagesAttached)] == [("[image ok.png 2x1]",)]


COMMAND = "---\ndescription: describe the diagram\n---\nDescribe @docs/diagram.png and docs/chart.gif for me.\n"


def hostile_command(project: Path) -> None:
    """A project's command whose own text names two images inside the project, as `@` and as a bare path."""
    (project / "docs").mkdir()
    (project / "docs" / "diagram.png").write_bytes(png(6, 6))
    (project / "docs" / "chart.gif").write_bytes(GIF)
    (project / "mine.png").write_bytes(png(4, 4))
    folder = project / ".claude" / "commands"
    folder.mkdir(parents=True)
    (folder / "describe.md").write_text(COMMAND, encoding="utf-8")


async def test_a_custom_commands_own_image_words_attach_nothing_in_plain_mode(stub: Stub, project: Path) -> None:
    hostile_command(project)
    stub.script(say("Described."))
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("/describe @mine.png\r")
        await until(lambda: "Described." in out.getvalue())
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    first = stub.bodies()[0]
    assert "Describe @docs/diagram.png" in str(first["messages"][0]["content"])
    assert [(i["source"]["media_type"]) for i in images_in(first)] == ["image/png"]
    assert len(stored(project)) == 1


async def test_a_custom_commands_own_image_words_attach_nothing_in_the_app(stub: Stub, project: Path) -> None:
    hostile_command(project)
    stub.script(say("Described."))
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        app.query_one(PromptInput).text = "/describe"
        await pilot.press("enter")
        await until(lambda: len(stub.server.requests) >= 1 and not app.busy, pause=pilot.pause)
    first = stub.bodies()[0]
    assert "Describe @docs/diagram.png" in str(first["messages"][0]["content"])
    assert images_in(first) == [] and stored(project) == []
