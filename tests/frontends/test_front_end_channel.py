"""Events are the one channel from the loop to the front ends, and the end-of-turn rules live in the loop.

The app, plain mode and headless draw what happens live from the loop's events only; they read
the history's records only to rebuild a transcript and for full views of old results. The rules
for a turn's end (ctrl+o always ends in a seam; Esc ends a handoff request and says so) are the
loop's, so each front end honours them, driven here through the real loop and the loopback server.
"""

from __future__ import annotations

import ast
import asyncio
import io
import json
from contextlib import aclosing
from pathlib import Path


from rhapsody.core.events import HandoffFailed, Interrupted, TextDelta
from rhapsody.core.session.handoff_state import CANCELLED, Phase
from rhapsody.frontends.headless import run_headless
from rhapsody.loopback.script import call, say

from tests.conftest import GATE, Stub, held, plain_mode, until
from tests.core.session.test_handoff_e2e import handoff_turn
from tests.frontends.test_app_keys import NARRATE

SRC = Path(__file__).resolve().parents[2] / "src" / "rhapsody"
FRONT_ENDS = [*sorted((SRC / "frontends").rglob("*.py"))]

REBUILDS = {
    "frontends/app/feed.py": {
        "rebuild": "rebuilds the transcript from history (start, resume, a seam, a rewind, /clear)"},
    "frontends/app/app.py": {"full_view": "the full view of an old result, as the history holds it"},
    "frontends/app/status.py": {
        "seam_text": "the status bar's seam estimate, a fold over the whole history",
        "_seam_text": "the same fold, cached on the history's length"},
    "frontends/plain.py": {"resumed_recap": "where a resumed session was left, rebuilt from its history"},
    "frontends/acp/server.py": {
        "load_session": "session/load replays the history as the protocol's updates",
        "close": "a session never prompted leaves no history file, as the app's parting line does"},
    "frontends/acp/listing.py": {"_info": "session/list titles an old session by its first message, as the picker"},
    "frontends/headless.py": {
        "history_length": "where this run's records begin, for its summary",
        "written_since": "the run's records, folded once it is over into its result"},
}
"""Functions of the front ends allowed to read history records, and why none of them draws live lines."""

TALK = {"content": [{"type": "text", "text": "A long answer with no tool call at all. " * 60}]}
"""A reply of 60 forty-character deltas; each test holds it after its first (`held`) to act mid-stream."""
REQUESTED = "⚙ [rhapsody] Micro-handoff requested"


