"""The safety net at the context window, through every front end, against a loopback server that
enforces a window the way each API does.

A long session is driven to and past the limit: the request that does not fit is refused (the
server's 400, or rhapsody's estimate before sending), rhapsody takes the oldest calls out first,
only as many as the request for the note needs, with no model call, asks for the field note over
what is left (the latest results included), strips the rest after the note, and the turn goes on
to its end (when no cut makes room, it strips everything first, as before; with thinking on, every
thinking block so far is dropped before the cut).
One notice, every request the server answered valid, the history valid and resumable.
"""

from __future__ import annotations

from rhapsody.core.session.records import dump
from rhapsody.core.session.records import parsed
from rhapsody.core.session.records import dumped
import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from rhapsody.config.settings import Settings
from rhapsody.core.errors import ContextTooLong
from rhapsody.core.events import ContextPruned, Failed, SeamCommitted, ToolStarted, TurnEnded
from rhapsody.core.agent.safety_net import WINDOW_REASON
from rhapsody.core.session.session import Session
from rhapsody.core.session.strip import validity_problems
from rhapsody.core.window import OTHER_WINDOW, context_window, expected_tokens, share_limit
from rhapsody.loopback.chat import chat_bodies
from rhapsody.loopback.script import call, say
from rhapsody.providers.openai import OpenAIModel
from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.wiring import build

from tests.conftest import SANDBOX, Stub, collect, make_project, plain_mode, until
from tests.test_cli import rhapsody
from tests.core.session.test_handoff_e2e import handoff_turn
from tests.providers.test_openai import ChatStub, chat  # noqa: F401 - the fixture
from tests.frontends.test_app import wait_idle

ROOM = "at the window, room for the field note: "
"""How the line of the cut that makes room for the note at the window begins, in every front end."""
WINDOW = 20_000
"""The loopback's window in its own count (one token per four characters of each part's JSON)."""
CALLS = 4
"""Calls of 16,000 characters each (4,000 lines of output) that fill the window: the fifth request no longer fits."""


def big(n: int, thinking: bool = False) -> dict[str, Any]:
    """A narrated call whose output is 16,000 characters (about 4,000 of the loopback's tokens)."""
    turn = call(f"Step {n}: I will print a long block of output to see what the generator writes.",
                "bash", command=f"yes {n}{n}{n}{n} | head -c 16000")
    if thinking:
        turn["content"].insert(0, {"type": "thinking", "thinking": f"step {n} needs the next block"})
    return turn


def long_session(thinking: bool = False) -> list[dict[str, Any]]:
    """Four big calls, then the note (asked after the strip), its one line, a fifth call and the end."""
    return ([big(n, thinking) for n in range(1, CALLS + 1)]
            + [handoff_turn(thinking), say("Note written."), big(CALLS + 1, thinking), say("All done.")])


def window_stub(stub: Stub) -> Stub:
    stub.server.window = WINDOW
    stub.script(*long_session())
    return stub


def refused_for_length(text: str) -> bool:
    return "prompt is too long: " in text or "maximum context length is 20000" in text


def assert_netted(session_path: Path, root: Path, server: Any, refused: int, room: bool = True) -> dict[str, Any]:
    """The run went past the limit and on: room made for the note (`room`: a window prune, then one seam with
    its note) or a strip first (one seam at the window with its note attached), `refused` requests answered
    400, nothing lost, the history valid and resumable. Returns the seam record."""
    records = [json.loads(line) for line in session_path.read_text().splitlines()]
    seams = [r for r in records if r["kind"] == "seam"]
    prunes = [r for r in records if r["kind"] == "prune"]
    assert len(seams) == 1
    if room:
        assert len(prunes) == 1 and prunes[0]["reason"].startswith(WINDOW_REASON)
        assert refused_for_length(prunes[0]["reason"]) and "window" not in seams[0]
        assert records.index(prunes[0]) < records.index(seams[0])
        note = seams[0]["note_path"]
    else:
        assert prunes == [] and refused_for_length(seams[0]["window"]["refusal"])
        assert [r["seam"] for r in records if r["kind"] == "seam_note"] == [1]
        note = next(r for r in records if r["kind"] == "seam_note")["note_path"]
    assert "Field note, seam 1" in (root / note).read_text()
    statuses = [r.status for r in server.requests]
    assert statuses.count(400) == refused and statuses[-1] == 200
    assert all(server.prompt_tokens(r.body) <= WINDOW for r in server.requests if r.status == 200 and "messages" in r.body
               and "/chat/" not in r.path)
    runs = [r for r in records if r["kind"] == "tool_run" and r["name"] == "bash"]
    assert len(runs) == CALLS + 1  # every call ran once: the refused request was not answered, nothing re-ran
    text = session_path.read_text()
    assert all(f"{n}{n}{n}{n}\\n" * 100 in text for n in range(1, CALLS + 2))  # every output is on disk
    resumed = Session.resume(root, session_path)
    assert validity_problems(resumed.messages(), require_user_last=False) == []
    assert resumed.handoff.phase.value == "committed"
    return seams[0]


