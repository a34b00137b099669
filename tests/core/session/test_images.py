"""Images from the human: through the real anthropic and openai clients against the loopback server."""

from __future__ import annotations

import base64
import hashlib
import stat
import struct
import zlib
from pathlib import Path
from typing import Any

import anthropic
import pytest

from rhapsody.core.events import ImagesAttached, Notice, SeamCommitted
from rhapsody.core.session.history import read_history
from rhapsody.core.session.images import MAX_BYTES, dimensions, media_type
from rhapsody.core.session.session import Session
from rhapsody.loopback.script import say
from rhapsody.view.render import record_lines

from tests.conftest import Stub, collect
from tests.core.session.test_handoff_e2e import handoff_turn, step
from tests.providers.test_openai import ChatStub, chat  # noqa: F401 - the fixture


def png(width: int, height: int) -> bytes:
    """A real PNG of the given size (one grey channel)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\0" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


GIF = b"GIF89a" + struct.pack("<HH", 7, 5) + b"\x00\x00\x00;"
JPEG = b"\xff\xd8\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0" + b"\0" * 9 + b"\xff\xc0" + struct.pack(">HBHH", 17, 8, 48, 64) + b"\0" * 10


def images_in(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "image"]


async def test_an_at_image_reaches_the_model_as_base64_and_the_history_keeps_only_its_hash(
        stub: Stub, project: Path) -> None:
    data = png(3, 2)
    (project / "shot.png").write_bytes(data)
    stub.script(say("A grey picture."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("what is in @shot.png?"))
    assert [e.labels for e in events if isinstance(e, ImagesAttached)] == [("[image shot.png 3x2]",)]
    content = stub.bodies()[0]["messages"][0]["content"]
    assert content[0]["text"] == "what is in @shot.png?"
    [image] = images_in(stub.bodies()[0])
    assert image["source"]["media_type"] == "image/png" and base64.b64decode(image["source"]["data"]) == data
    digest = hashlib.sha256(data).hexdigest()
    stored = project / ".rhapsody" / "images" / f"{digest}.png"
    assert stored.read_bytes() == data and stat.S_IMODE(stored.stat().st_mode) == 0o600
    history = wiring.session.path.read_text()
    assert image["source"]["data"] not in history and digest in history
    request = next(r for r in read_history(wiring.session.path).records if r["kind"] == "request")
    assert request["bytes"] > len(image["source"]["data"])  # the wire's size, image included
    lines = [line.text for _, line in record_lines(wiring.session.records, project, wiring.session.id,
                                                   wiring.session.conversation)]
    assert "  [image shot.png 3x2]" in lines


async def test_a_pasted_quoted_path_attaches_by_content_not_by_name(stub: Stub, project: Path) -> None:
    folder = project / "My Shots"
    folder.mkdir()
    (folder / "diagram.gif").write_bytes(GIF)
    (folder / "photo.webp").write_bytes(JPEG)  # a JPEG under another name
    stub.script(say("Two images."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run(f"compare '{folder}/diagram.gif' and {str(folder).replace(' ', chr(92) + ' ')}/photo.webp"))
    assert [e.labels for e in events if isinstance(e, ImagesAttached)] == [("[image diagram.gif 7x5]", "[image photo.webp 64x48]")]
    kinds = [i["source"]["media_type"] for i in images_in(stub.bodies()[0])]
    assert kinds == ["image/gif", "image/jpeg"]


async def test_a_refused_image_is_one_line_and_the_words_still_go(stub: Stub, project: Path) -> None:
    (project / "notes.png").write_text("not an image", encoding="utf-8")
    with (project / "huge.png").open("wb") as f:
        f.write(png(1, 1))
        f.truncate(MAX_BYTES + 1)
    stub.script(say("I see only text."))
    wiring = stub.wire(project)
    events = await collect(wiring.agent.run("look at @notes.png, @huge.png and @gone.png"))
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "image @notes.png not attached: not a PNG, JPEG, GIF or WebP image (by its content)",
        f"image @huge.png not attached: {MAX_BYTES + 1:,} bytes is over the {MAX_BYTES:,}-byte limit for one image",
        "image @gone.png not attached: no such file",
    ]
    assert images_in(stub.bodies()[0]) == []
    assert stub.bodies()[0]["messages"][0]["content"][0]["text"] == "look at @notes.png, @huge.png and @gone.png"


async def test_images_stay_across_a_seam_and_a_resume(stub: Stub, project: Path) -> None:
    (project / "shot.png").write_bytes(png(4, 4))
    stub.script(step(1), say("Printed."), handoff_turn(), say("Noted."), say("Still see it."), say("And after resume."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("print a marker, keep @shot.png in mind"))
    wiring.agent.request_handoff()
    seams = [e for e in await collect(wiring.agent.run()) if isinstance(e, SeamCommitted)]
    assert len(seams) == 1
    await collect(wiring.agent.run("still there?"))
    after = stub.bodies()[-1]
    assert len(images_in(after)) == 1
    calls = [b["name"] for m in after["messages"] if isinstance(m["content"], list) for b in m["content"]
             if b.get("type") == "tool_use"]
    assert calls == ["micro_handoff"]
    seam = next(r for r in read_history(wiring.session.path).records if r["kind"] == "seam")
    assert seam["before"]["tool_use"] > seam["after"]["tool_use"]
    resumed = Session.resume(project, wiring.session.path)
    body, _, _ = resumed.request_and_size()
    assert [i["source"]["media_type"] for i in images_in(body)] == ["image/png"]


async def test_the_openai_provider_sends_an_image_as_a_data_url(chat: ChatStub, project: Path) -> None:  # noqa: F811
    data = png(2, 2)
    (project / "shot.png").write_bytes(data)
    chat.script(say("A tiny picture."))
    wiring = chat.wire(project)
    await collect(wiring.agent.run("describe @shot.png"))
    user = chat.bodies()[0]["messages"][-1]
    assert user["content"][0] == {"type": "text", "text": "describe @shot.png"}
    assert user["content"][1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(data).decode()


def test_magic_bytes_and_headers_give_type_and_size() -> None:
    assert (media_type(png(9, 4)), dimensions(png(9, 4), "image/png")) == ("image/png", (9, 4))
    assert (media_type(GIF), dimensions(GIF, "image/gif")) == ("image/gif", (7, 5))
    assert (media_type(JPEG), dimensions(JPEG, "image/jpeg")) == ("image/jpeg", (64, 48))
    webp = b"RIFF" + struct.pack("<I", 30) + b"WEBPVP8X" + b"\0" * 8 + (99).to_bytes(3, "little") + (49).to_bytes(3, "little")
    assert (media_type(webp), dimensions(webp, "image/webp")) == ("image/webp", (100, 50))
    assert media_type(b"%PDF-1.7") is None


async def test_the_loopback_refuses_an_image_whose_bytes_are_not_its_media_type(stub: Stub) -> None:
    client = anthropic.AsyncAnthropic(base_url=stub.server.url, api_key="sk-test-key", max_retries=0, timeout=5.0)
    fake = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg",
                                        "data": base64.b64encode(png(1, 1)).decode()}}
    with pytest.raises(anthropic.BadRequestError, match="does not match the provided media type"):
        await client.messages.create(model="claude-sonnet-5-5", max_tokens=10,
                                     messages=[{"role": "user", "content": [fake]}])


async def test_a_large_image_counts_by_its_area_not_its_base64_length(stub: Stub, project: Path) -> None:
    noisy = png(1000, 1000)[:33] + bytes(range(256)) * 4000  # a valid header, ~1 MB of body
    (project / "big.png").write_bytes(noisy)
    stub.script(say("Seen."))
    wiring = stub.wire(project)
    await collect(wiring.agent.run("look at @big.png"))
    request = next(r for r in read_history(wiring.session.path).records if r["kind"] == "request")
    assert request["bytes"] > 1_300_000
    assert request["est_tokens"] < 1334 + 10_000  # 1000 x 1000 / 750 plus the text, not ~450,000
