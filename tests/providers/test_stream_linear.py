"""Streamed replies cost time linear in their size: bounded work per delta, in the provider and in the app."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rhapsody.loopback.script import say
from rhapsody.providers.stream_assembly import Assembly
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.app.widgets import LIVE_SPLIT

from tests.conftest import Stub, until
from tests.frontends.test_app import type_and_send, wait_idle

PROSE = "".join(f"line {i}: the guard checks len before strip, so empty input passes\n" for i in range(120))
CODE = "```python\n" + "".join(f"value_{i} = compute({i})  # one line of a long listing\n" for i in range(160)) + "```\n"


async def test_a_long_reply_without_paragraph_breaks_streams_as_bounded_widgets(stub: Stub, project: Path) -> None:
    reply = PROSE + CODE + "Done."
    stub.script(say(reply))
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_and_send(pilot, "write a lot")
        await wait_idle(pilot)
        chunks = [e.text for e in app.transcript.entries if e.kind == "assistant"]
    assert len(chunks) > len(reply) // (2 * LIVE_SPLIT)
    assert max(len(c) for c in chunks) < LIVE_SPLIT + 200
    continued = [c for c in chunks[1:] if c.startswith("```python\n") and not c.startswith(CODE[:30])]
    assert continued, "a chunk that starts inside the code fence reopens it"
    rebuilt = chunks[0] + "".join(c.removeprefix("```python\n") if c in continued else c for c in chunks[1:])
    assert rebuilt == reply
    assert wiring.session.messages()[-1].texts() == [reply]  # the history keeps the reply whole


class _Delta:
    def __init__(self, text: str) -> None:
        self.type, self.text = "text_delta", text


class _Event:
    def __init__(self, kind: str, **fields: object) -> None:
        self.type = kind
        self.__dict__.update(fields)


def test_assembly_keeps_pieces_and_joins_them_once() -> None:
    # A quadratic accumulator would copy the whole text per delta; here the pieces are kept
    # as given and joined only when the block stops.
    assembly = Assembly()
    assembly.feed(_Event("message_start", message=_Event("message", usage=_Event("usage", input_tokens=3))))
    assembly.feed(_Event("content_block_start", index=0, content_block={"type": "text", "text": ""}))
    pieces = [f"piece {i} " for i in range(1000)]
    for piece in pieces:
        assembly.feed(_Event("content_block_delta", index=0, delta=_Delta(piece)))
    assert assembly.parts[0].pieces == pieces
    assembly.feed(_Event("content_block_stop", index=0))
    assert assembly.parts[0].block["text"] == "".join(pieces) and assembly.parts[0].pieces == []


async def test_a_retried_stream_drops_every_chunk_it_had_shown(stub: Stub, project: Path) -> None:
    from rhapsody.loopback.server import Fault

    lost = "".join(f"lost line {i} of a long reply that a torn stream voids\n" for i in range(150))
    stub.script(say("The answer after the retry."))
    stub.server.inject(Fault("truncate", after_events=160, partial={"content": [{"type": "text", "text": lost}]}))
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_and_send(pilot, "go")
        await wait_idle(pilot)
        shown = [e.text for e in app.transcript.entries if e.kind == "assistant" and e.text]
        assert shown == ["The answer after the retry."]
        assert not any("lost line" in str(w.render()) for w in app.transcript.query("Static"))


async def test_the_app_counts_a_retry_after_down_in_the_status_bar(stub: Stub, project: Path) -> None:
    from textual.widgets import Static

    from rhapsody.loopback.server import Fault

    stub.script(say("Answered after the wait."))
    stub.server.inject(Fault("status", status=429, retry_after=100000))
    wiring = stub.wire(project)
    wiring.agent.model.max_retry_after = 2.5  # type: ignore[attr-defined]  # production cap: 60 s
    slept: list[float] = []
    step = asyncio.Event()

    async def by_hand(seconds: float) -> None:
        """Each step of the wait ends when the test has seen the status bar count it."""
        slept.append(seconds)
        await step.wait()
        step.clear()

    wiring.agent.model.sleep = by_hand  # type: ignore[attr-defined]
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        await type_and_send(pilot, "go")
        for steps, shown in ((1, "retry 1 in 2 s"), (2, "retry 1 in 2 s"), (3, "retry 1 in 1 s")):
            await until(lambda: len(slept) == steps and shown in str(app.query_one("#status", Static).render()),
                        pause=pilot.pause)
            step.set()
        await wait_idle(pilot)
        assert any("↻ retry 1 in 2.5 s" in e.text for e in app.transcript.entries)
    assert slept == [0.5, 1.0, 1.0]