# -- the table, the share, the estimate -------------------------------------------------------------


def test_window_sizes_come_from_the_table_a_1m_id_or_the_setting() -> None:
    assert context_window("claude-sonnet-5-5") == 1_000_000
    assert context_window("claude-sonnet-4-5-20250929") == 200_000
    assert context_window("claude-sonnet-4-5[1m]") == 1_000_000
    assert context_window("us.anthropic.claude-haiku-4-5-v1:0") == 200_000
    assert context_window("llama3.1:8b") == OTHER_WINDOW
    assert context_window("llama3.1:8b", 32_768) == 32_768


def test_the_share_arms_at_its_share_of_the_room_the_last_seam_left() -> None:
    assert share_limit(0.6, 200_000, 0) == 120_000
    assert share_limit(0.6, 200_000, 20_000) == 128_000
    assert share_limit(0.6, 200_000, 150_000) == 180_000  # a text-heavy seam is not handed off every turn


def test_the_estimate_is_calibrated_by_the_last_reported_usage() -> None:
    records = [{"kind": "request", "est_tokens": 1000}, {"kind": "usage", "input_tokens": 100,
               "cache_creation_input_tokens": 300, "cache_read_input_tokens": 400, "output_tokens": 50}]
    assert expected_tokens(parsed(records), 2000) == 1600
    assert expected_tokens([], 2000) == 2000


# -- the loopback refuses as each API does ---------------------------------------------------------


async def test_the_loopback_refuses_a_long_request_as_the_messages_api_does_and_the_adapter_says_too_long(
        stub: Stub) -> None:
    stub.server.window = 10
    body = {"model": "claude-sonnet-5-5", "max_tokens": 10, "messages": [{"role": "user", "content": "x" * 400}]}
    client = anthropic.AsyncAnthropic(base_url=stub.server.url, api_key="k", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as raw:
        await client.messages.create(**body)
    assert raw.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]
    tokens = stub.server.prompt_tokens(body)
    assert raw.value.body["error"]["message"] == f"prompt is too long: {tokens} tokens > 10 maximum"  # type: ignore[index]
    with pytest.raises(ContextTooLong, match="prompt is too long"):
        await collect(stub.model(retries=2).stream(body))  # type: ignore[arg-type]
    assert [r.status for r in stub.server.requests] == [400, 400]  # a refusal for length is never retried


async def test_the_chat_endpoint_refuses_with_context_length_exceeded_and_the_adapter_says_too_long(
        chat: ChatStub) -> None:
    chat.server.window = 10
    body = {"model": "llama", "max_tokens": 10, "messages": [{"role": "user", "content": "x" * 400}]}
    with pytest.raises(openai.BadRequestError) as raw:
        await chat.client().chat.completions.create(model="llama", messages=[{"role": "user", "content": "x" * 400}])
    assert raw.value.code == "context_length_exceeded"
    with pytest.raises(ContextTooLong, match="maximum context length is 10 tokens"):
        await collect(OpenAIModel(chat.client(), retries=2, base_delay=0).stream(body))  # type: ignore[arg-type]


# -- the loop past the limit -----------------------------------------------------------------------


