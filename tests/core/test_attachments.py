"""Files and folders from the human: an `@` word sends the content, through the real loop on the loopback server."""

from __future__ import annotations

from tests.frontends.test_plain import plain_exchange
import json
from pathlib import Path
from typing import Any


from rhapsody.commands.export import page_html, page_markdown
from rhapsody.core.events import FilesAttached, Notice
from rhapsody.core.session.history import read_history
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.widgets import Foldable, PromptInput
from rhapsody.frontends.recap import last_exchange
from rhapsody.loopback.script import say
from rhapsody.view.render import record_lines
from rhapsody.wiring import build

from tests.conftest import MODEL, Stub, collect, until

README = "# Demo\n\nThe marker is ZEBRA-42.\n"


def user_texts(body: dict[str, Any], index: int = 0) -> list[str]:
    """The text blocks of one message of a recorded request body."""
    content = body["messages"][index]["content"]
    return [content] if isinstance(content, str) else [b["text"] for b in content if b.get("type") == "text"]


def uncached(message: dict[str, Any]) -> str:
    """A message's bytes as sent, without the cache breakpoint (which moves to the newest message)."""
    return json.dumps([{k: v for k, v in b.items() if k != "cache_control"} for b in message["content"]])


async def test_an_at_file_reaches_the_model_as_its_content_after_the_human_words(stub: Stub, project: Path) -> None:
    (project / "README.md").write_text(README, encoding="utf-8")
    stub.script(say("The marker is ZEBRA-42."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("what does @README.md say?"))
    texts = user_texts(stub.bodies()[0])
    assert texts[0] == "what does @README.md say?"
    assert texts[1] == f'<file path="README.md" bytes="{len(README)}">\n{README}\n</file>'
    assert [e.texts for e in events if isinstance(e, FilesAttached)] == [(texts[1],)]
    lines = [line.text.strip() for _, line in record_lines(read_history(wiring.session.path, typed=True).typed, project,
                                                           wiring.session.id)]
    assert "attached README.md (32 B)" in lines and not any("ZEBRA" in line for line in lines if "›" in line)
    assert last_exchange(read_history(wiring.session.path, typed=True).typed) == ("what does @README.md say?",
                                                                        "The marker is ZEBRA-42.")


async def test_a_large_file_is_cut_in_the_middle_with_a_line_saying_so(stub: Stub, project: Path) -> None:
    (project / "big.log").write_text("".join(f"line {n}\n" for n in range(20_000)), encoding="utf-8")
    stub.script(say("Long."))
    wiring = stub.wire(project, output_cap=2000)
    await collect(wiring.agent.run("skim @big.log"))
    sent = user_texts(stub.bodies()[0])[1]
    assert sent.startswith('<file path="big.log" bytes="')
    assert "line 0\n" in sent and "line 19999\n" in sent and "line 10000\n" not in sent
    assert "characters cut from the middle; output was" in sent and len(sent) < 2300


async def test_a_binary_file_is_refused_with_a_line_and_the_words_still_go(stub: Stub, project: Path) -> None:
    (project / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02SECRETBYTES")
    stub.script(say("Ok."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("what is @blob.bin?"))
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "@blob.bin not attached: it looks binary (18 bytes); only text files are attached"]
    assert user_texts(stub.bodies()[0]) == ["what is @blob.bin?"]


async def test_a_folder_goes_as_its_listing_without_what_the_walk_skips(stub: Stub, project: Path) -> None:
    (project / "src" / "pkg").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print(1)\n", encoding="utf-8")
    (project / "src" / "__pycache__").mkdir()
    (project / "src" / ".env").write_text("TOKEN=x\n", encoding="utf-8")
    stub.script(say("Two entries."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("what is in @src/ and @nobody?"))
    texts = user_texts(stub.bodies()[0])
    assert texts == ["what is in @src/ and @nobody?", '<folder path="src" entries="2">\nmain.py\npkg/\n</folder>']


async def test_a_resumed_session_sends_the_same_bytes(stub: Stub, project: Path) -> None:
    (project / "README.md").write_text(README, encoding="utf-8")
    stub.script(say("Read it."), say("Still here."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("read @README.md"))
    (project / "README.md").write_text("changed since\n", encoding="utf-8")
    settings = wiring.settings
    resumed = build(project, settings, stub.model(), MODEL, resume=wiring.session.id)
    await collect(resumed.agent.run("and now?"))
    first, later = stub.bodies()
    assert uncached(later["messages"][0]) == uncached(first["messages"][0])  # the cache breakpoint moved on
    assert "ZEBRA-42" in json.dumps(later["messages"][0]) and "changed since" not in json.dumps(later)


async def test_plain_mode_shows_one_folded_line(stub: Stub, project: Path) -> None:
    (project / "README.md").write_text(README, encoding="utf-8")
    stub.script(say("Seen."))
    wiring = stub.wire(project)
    printed = await plain_exchange(wiring, "look at @README.md", "Seen.")
    shown = printed
    assert "attached README.md (32 B)" in shown and "ZEBRA-42" not in shown.split("Seen.")[0]
    assert "ZEBRA-42" in json.dumps(stub.bodies()[0])


async def test_the_app_folds_the_attachment_and_unfolds_its_text(stub: Stub, project: Path) -> None:
    (project / "README.md").write_text(README, encoding="utf-8")
    stub.script(say("Seen."))
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        app.query_one(PromptInput).text = "look at @README.md"
        await pilot.press("enter")
        await until(lambda: len(stub.server.requests) >= 1 and not app.busy, pause=pilot.pause)
        folds = [w for w in app.query(Foldable) if w.entry.kind == "attached"]
        assert [w.entry.text.strip() for w in folds] == ["attached README.md (32 B)"]
        assert "ZEBRA-42" in folds[0].entry.body and "ZEBRA" not in str(folds[0].render())
        folds[0].expanded = True
        assert "ZEBRA-42" in str(folds[0].render())
    assert "ZEBRA-42" in json.dumps(stub.bodies()[0])


async def test_the_export_folds_the_attachment_under_its_line(stub: Stub, project: Path) -> None:
    (project / "README.md").write_text(README, encoding="utf-8")
    stub.script(say("Seen."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("look at @README.md"))
    records = read_history(wiring.session.path, typed=True).typed
    html = page_html(records, project, wiring.session.id)
    assert "<summary>attached README.md (32 B)</summary><pre># Demo" in html
    markdown = page_markdown(records, project, wiring.session.id)
    assert "<details><summary>attached README.md (32 B)</summary>" in markdown and "ZEBRA-42" in markdown
    assert "<file path" not in html and "<file path" not in markdown