def record_reads(path: Path) -> list[tuple[str, int]]:
    """(enclosing function, line) of every `X.records` read in a module, X not the object's own `self`."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if (isinstance(child, ast.Attribute) and child.attr == "records"
                    and not (isinstance(child.value, ast.Name) and child.value.id == "self")):
                found.append((function, child.lineno))
            visit(child, name)

    visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return found


def test_front_ends_read_history_records_only_to_rebuild() -> None:
    reads = {str(p.relative_to(SRC)): record_reads(p) for p in FRONT_ENDS}
    assert any(reads.values()), "the scan finds the rebuilds' reads"
    live = [f"{name}:{line} in {function}()" for name, found in reads.items() for function, line in found
            if function not in REBUILDS.get(name, {})]
    assert not live, "draw these from loop events (core/events.py), not session.records:\n" + "\n".join(live)
    stale = [f"{name}: {function}" for name, allowed in REBUILDS.items() for function in allowed
             if function not in {f for f, _ in reads[name]}]
    assert not stale, f"allowed but no longer reading records (drop them from REBUILDS): {stale}"


def test_the_check_finds_a_live_read_of_records(tmp_path: Path) -> None:
    module = tmp_path / "front.py"
    module.write_text("class A:\n    def show(self):\n        return self.agent.session.records[-1]\n"
                      "    def own(self):\n        return self.records\n", encoding="utf-8")
    assert record_reads(module) == [("show", 3)]


async def test_a_turn_closed_by_its_consumer_says_what_it_could_not_on_the_one_event_queue(
        stub: Stub, project: Path) -> None:
    talk, go = held(TALK)
    stub.script(talk)
    wiring = stub.wire(project)
    async with aclosing(wiring.agent.run("talk")) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                wiring.agent.request_handoff()
                break  # as the app's worker closes the turn when Esc lands while it draws an event
    go.set()
    unsaid = wiring.agent.outbox.ready()
    assert [type(e) for e in unsaid] == [Interrupted, HandoffFailed]
    assert isinstance(unsaid[1], HandoffFailed) and unsaid[1].reason == CANCELLED
    assert wiring.agent.outbox.ready() == [] and wiring.session.handoff.phase == Phase.FAILED


async def test_plain_ctrl_o_as_a_turn_ends_without_a_tool_call_ends_in_a_seam(stub: Stub, project: Path) -> None:
    talk, go = held(TALK)
    stub.script(call(NARRATE, "bash", command="echo earlier"), say("ran it"), talk, handoff_turn(), say("Noted."))
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("run something\r")
        await until(lambda: not wiring.agent.busy and "ran it" in out.getvalue())
        pipe.send_text("talk\r")
        await until(lambda: "A long answer" in out.getvalue())
        pipe.send_text("\x0f")  # ctrl+o mid-turn: the earlier call is smaller than a note, so it asks first
        await until(lambda: "a seam would not pay now" in out.getvalue())
        pipe.send_text("y\r")
        await until(lambda: wiring.session.handoff.pending)
        assert out.getvalue().count("A long answer") == 1 and REQUESTED not in out.getvalue()  # still mid-reply
        go.set()
        await until(lambda: any(r.kind == "seam" for r in wiring.session.records), within=20)
        await until(lambda: not wiring.agent.busy and "Noted." in out.getvalue())
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    text = out.getvalue()
    assert len(stub.bodies()) == 5 and "Micro-handoff requested" in json.dumps(stub.bodies()[3]["messages"][-1])
    assert text.index("A long answer") < text.index(REQUESTED) < text.index("Noted.") < text.index("seam 1:")
    assert text.count(REQUESTED) == 1 and not wiring.session.handoff.pending


async def test_plain_ctrl_c_ends_a_handoff_request_and_says_so(stub: Stub, project: Path) -> None:
    talk, go = held(TALK)
    stub.script(talk, say("the answer to next"))
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("talk\r")
        await until(lambda: "A long answer" in out.getvalue())
        pipe.send_text("\x0f")  # no calls yet: requested at once, judged at the turn's end
        await until(lambda: "micro-handoff requested" in out.getvalue())
        assert out.getvalue().count("A long answer") == 1  # ctrl+c lands mid-reply
        pipe.send_text("\x03")
        await until(lambda: "micro-handoff cancelled" in out.getvalue() and not wiring.agent.busy)
        go.set()
        pipe.send_text("next\r")
        await until(lambda: "the answer to next" in out.getvalue())
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    assert not wiring.session.handoff.pending and "Micro-handoff requested" not in json.dumps(stub.bodies())
    assert out.getvalue().count("✗ handoff: micro-handoff cancelled: Esc interrupted the turn") == 1


async def test_plain_a_queued_line_reaches_the_model_at_the_end_of_the_turn_as_in_the_app(
        stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "bash", command=f"{GATE}; echo ok"), say("First task done."), say("Second task done."))
    wiring = stub.wire(project)
    async with plain_mode(wiring) as (pipe, out, task):
        pipe.send_text("first\r")
        await until(lambda: NARRATE in out.getvalue())  # the call is narrated: it runs next, held by the gate
        pipe.send_text(">>then do the second task\r")
        await until(lambda: "h1 pending: end of turn" in out.getvalue())
        (project / "go").touch()
        await until(lambda: "Second task done." in out.getvalue() and not wiring.agent.busy)
        pipe.send_text("/quit\r")
        assert await asyncio.wait_for(task, 10) == 0
    bodies = stub.bodies()
    assert [b["type"] for b in bodies[1]["messages"][-1]["content"]] == ["tool_result"]  # not at the tool boundary
    assert bodies[2]["messages"][-1]["content"][0]["text"] == "then do the second task"
    text = out.getvalue()
    assert text.index("First task done.") < text.index("✓ hint h1 delivered (end of turn)") < text.index("Second task")


async def test_headless_a_handoff_wanted_as_the_turn_ends_is_asked_for_and_ends_in_a_seam(
        stub: Stub, project: Path) -> None:
    # The context is ~2.5k tokens after the first reply and ~6.8k after the second (the numbers' output):
    # the threshold asks for the handoff on the last reply of the task, which calls no tool.
    stub.script(call(NARRATE, "bash", command="seq 1 3000"), say("done"), handoff_turn(), say("Noted."))
    wiring = stub.wire(project, handoff_at_tokens=4500)
    out, err = io.StringIO(), io.StringIO()
    assert await run_headless(wiring.agent, "count", "jsonl", out=out, err=err) == 0, err.getvalue()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    names = [e["event"] for e in events]
    assert names.count("turn_started") == 2 and names.index("turn_ended") < names.index("harness_said")
    said = [e for e in events if e["event"] == "harness_said"]
    assert len(said) == 1 and said[0]["text"].startswith("[rhapsody] Micro-handoff requested")
    assert "seam_committed" in names and events[-1]["seams"] == 1 and len(stub.bodies()) == 4
    assert not wiring.session.handoff.pending


async def test_headless_text_shows_the_harness_words_and_a_finished_edit_carries_its_diff(
        stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "edit_file", path="app.py", old="a - b", new="a + b"), handoff_turn(), say("Noted."),
                say("fixed"))
    wiring = stub.wire(project)
    wiring.agent.request_handoff()  # wanted as the task begins: asked at its first tool boundary
    out = io.StringIO()
    assert await run_headless(wiring.agent, "fix", out=out, err=io.StringIO()) == 0
    text = out.getvalue()
    assert text.index(f"  {REQUESTED}") < text.index("seam 1:") < text.index("  ⚙ [rhapsody] The micro-handoff is done")
    stub.script(call(NARRATE, "edit_file", path="app.py", old="a + b", new="a * b"), say("again"))
    jsonl = io.StringIO()
    assert await run_headless(wiring.agent, "again", "jsonl", out=jsonl, err=io.StringIO()) == 0
    finished = [json.loads(line) for line in jsonl.getvalue().splitlines() if '"tool_finished"' in line]
    assert "-    return a + b\n+    return a * b" in finished[0]["diff"]


async def test_app_shows_each_harness_line_once_live_and_as_a_rebuild_shows_it(stub: Stub, project: Path) -> None:
    from rhapsody.frontends.app.app import RhapsodyApp

    from tests.frontends.test_app_keys import idle, send, texts

    stub.script(call(NARRATE, "bash", command="echo earlier"), handoff_turn(), say("Noted."), say("continued"))
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    async with app.run_test(size=(100, 30)) as pilot:
        wiring.agent.request_handoff()  # asked at the first tool boundary: the seam interrupts work, so "go on" follows
        await send(pilot, "run something")
        await idle(pilot)
        live = [t for t in texts(app) if t.startswith("⚙")]
        await app.surface.reload()
        assert [t for t in texts(app) if t.startswith("⚙")] == live
    assert [t[:40] for t in live] == ["⚙ [rhapsody] Micro-handoff requested. Wh", "⚙ [rhapsody] The micro-handoff is done: "]