def output(n: int) -> str:
    """What big(n) printed, as it appears in a request body's JSON."""
    return f"{n}{n}{n}{n}\\n" * 100


async def test_a_request_the_api_refuses_for_length_makes_room_and_the_note_sees_the_latest_results(
        stub: Stub, project: Path) -> None:
    wiring = window_stub(stub).wire(project, handoff_at_share="off")
    events = await collect(wiring.agent.run("fill the window"))
    assert sum(isinstance(e, SeamCommitted) for e in events) == 1 and not any(isinstance(e, Failed) for e in events)
    assert sum(isinstance(e, ContextPruned) for e in events) == 1
    assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "end_turn"
    seam = assert_netted(wiring.session.path, project, stub.server, refused=1)
    prune = next(r for r in dumped(wiring.session.records) if r["kind"] == "prune")
    calls = [r["tool_use_id"] for r in dumped(wiring.session.records) if r["kind"] == "tool_run"]
    assert prune["ids"] == calls[:len(prune["ids"])] and 0 < len(prune["ids"]) < CALLS  # the oldest, only as many as needed
    assert [r.status for r in stub.server.requests][:CALLS + 1] == [200] * CALLS + [400]
    note_request = json.dumps(stub.server.requests[CALLS + 1].body)  # the first request after the refusal
    assert output(CALLS) in note_request and output(1) not in note_request  # the latest result is there, the oldest is not
    ask = stub.bodies()[CALLS]["messages"][-1]["content"][-1]["text"]
    assert ask.startswith("[rhapsody] The context reached the model's window (") and "prompt is too long: " in ask
    assert f"{wiring.session.id}:{calls[0]}" in ask and f"{wiring.session.id}:{calls[-1]}" not in ask  # what left, by id
    assert stub.server.prompt_tokens(stub.bodies()[CALLS]) <= WINDOW
    assert seam["before"]["tool_use"] == CALLS - len(prune["ids"]) + 1 and seam["after"]["tool_use"] == 1  # the rest


async def test_rhapsodys_own_estimate_strips_before_sending_so_the_api_never_refuses(stub: Stub, project: Path) -> None:
    wiring = window_stub(stub).wire(project, handoff_at_share="off", context_window=WINDOW)
    events = await collect(wiring.agent.run("fill the window"))
    assert sum(isinstance(e, SeamCommitted) for e in events) == 1 and isinstance(events[-1], TurnEnded)
    assert_netted(wiring.session.path, project, stub.server, refused=0)
    prune = next(r for r in dumped(wiring.session.records) if r["kind"] == "prune")
    assert "rhapsody's estimate; not sent" in prune["reason"]


async def test_with_thinking_the_note_at_the_window_still_sees_the_latest_results(stub: Stub, project: Path) -> None:
    """With thinking on, room is made for the note as without it: every thinking block so far is dropped first
    (the cut changes the prefix they are bound to, which the loopback checks as the API does), then the oldest
    calls leave; the note request carries the latest result, and every request after is valid. On the old code
    thinking stripped first and the note was written blind."""
    stub.server.window = WINDOW
    stub.script(*long_session(thinking=True))
    wiring = stub.wire(project, handoff_at_share="off", thinking=True)
    events = await collect(wiring.agent.run("fill the window"))
    assert isinstance(events[-1], TurnEnded) and not any(isinstance(e, Failed) for e in events)
    assert_netted(wiring.session.path, project, stub.server, refused=1)  # room first, then one seam with its note
    kinds = [r.kind for r in wiring.session.records]
    assert kinds.index("thinking_cut") < kinds.index("prune")  # a crash between the two leaves a valid history
    note_request = stub.server.requests[CALLS + 1].body
    assert output(CALLS) in json.dumps(note_request) and output(1) not in json.dumps(note_request)
    after = note_request["messages"]
    assert not any(b.get("type") == "thinking" for m in after if isinstance(m["content"], list) for b in m["content"])


