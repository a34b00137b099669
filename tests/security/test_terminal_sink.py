"""One sink for every byte that reaches a terminal: random escape and control sequences from a hostile
project (command descriptions, file names, a file a command prints, deny rules) and from the model go
through plain mode, headless (text and JSON lines), the app and the subcommands, and no ESC, C0 (but
newline and tab), C1, DEL or bidi control comes out, while the visible words do."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shlex
from pathlib import Path

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from rhapsody.frontends.app.app import RhapsodyApp
from rhapsody.frontends.headless import run_headless
from rhapsody.loopback.script import call, say

from tests import launch
from tests.conftest import Stub, plain_mode
from tests.core.session.test_handoff_e2e import handoff_turn

NARRATE = "I will print the notes file now because the task needs to see what it holds."
SEQUENCES = ["\x1b]52;c;b3duZWQ=\x07", "\x1b]52;c;b3duZWQ=\x1b\\", "\x1b]0;owned\x07", "\x1b[2J", "\x1b[H\x1b[31m",
             "\x1bc", "\x9b2J", "\x9d0;owned\x9c", "\x90q\x9c", "\x7f", "\x08\x08", "\r", "\u202e", "\u2066", "\x05"]
hostile = st.lists(st.sampled_from(SEQUENCES) | st.characters(categories=["Cc", "Cf"], exclude_characters="\x00")
                   | st.text(alphabet="ab ;[]", max_size=3), min_size=1, max_size=8).map("".join)
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
EVERY = "".join(SEQUENCES)
PROPERTY = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture],
                    phases=(Phase.explicit, Phase.generate))  # each example drives a whole front end: no shrinking


def plant(project: Path, bad: str) -> None:
    """A project whose command file, command file name and notes file carry `bad` between visible words."""
    commands = project / ".rhapsody" / "commands"
    commands.mkdir(parents=True, exist_ok=True)
    for old in commands.iterdir():
        old.unlink()
    (commands / "review.md").write_text(f"---\ndescription: desc-MARK {bad} tail\n---\nReview it.\n", encoding="utf-8")
    name = bad.replace("/", "").encode("utf-8")[:150].decode("utf-8", "ignore")
    (commands / f"bad name {name}.md").write_text("x\n", encoding="utf-8")  # set aside: its name is shown
    (project / "notes.txt").write_text(f"note-MARK {bad} note-END\n", encoding="utf-8")


def assert_clean(text: str, *marks: str) -> None:
    """No byte that drives a terminal, and every visible mark arrived."""
    found = UNSAFE.search(text)
    if found is not None:
        around = text[max(0, found.start() - 60):found.start() + 20]
        raise AssertionError(f"{found.group()!r} reached the terminal at {found.start()}: {around!r}")
    for mark in marks:
        assert mark in text, (mark, text[-2000:])


@settings(PROPERTY, max_examples=8)
@example(bad=EVERY)
@given(bad=hostile)
def test_plain_mode_writes_no_control_sequence_of_a_hostile_project(stub: Stub, project: Path, bad: str) -> None:
    plant(project, bad)
    stub.script(call(NARRATE, "bash", command="cat notes.txt"), say(f"reply-MARK {bad} reply-END"), handoff_turn(),
                say("Noted."))
    wiring = stub.wire(project, deny=[f"bash:rm {bad}"])

    async def scenario() -> str:
        async with plain_mode(wiring) as (pipe, out, task):
            pipe.send_text("/help\r/permissions\r!cat notes.txt\r")
            while "queued: the agent reads it" not in out.getvalue():
                await asyncio.sleep(0.01)
            pipe.send_text("hello\r")
            while "reply-END" not in out.getvalue():
                await asyncio.sleep(0.01)
            pipe.send_text("/handoff anyway\r")  # the call's result leaves the context: /recall finds it
            while "seam 1:" not in out.getvalue():
                await asyncio.sleep(0.01)
            pipe.send_text("/recall note-MARK\r")  # the hit quotes what the call printed
            while "narration before:" not in out.getvalue():
                await asyncio.sleep(0.01)
            pipe.send_text("/quit\r")
            assert await asyncio.wait_for(task, 20) == 0
        await wiring.close()
        return out.getvalue()

    text = asyncio.run(asyncio.wait_for(scenario(), 40))
    assert_clean(text, "desc-MARK", "bad name", "deny: bash:rm", "note-MARK", "note-END", "reply-MARK", "reply-END",
                 "result: note-MARK")  # /help, /permissions, !cat, the reply, a /recall hit


@PROPERTY
@example(bad=EVERY, output="text")
@example(bad=EVERY, output="jsonl")
@given(bad=hostile, output=st.sampled_from(["text", "jsonl"]))
def test_headless_writes_no_control_sequence_of_the_model_or_a_file(stub: Stub, project: Path, bad: str,
                                                                     output: str) -> None:
    plant(project, bad)
    stub.script(call(f"{NARRATE} {bad}", "bash", command="cat notes.txt"), say(f"reply-MARK {bad} reply-END"))
    wiring = stub.wire(project)
    out, err = io.StringIO(), io.StringIO()

    async def scenario() -> int:
        try:
            return await run_headless(wiring.agent, f"go {bad}", output, out, err)
        finally:
            await wiring.close()

    assert asyncio.run(scenario()) == 0
    assert_clean(out.getvalue() + err.getvalue(), "reply-MARK", "reply-END")
    if output == "jsonl":  # still JSON, and the words are whole in it
        events = [json.loads(line) for line in out.getvalue().splitlines()]
        said = "".join(e["text"] for e in events if e["event"] == "text_delta")
        assert f"reply-MARK {bad} reply-END" in said


def screen_text(app: RhapsodyApp) -> str:
    """Every character of the frame the app would write to the terminal, leaving out its own cursor moves."""
    update = app.screen._compositor.render_full_update()
    return "\n".join("".join(seg.text for strip in line for seg in strip if not seg.control)
                     for line in update.strips)


@settings(PROPERTY, max_examples=3)
@example(bad=EVERY)
@given(bad=hostile)
def test_the_app_draws_no_control_sequence_of_a_hostile_project(stub: Stub, project: Path, bad: str) -> None:
    from tests.conftest import until
    from tests.frontends.test_app_keys import idle, send

    plant(project, bad)
    stub.script(say(f"reply-MARK {bad} reply-END"))
    os.environ["EDITOR"] = shlex.quote(f"/nonexistent/editor-MARK {bad}")  # restored by the test's own env
    wiring = stub.wire(project, deny=[f"bash:rm {bad}"])
    app = RhapsodyApp(wiring.agent, wiring.settings)
    seen: list[str] = []
    shown: list[str] = []

    async def scenario() -> None:
        async with app.run_test(size=(160, 60), notifications=True) as pilot:
            for line in ("/help", "/permissions", "!cat notes.txt", "hello"):
                await send(pilot, line)
                await idle(pilot)
                seen.append(screen_text(app))
            await pilot.press("ctrl+g")  # the editor does not start: a toast names it
            await until(lambda: "editor-MARK" in screen_text(app), pause=pilot.pause)
            seen.append(screen_text(app))
            shown.extend(f"{e.text}\n{e.body}" for e in app.transcript.entries)  # what scrolled off the frame too
        await wiring.close()

    try:
        asyncio.run(asyncio.wait_for(scenario(), 50))
    finally:
        del os.environ["EDITOR"]
    assert_clean("\n".join(seen), "deny: bash:rm", "note-MARK", "reply-MARK", "editor-MARK")
    assert_clean("\n".join(shown), "desc-MARK", "bad name", "note-END", "reply-END")


def test_a_subcommand_prints_no_control_sequence_of_a_hostile_file(project: Path) -> None:
    bad = EVERY
    mcp = {"mcpServers": {f"srv{bad}": {"command": f"/nonexistent/{bad}"}}}
    (project / ".mcp.json").write_text(json.dumps(mcp), encoding="utf-8")
    history = project / f"h{bad.replace('/', '')}.jsonl"
    history.write_text(json.dumps({"kind": "note", "text": bad}) + "\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    shown = []
    for args in (["mcp", "list"], ["stats", str(history)], ["export", str(history), "--md", "-o", "-"]):
        ran = launch.run([*args, "--cwd", str(project)], env=env, timeout=60)
        assert "Traceback" not in ran.stderr
        shown.append(ran.stdout + ran.stderr)
    assert_clean("\n".join(shown), "srv", "not a rhapsody history file")

