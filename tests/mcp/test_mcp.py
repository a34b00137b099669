"""MCP servers as tools: a real PyPI server over stdio, an SDK-built one over streamable HTTP."""

from __future__ import annotations

from rhapsody.core.session.records import dump
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rhapsody.cli import main
from rhapsody.commands.slash import run_command
from rhapsody.core.events import Notice, NarrationViolation, SeamCommitted, ToolFinished
from rhapsody.core.session.recall import fetch
from rhapsody.loopback.script import call, say
from rhapsody.tools.handoff import recall_text

from tests.conftest import Stub, collect, until, waited
from tests.core.session.test_handoff_e2e import handoff_turn

HERE = Path(__file__).parent
TIME_TOOLS = ["mcp__time__convert_time", "mcp__time__get_current_time"]


def user_config(text: str) -> None:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "rhapsody" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def time_server(mark: str, name: str = "time", **extra: str) -> str:
    lines = [f"[mcp_servers.{name}]", f"command = {json.dumps(sys.executable)}",
             'args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]',
             f'env = {{ RHAPSODY_TEST_MARK = "{mark}" }}']
    return "\n".join(lines + [f"{k} = {v}" for k, v in extra.items()]) + "\n"


def marked_pids(mark: str) -> list[int]:
    """Processes whose environment carries `mark`: the stdio servers a test started."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and f"RHAPSODY_TEST_MARK={mark}".encode() in (entry / "environ").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.fixture
def mark() -> str:
    return uuid.uuid4().hex


@pytest.fixture
def notes_url() -> Iterator[str]:
    """The SDK-built notes server on a free loopback port, for the length of one test."""
    with socket.socket() as s:  # bound here and held by the server: no other process can take the port between
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = subprocess.Popen([sys.executable, str(HERE / "servers" / "mcp_http_notes.py"), str(s.fileno())],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=[s.fileno()])
    waited(lambda: _listening(port), within=15)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


def tool_uses(body: dict[str, Any]) -> list[str]:
    return [b["name"] for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]
            if b.get("type") == "tool_use"]


def results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


async def test_stdio_server_tools_run_through_the_loop_then_a_seam_strips_them_and_recall_brings_one_back(
        stub: Stub, project: Path, mark: str) -> None:
    user_config(time_server(mark))
    stub.script(
        call("I will ask the time server for the current time in Paris, expecting an ISO datetime.",
             "mcp__time__get_current_time", timezone="Europe/Paris"),
        call("Now a zone that does not exist, to see how the server reports an error back.",
             "mcp__time__get_current_time", timezone="Nowhere/Atlantis"),
        say("Paris time read; the bogus zone was refused."),
        handoff_turn(), say("Note written."),
        call("The seam took the Paris result out of my context; I will search for it instead of asking again.",
             "recall", query="Paris"),
    )
    scripted = stub.responder

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if scripted.played < len(scripted.turns):
            return scripted(body)
        last = body["messages"][-1]["content"][0]
        if tool_uses(body)[-1:] == ["recall"] and "id" in body["messages"][-2]["content"][-1]["input"]:
            return say("Recalled in full: Paris is on CET.")
        recall_id = last["content"].split()[0]  # the first hit's id, as the model would read it
        return call("The first hit is the Paris call; I will fetch it whole by its recall id.", "recall", id=recall_id)

    stub.responder = respond  # type: ignore[assignment]
    wiring = stub.wire(project)
    try:
        events = await collect(wiring.agent.run("what time is it in Paris?"))
        finished = [e for e in events if isinstance(e, ToolFinished)]
        assert [e.is_error for e in finished] == [False, True]
        assert '"timezone": "Europe/Paris"' in finished[0].output and "Nowhere/Atlantis" in finished[1].output
        wiring.agent.request_handoff()
        seams = [e for e in await collect(wiring.agent.run()) if isinstance(e, SeamCommitted)]
        await collect(wiring.agent.run("what do you remember?"))
    finally:
        await wiring.close()
    bodies = stub.bodies()
    names = [t["name"] for t in bodies[0]["tools"]]
    assert names[-2:] == TIME_TOOLS and names.index("micro_handoff") < names.index(TIME_TOOLS[0])
    current = next(t for t in bodies[0]["tools"] if t["name"] == TIME_TOOLS[1])
    assert current["description"] == "Get current time in a specific timezone"
    assert current["input_schema"]["required"] == ["timezone"]
    assert all(json.dumps(b["tools"]) == json.dumps(bodies[0]["tools"]) for b in bodies)
    assert results(bodies[2])[0]["is_error"] is True
    assert len(seams) == 1 and dump(seams[0].record)["before"]["tool_use"] == 3
    assert tool_uses(bodies[-3]) == ["micro_handoff"]
    found = results(bodies[-2])[0]["content"]
    assert found.startswith(f"{wiring.session.id}:toolu_") and "(mcp__time__get_current_time" in found
    fetched = results(bodies[-1])[0]["content"]
    assert '"timezone": "Europe/Paris"' in fetched and "day_of_week" in fetched
    index = bodies[4]["messages"][-1]["content"][0]["content"]
    assert "mcp__time__get_current_time" in index
    found = recall_text(project, wiring.session, "Paris", all_sessions=False)
    full = fetch(project, found.split()[0])
    assert full is not None and "Europe/Paris" in full and "day_of_week" in full
    assert marked_pids(mark) == []


async def test_http_server_image_and_resource_results_map_to_content_blocks_and_errors_to_is_error(
        stub: Stub, project: Path, notes_url: str) -> None:
    user_config(f'[mcp_servers.notes]\nurl = "{notes_url}"\n'
                'headers = { "Authorization" = "Bearer not-a-real-token-42" }\ndisabled_tools = ["wait"]\n')
    stub.script(
        call("I will pin a note that quotes the token, to see whether it leaks back to me.", "mcp__notes__add_note",
             text="the token is not-a-real-token-42"),
        call("I will take a snapshot of the notes board to see what is on it right now.", "mcp__notes__snapshot"),
        call("And the tool that is known to fail, so its error reaches me as an error result.", "mcp__notes__explode"),
        say("Board seen, fire reported."),
    )
    wiring = stub.wire(project)
    try:
        await collect(wiring.agent.run("look at the board"))
        status = run_command(wiring.agent, "/mcp").text
    finally:
        await wiring.close()
    bodies = stub.bodies()
    names = ["mcp__notes__add_note", "mcp__notes__explode", "mcp__notes__snapshot"]
    assert [t["name"] for t in bodies[0]["tools"] if t["name"].startswith("mcp__")] == names
    assert results(bodies[1])[0]["content"] == "stored note 1: the token is [masked secret]"
    snapshot = results(bodies[2])[0]["content"]
    assert [b["type"] for b in snapshot] == ["text", "image", "text"]
    assert snapshot[1]["source"]["media_type"] == "image/png"
    assert snapshot[2]["text"] == "[resource notes://board]\nthe token is [masked secret]"
    failure = results(bodies[3])[0]
    assert failure["is_error"] is True and "the board is on fire" in failure["content"]
    assert status.startswith("notes: ready") and "3 tools, " in status and ": " + ", ".join(names) in status


async def test_mcp_tool_needs_narration_and_asks_in_auto_edit_so_headless_refuses_it_unless_a_rule_allows_it(
        stub: Stub, project: Path, mark: str) -> None:
    user_config(time_server(mark))
    narrated = call("I will ask the time server for the time in UTC, expecting an ISO datetime back.",
                    "mcp__time__get_current_time", timezone="UTC")
    unnarrated = {"content": [{"type": "tool_use", "name": "mcp__time__get_current_time", "input": {"timezone": "UTC"}}]}
    stub.script(unnarrated, say("sorry"), narrated, say("refused"), narrated, say("ran"))
    refused = stub.wire(project, permission_mode="auto-edit")
    try:
        silent = await collect(refused.agent.run("time?"))
        first = [e for e in await collect(refused.agent.run("time?")) if isinstance(e, ToolFinished)]
    finally:
        await refused.close()
    allowed = stub.wire(project, permission_mode="auto-edit", allow=["mcp__time"])
    try:
        second = [e for e in await collect(allowed.agent.run("time?")) if isinstance(e, ToolFinished)]
    finally:
        await allowed.close()
    assert any(isinstance(e, NarrationViolation) for e in silent) and not any(isinstance(e, ToolFinished) for e in silent)
    assert first[0].is_error and "calling MCP tools" in first[0].output
    assert not second[0].is_error and '"timezone": "UTC"' in second[0].output


async def test_project_servers_wait_for_trust_and_start_once_the_user_config_trusts_the_project(
        stub: Stub, project: Path, mark: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"clock": {
        "command": sys.executable, "args": ["-m", "mcp_server_time"], "env": {"RHAPSODY_TEST_MARK": "${MARK}"}}}}))
    monkeypatch.setenv("MARK", mark)
    stub.script(say("no tools from the project yet"), say("now with the clock"))
    untrusted = stub.wire(project)
    events = await collect(untrusted.agent.run("hi"))
    await untrusted.close()
    assert main(["trust", str(project)]) == 0
    trusted = stub.wire(project)
    try:
        await collect(trusted.agent.run("hi"))
        seen = marked_pids(mark)
    finally:
        await trusted.close()
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices == ["MCP server clock from this project waits for trust: not started (trust the project to start it)"]
    first, second = stub.bodies()
    assert not any(t["name"].startswith("mcp__") for t in first["tools"])
    assert [t["name"] for t in second["tools"] if t["name"].startswith("mcp__")] == [
        "mcp__clock__convert_time", "mcp__clock__get_current_time"]
    assert seen and marked_pids(mark) == []


async def test_a_server_that_fails_to_start_or_dies_is_a_notice_and_an_error_result_never_a_crash(
        stub: Stub, project: Path, mark: str) -> None:
    user_config(time_server(mark) + '[mcp_servers.broken]\ncommand = "/nonexistent/mcp-server"\n'
                + '[mcp_servers.slow]\ncommand = "sleep"\nargs = ["30"]\nstartup_timeout_sec = 0.5\n')
    narrated = call("I will ask the time server for the time in UTC, expecting an ISO datetime back.",
                    "mcp__time__get_current_time", timezone="UTC")
    stub.script(narrated, say("ran"), narrated, say("the server is gone"))
    wiring = stub.wire(project)
    try:
        first = await collect(wiring.agent.run("time?"))
        for pid in marked_pids(mark):
            os.kill(pid, signal.SIGKILL)
        second = await collect(wiring.agent.run("again?"))
        status = run_command(wiring.agent, "/mcp").text
    finally:
        await wiring.close()
    notices = [e.text for e in first if isinstance(e, Notice)]
    assert any(n.startswith("MCP server broken failed to start: FileNotFoundError") for n in notices)
    assert "MCP server slow failed to start: did not start within 0.5 s" in notices
    died = [e for e in second if isinstance(e, ToolFinished)][0]
    assert died.is_error and "MCP server time stopped answering" in died.output
    assert "broken: failed" in status and "slow: failed" in status and "time: exited" in status


def test_mcp_list_starts_lists_and_stops_servers_from_the_shell(
        project: Path, mark: str, capsys: pytest.CaptureFixture[str]) -> None:
    noisy = "print('a stray line on stdout'); import runpy; runpy.run_module('mcp_server_time', run_name='__main__')"
    user_config(time_server(mark, enabled_tools='["get_current_time"]')
                + f'[mcp_servers.noisy]\ncommand = {json.dumps(sys.executable)}\nargs = ["-c", {json.dumps(noisy)}]\n')
    assert main(["mcp", "list", "--cwd", str(project)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("noisy: ready") and "time: ready" in out and ": mcp__time__get_current_time" in out
    assert err == ""  # the SDK's complaint about the stray line stays off the terminal
    size = int(out.split("time: ready")[1].split(" tool, ")[1].split(" bytes")[0].replace(",", ""))
    assert 300 < size < 1000
    assert marked_pids(mark) == []


async def test_app_shows_servers_waiting_for_trust_at_once_and_lists_them_with_slash_mcp(
        stub: Stub, project: Path, mark: str) -> None:
    from rhapsody.frontends.app.app import RhapsodyApp
    from rhapsody.frontends.app.widgets import PromptInput

    user_config(time_server(mark))
    (project / ".rhapsody").mkdir()
    (project / ".rhapsody" / "config.toml").write_text('[mcp_servers.git]\ncommand = "mcp-server-git"\n')
    wiring = stub.wire(project)
    app = RhapsodyApp(wiring.agent, wiring.settings)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            texts = [e.text for e in app.transcript.entries]
            assert "! MCP server git from this project waits for trust: not started (trust the project to start it)" in texts
            app.query_one(PromptInput).text = "/mcp"
            await pilot.press("enter")
            deadline = time.monotonic() + 15
            while not any("time: ready" in e.text for e in app.transcript.entries) and time.monotonic() < deadline:
                app.query_one(PromptInput).text = "/mcp"
                await pilot.press("enter")
                await pilot.pause(0.1)
            listing = [e.text for e in app.transcript.entries if e.text.startswith("time:")][-1]
            assert "git: waiting for trust (from this project)" in listing and "mcp__time__get_current_time" in listing
    finally:
        await wiring.close()
    assert marked_pids(mark) == []


async def test_a_broken_mcp_json_is_a_notice_not_a_stop(stub: Stub, project: Path) -> None:
    (project / ".mcp.json").write_text('{"mcpServers": {"old": {"type": "sse", "url": "http://127.0.0.1:9/sse"}}}')
    stub.script(say("still here"))
    wiring = stub.wire(project)
    try:
        events = await collect(wiring.agent.run("hi"))
    finally:
        await wiring.close()
    assert [e.text for e in events if isinstance(e, Notice)] == [
        f"ignored {project / '.mcp.json'}: MCP server 'old': the SSE transport is not supported; use streamable HTTP"]


def test_a_malformed_server_entry_in_the_settings_is_one_line_and_exit_2(project: Path) -> None:
    from tests.test_cli import one_line_error, rhapsody

    user_config('[mcp_servers.both]\ncommand = "x"\nurl = "http://127.0.0.1:9/mcp"\n')
    line = one_line_error(rhapsody("-p", "hi", "--cwd", str(project), env={"ANTHROPIC_API_KEY": "k"}))
    assert "mcp_servers.both" in line and "either command" in line


async def test_a_server_ready_before_its_deadline_stays_ready_when_the_first_turn_comes_later(
        stub: Stub, project: Path, mark: str) -> None:
    user_config(time_server(mark))
    stub.script(call("I will ask the time server for the time in UTC, expecting an ISO datetime back.",
                     "mcp__time__get_current_time", timezone="UTC"), say("ran"))
    wiring = stub.wire(project)
    try:
        wiring.agent.toolbox.start_sources()
        source = wiring.agent.toolbox.sources[0]
        await until(lambda: "time: ready" in source.status()[0], within=15)
        source._started_at -= 10  # type: ignore[attr-defined]  # the startup deadline passed while the app sat idle
        events = await collect(wiring.agent.run("time?"))
    finally:
        await wiring.close()
    assert not [e for e in events if isinstance(e, Notice)]
    assert [e.is_error for e in events if isinstance(e, ToolFinished)] == [False]


async def test_a_slow_tool_times_out_and_an_interrupted_call_leaves_the_server_usable(
        stub: Stub, project: Path, notes_url: str) -> None:
    import asyncio
    from contextlib import aclosing

    from rhapsody.core.events import ToolStarted

    user_config(f'[mcp_servers.hasty]\nurl = "{notes_url}"\ntool_timeout_sec = 0.5\n'
                f'[mcp_servers.notes]\nurl = "{notes_url}"\n')
    hasty = call("I will wait on the board for a while, expecting it to take longer than allowed.",
                 "mcp__hasty__wait", seconds=5)
    slow = call("I will wait on the board for a while; the human may well interrupt me.",
                "mcp__notes__wait", seconds=5)
    note = call("I will add a note to the board, expecting it to be stored as note one.",
                "mcp__notes__add_note", text="remember the milk")
    stub.script(hasty, say("timed out"), slow, note, say("stored"))
    wiring = stub.wire(project)
    try:
        first = [e for e in await collect(wiring.agent.run("wait")) if isinstance(e, ToolFinished)]

        started = asyncio.Event()

        async def turn() -> None:
            async with aclosing(wiring.agent.run("wait again")) as events:
                async for event in events:
                    if isinstance(event, ToolStarted):
                        started.set()

        task = asyncio.create_task(turn())
        await asyncio.wait_for(started.wait(), 10)
        done, _ = await asyncio.wait([task], timeout=0.2)  # inside the 5 s call: interrupt it, as Esc does
        assert not done
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        last = [e for e in await collect(wiring.agent.run("add a note")) if isinstance(e, ToolFinished)]
    finally:
        await wiring.close()
    assert first[0].is_error and "did not answer within 0.5 s" in first[0].output
    assert not last[0].is_error and "stored note 1: remember the milk" in last[0].output


async def test_a_handshake_era_server_written_by_hand_works_through_the_fallback(stub: Stub, project: Path) -> None:
    user_config(f'[mcp_servers.legacy]\ncommand = {json.dumps(sys.executable)}\n'
                f'args = [{json.dumps(str(HERE / "servers" / "legacy_stdio.py"))}]\n')
    stub.script(call("I will ask the legacy server to shout a word, expecting it back in capitals.",
                     "mcp__legacy__shout", word="hello"), say("It shouted."))
    wiring = stub.wire(project)
    try:
        events = await collect(wiring.agent.run("shout"))
    finally:
        await wiring.close()
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert not finished[0].is_error and finished[0].output == "HELLO"
    assert [t["name"] for t in stub.bodies()[0]["tools"] if t["name"].startswith("mcp__")] == ["mcp__legacy__shout"]


def test_mcp_rules_name_a_whole_server_or_one_tool_and_deny_wins() -> None:
    from rhapsody.core.access.permissions import Call, Rules, decide_call
    from rhapsody.core.toolbox.rule_suggestions import session_rules

    tool, args = "mcp__git__git_commit", '{"message":"wip"}'
    assert decide_call("auto-edit", Rules(), Call(tool, args, True, False)).verdict == "ask"
    assert decide_call("read-only", Rules(allow=[]), Call(tool, args, True, False)).verdict == "deny"
    assert decide_call("auto-edit", Rules(allow=["mcp__git"]), Call(tool, args, True, False)).verdict == "allow"
    assert decide_call("auto-edit", Rules(allow=["mcp__gi"]), Call(tool, args, True, False)).verdict == "ask"
    assert decide_call("auto-edit", Rules(allow=["mcp__git__git_status"]), Call(tool, args, True, False)).verdict == "ask"
    assert decide_call("yolo", Rules(allow=["mcp__git"], deny=["mcp__git__git_commit"]), Call(tool, args, True, False)).verdict == "deny"
    assert decide_call("auto-edit", Rules(allow=['mcp__git__git_commit:*"wip"*']), Call(tool, args, True, False)).verdict == "allow"
    assert session_rules("auto-edit", Rules(), Call(tool, args, True, False, (args,))) == (tool,)


async def test_a_server_removed_from_the_config_answers_its_old_tools_as_unavailable_and_keeps_them_offered(
        stub: Stub, project: Path) -> None:
    gone = {"name": "mcp__gone__echo", "description": "Echo.", "input_schema": {"type": "object", "properties": {}}}
    wiring = stub.wire(project)
    session = wiring.agent.session
    session.set_tools(wiring.agent.toolbox.specs() + [gone])  # what a resumed history offered
    stub.script(call("I will echo through the old server to see whether it still answers my call.",
                     "mcp__gone__echo"), say("It is gone."))
    events = await collect(wiring.agent.run("echo"))
    finished = next(e for e in events if isinstance(e, ToolFinished))
    assert finished.is_error and "'gone' is not running" in finished.output and "Unknown tool" not in finished.output
    assert all(body["tools"][-1] == gone for body in stub.bodies())


def test_headless_names_project_servers_waiting_for_trust_in_one_line(stub: Stub, project: Path) -> None:
    from tests.conftest import MODEL
    from tests.test_cli import rhapsody

    (project / ".rhapsody").mkdir(exist_ok=True)
    (project / ".rhapsody" / "config.toml").write_text(time_server("unused", name="clock"), encoding="utf-8")
    stub.script(say("ok"))
    env = {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url}
    result = rhapsody("-p", "hi", "--cwd", str(project), "--model", MODEL, env=env)
    lines = [line for line in (result.stdout + result.stderr).splitlines() if "mcp" in line.lower() or "clock" in line]
    assert result.returncode == 0 and len(lines) == 1 and "clock" in lines[0] and "waits for trust" in lines[0]


@pytest.mark.skipif(shutil.which("setsid") is None, reason="util-linux's setsid is not installed")
def test_a_server_that_ignores_the_end_leaves_nothing_it_moved_out_of_its_group(
        project: Path, mark: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The SDK ends a stdio server by closing its input, then SIGTERM to its group, then SIGKILL to the group
    2 s later, which would leave what the server moved out of the group alive: the supervisor kills it first."""
    sleeper = f"setsid -f {sys.executable} -c 'import time; time.sleep(60)'"
    server = f"trap '' TERM; {sleeper}; {sys.executable} -m mcp_server_time --local-timezone UTC; sleep 30"
    user_config(f'[mcp_servers.stubborn]\ncommand = "sh"\nargs = ["-c", {json.dumps(server)}]\n'
                f'env = {{ RHAPSODY_TEST_MARK = "{mark}" }}\n')
    try:
        assert main(["mcp", "list", "--cwd", str(project)]) == 0
        assert "stubborn: ready" in capsys.readouterr().out
        assert waited(lambda: marked_pids(mark) == [], 10), "what the server moved out of its group outlived it"
    finally:
        for pid in marked_pids(mark):
            os.kill(pid, signal.SIGKILL)