async def test_the_openai_provider_strips_at_context_length_exceeded(chat: ChatStub, project: Path) -> None:
    chat.server.window = WINDOW
    chat.script(*long_session())
    wiring = chat.wire(project, handoff_at_share="off")
    events = await collect(wiring.agent.run("fill the window"))
    assert sum(isinstance(e, SeamCommitted) for e in events) == 1 and isinstance(events[-1], TurnEnded)
    assert_netted(wiring.session.path, project, chat.server, refused=1)
    assert all(len(json.dumps(b)) < 4 * WINDOW for b in chat_bodies(chat.server))


async def test_a_context_that_stripping_cannot_shrink_fails_with_one_line(stub: Stub, project: Path) -> None:
    stub.server.window = 50
    wiring = stub.wire(project, handoff_at_share="off")
    events = await collect(wiring.agent.run("a message longer than the whole window"))
    failed = [e for e in events if isinstance(e, Failed)]
    assert len(failed) == 1 and "stripping tool traffic would take nothing" in failed[0].message
    assert not any(r["kind"] == "seam" for r in dumped(wiring.session.records))


async def test_the_stripped_request_refused_again_ends_the_turn_once(stub: Stub, project: Path) -> None:
    stub.script(big(1), big(2), say("Two blocks read."))
    wiring = stub.wire(project, handoff_at_share="off")
    await collect(wiring.agent.run("read two blocks"))
    stub.server.window = 1000  # the strip takes the blocks, but system and tools alone are more than this
    stub.script(big(9))
    events = await collect(wiring.agent.run("one more"))
    failed = [e for e in events if isinstance(e, Failed)]
    assert len(failed) == 1 and "after the strip at the window" in failed[0].message
    assert [r.status for r in stub.server.requests][-2:] == [400, 400]
    assert [r["kind"] for r in dumped(wiring.session.records)].count("seam") == 1  # the strip stays: nothing is lost by it


async def test_the_share_asks_for_a_seam_before_the_window_is_reached(stub: Stub, project: Path) -> None:
    stub.server.window = WINDOW
    stub.script(big(1), big(2), big(3), handoff_turn(), say("Noted."), say("All done."))
    wiring = stub.wire(project, handoff_at_share=0.5, context_window=WINDOW)
    events = await collect(wiring.agent.run("fill half the window"))
    seams = [dump(e.record) for e in events if isinstance(e, SeamCommitted)]
    assert len(seams) == 1 and "window" not in seams[0] and seams[0]["note_path"]  # an ordinary seam, note first
    assert all(r.status == 200 for r in stub.server.requests)


# -- every front end ---------------------------------------------------------------------------------


def test_headless_run_past_the_window_completes_with_one_seam_line(stub: Stub, project: Path) -> None:
    window_stub(stub)
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url, "RHAPSODY_SANDBOX": SANDBOX}
    result = rhapsody("-p", "fill the window", "--cwd", str(project), "--permission-mode", "yolo",
                      "--handoff-at-share", "off", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(ROOM) == 1 and result.stdout.count("seam 1: ") == 1
    assert "All done." in result.stdout and "Traceback" not in result.stderr
    history = next((project / ".rhapsody" / "history").glob("*.jsonl"))
    assert_netted(history, project, stub.server, refused=1)


async def test_plain_mode_run_past_the_window_completes_with_one_seam_line(stub: Stub, project: Path) -> None:
    wiring = window_stub(stub).wire(project, handoff_at_share="off", context_window=WINDOW)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("fill the window\r")
        await until(lambda: "All done." in out.getvalue() and not wiring.agent.busy, within=30)
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    assert out.getvalue().count(ROOM) == 1 and out.getvalue().count("seam 1: ") == 1
    assert_netted(wiring.session.path, project, stub.server, refused=0)


async def test_the_app_run_past_the_window_completes_with_one_seam_divider(stub: Stub, project: Path) -> None:
    wiring = window_stub(stub).wire(project, handoff_at_share="off")
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        app.start_turn("fill the window")
        await wait_idle(pilot)
        seams = [e for e in app.transcript.entries if e.kind == "seam"]
        assert len(seams) == 1 and any(ROOM in e.text for e in app.transcript.entries)
        assert any("All done." in e.text for e in app.transcript.entries)
        assert "seams 1" in str(app.query_one("#status").render())
    assert_netted(wiring.session.path, project, stub.server, refused=1)


@pytest.mark.parametrize("thinking, cut_after, phase", [(False, "prune", "idle"), (True, "prune", "idle"),
                                                       (True, "thinking_cut", "idle")])
async def test_a_crash_between_the_cut_and_the_ask_resumes_valid_and_goes_on(
        stub: Stub, project: Path, thinking: bool, cut_after: str, phase: str) -> None:
    """The cut (room for the note; with thinking, after the thinking cut) and the ask are two records written one after
    the other; a history cut after the first (what a kill between the two appends leaves, each being one
    fsynced write) resumes valid."""
    stub.server.window = WINDOW
    stub.script(*long_session(thinking))
    wiring = stub.wire(project, handoff_at_share="off", thinking=thinking)
    await collect(wiring.agent.run("fill the window"))
    lines = wiring.session.path.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == cut_after) + 1
    copy = wiring.session.path.with_name("20990101-000000-abcdef.jsonl")
    copy.write_text("".join(lines[:cut]))
    resumed = Session.resume(project, copy)
    assert resumed.handoff.phase.value == phase and validity_problems(resumed.messages()) == []
    stub.script(say("Going on from what I still see."))
    settings = Settings(permission_mode="yolo", sandbox=SANDBOX, handoff_at_share="off", thinking=thinking)
    again = build(project, settings, stub.model(), None, resume=copy.stem)
    events = await collect(again.agent.run("go on"))
    assert isinstance(events[-1], TurnEnded)


async def noted_then_refused(stub: Stub, root: Path, window: int | None) -> list[Any]:
    """Three big calls, a handoff asked mid-run; the note is written; the request after it is refused
    when `window` lies between its size and the size of the request before it."""
    stub.server.window = window
    stub.script(big(1), big(2), big(3), handoff_turn(), say("Going on: all three blocks are read."))
    wiring = stub.wire(root, handoff_at_share="off")
    events = []
    async for event in wiring.agent.run("read three blocks"):
        events.append(event)
        if isinstance(event, ToolStarted) and "3333" in str(event.call.input.get("command")):
            wiring.agent.request_handoff()
    return events


async def test_a_note_written_before_the_refusal_is_kept_and_the_work_goes_on(stub: Stub, tmp_path: Path) -> None:
    await noted_then_refused(stub, make_project(tmp_path / "dry"), None)
    asked, noted = (stub.server.prompt_tokens(b) for b in stub.bodies()[3:5])
    stub.server.requests.clear()
    root = make_project(tmp_path / "proj")
    events = await noted_then_refused(stub, root, (asked + noted) // 2)
    seams = [dump(e.record) for e in events if isinstance(e, SeamCommitted)]
    assert len(seams) == 1 and seams[0]["window"] and seams[0]["note_path"]  # the note it had, no second ask
    assert [r.status for r in stub.server.requests].count(400) == 1 and isinstance(events[-1], TurnEnded)
    assert stub.bodies()[-1]["messages"][-1]["content"][-1]["text"].startswith("[rhapsody] The micro-handoff is done")


async def test_the_automatic_seam_leaves_room_for_its_own_note_so_the_window_never_refuses(
        stub: Stub, project: Path) -> None:
    """A share so high that the window would come first: the seam is asked once the context leaves less
    than the note's room, so the request for the note fits and nothing is refused."""
    stub.server.window = WINDOW
    stub.script(big(1), big(2), big(3), handoff_turn(), say("Noted."), say("All done."))
    wiring = stub.wire(project, handoff_at_share=0.99, context_window=WINDOW)
    events = await collect(wiring.agent.run("fill the window"))
    seams = [dump(e.record) for e in events if isinstance(e, SeamCommitted)]
    assert len(seams) == 1 and "window" not in seams[0] and seams[0]["note_path"]
    assert all(r.status == 200 for r in stub.server.requests)
    assert not any(r["kind"] == "prune" for r in dumped(wiring.session.records))
    assert max(stub.server.prompt_tokens(b) for b in stub.bodies()) <= WINDOW
