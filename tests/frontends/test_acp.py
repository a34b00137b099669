"""`rhapsody acp` as an editor meets it: a real subprocess on stdio, driven by the SDK's own client side,
its model the loopback server (every request it got is checked)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.core import ClientSideConnection
from acp.schema import (AllowedOutcome, ClientCapabilities, DeniedOutcome, FileSystemCapabilities,
                        ReadTextFileResponse, RequestPermissionResponse, WriteTextFileResponse)

from rhapsody.loopback.script import call, say
from tests.conftest import GATE, MODEL, SANDBOX, Stub, until

NARRATE = "I will write the greeting file now because the task asks for it and nothing exists yet."


class Editor:
    """The client side: keeps every update, answers each permission question with the next answer given."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.answers: list[tuple[str, str]] = []
        """(option id, reason) per question to come; "cancel" answers the dialog as cancelled."""
        self.questions: list[Any] = []
        self.files: dict[str, str] = {}
        self.written: dict[str, str] = {}
        self.read: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> RequestPermissionResponse:
        self.questions.append((tool_call, options))
        option, reason = self.answers.pop(0) if self.answers else ("cancel", "")
        if option == "wait":  # the human has not picked yet
            await asyncio.Event().wait()
        if option == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        meta = {"reason": reason} if reason else None
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option, field_meta=meta))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
                             **kwargs: Any) -> ReadTextFileResponse:
        self.read.append(path)
        return ReadTextFileResponse(content=self.files.get(path, Path(path).read_text()))

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        self.written[path] = content
        return WriteTextFileResponse()

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]

    def text(self, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.updates if u.session_update == kind and hasattr(u.content, "text"))


def acp_env(stub: Stub) -> dict[str, str]:
    return {**os.environ, "ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": stub.server.url,
            "RHAPSODY_SANDBOX": SANDBOX}


@asynccontextmanager
async def rhapsody_acp(stub: Stub, project: Path, *flags: str,
                       fs: bool = False) -> AsyncIterator[tuple[ClientSideConnection, Editor, Any]]:
    """`rhapsody acp` started as an editor starts it, initialized."""
    editor = Editor()
    async with spawn_agent_process(editor, sys.executable, "-m", "rhapsody", "acp", "--model", MODEL, *flags,
                                   env=acp_env(stub), cwd=project) as (conn, process):
        caps = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=fs, write_text_file=fs))
        reply = await conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=caps)
        assert reply.agent_capabilities is not None and reply.agent_capabilities.load_session
        yield conn, editor, process


async def test_a_prompt_streams_narration_and_a_tool_call_with_title_kind_location_and_diff(
        stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "write_file", path="hello.txt", content="hi\n"), say("Wrote hello.txt."))
    async with rhapsody_acp(stub, project, "--permission-mode", "auto-edit") as (conn, editor, _):
        session = await conn.new_session(cwd=str(project))
        reply = await conn.prompt(session_id=session.session_id, prompt=[text_block("write hello.txt")])
    assert reply.stop_reason == "end_turn"
    assert (project / "hello.txt").read_text() == "hi\n"
    assert NARRATE in editor.text() and "Wrote hello.txt." in editor.text()
    start = next(u for u in editor.updates if u.session_update == "tool_call")
    assert start.title == "write_file hello.txt" and start.kind == "edit" and start.status == "pending"
    assert start.locations[0].path == str(project / "hello.txt")
    updates = [u for u in editor.updates if u.session_update == "tool_call_update" and u.tool_call_id == start.tool_call_id]
    assert [u.status for u in updates] == ["in_progress", "completed"]
    diff = updates[-1].content[0]
    assert diff.type == "diff" and diff.new_text == "hi\n" and diff.old_text is None
    assert "available_commands_update" in editor.kinds()


async def test_a_question_answered_both_ways_carries_the_denial_reason_to_the_model(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "write_file", path="hello.txt", content="hi\n"),
                call("I will write greeting.txt instead, since the human asked for that name in their denial.",
                     "write_file", path="greeting.txt", content="hi\n"),
                say("Wrote greeting.txt."))
    async with rhapsody_acp(stub, project, "--permission-mode", "ask") as (conn, editor, _):
        session = await conn.new_session(cwd=str(project))
        editor.answers = [("deny", "call it greeting.txt"), ("once", "")]
        reply = await conn.prompt(session_id=session.session_id, prompt=[text_block("write a greeting")])
    assert reply.stop_reason == "end_turn"
    assert not (project / "hello.txt").exists() and (project / "greeting.txt").read_text() == "hi\n"
    (first, options), (second, _) = editor.questions
    starts = [u for u in editor.updates if u.session_update == "tool_call"]
    assert [first.tool_call_id, second.tool_call_id] == [s.tool_call_id for s in starts]
    assert [o.kind for o in options][0] == "allow_once" and options[-1].kind == "reject_once"
    assert first.content[0].type == "diff" and first.content[0].new_text == "hi\n"  # the edit shown as it will happen
    finals = [u.status for u in editor.updates if u.session_update == "tool_call_update" and u.status != "in_progress"]
    assert finals == ["failed", "completed"]
    denied = stub.bodies()[1]["messages"][-1]["content"]
    assert denied[0]["type"] == "tool_result" and denied[0]["is_error"]
    assert any(b.get("type") == "text" and "call it greeting.txt" in b["text"] for b in denied)


async def test_a_prompt_sent_while_a_turn_runs_is_a_hint_for_its_next_tool_boundary(stub: Stub, project: Path) -> None:
    stub.script(call("I will wait for the go file so the test can act while this command runs.", "bash",
                     command=GATE),
                say("Saw the hint."))
    async with rhapsody_acp(stub, project, "--permission-mode", "auto-edit") as (conn, editor, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("wait for go")]))
        await until(lambda: "in_progress" in [getattr(u, "status", None) for u in editor.updates], within=30)
        hint = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("also count the files")]))
        await until(lambda: any(r["kind"] == "hint" for r in _records(project)), within=30)
        (project / "go").write_text("")
        assert (await turn).stop_reason == (await hint).stop_reason == "end_turn"
    with_hint = stub.bodies()[1]["messages"][-1]["content"]
    assert with_hint[0]["type"] == "tool_result" and "also count the files" in json.dumps(with_hint[1:])
    assert len(stub.bodies()) == 2  # the hint went into the running turn, not a turn of its own


async def test_cancel_stops_the_turn_as_esc_does(stub: Stub, project: Path) -> None:
    stub.script(call("I will sleep for a long while, as the task asks, before I answer anything.", "bash",
                     command="sleep 120"),
                say("After the cancel."))
    async with rhapsody_acp(stub, project, "--permission-mode", "auto-edit") as (conn, editor, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("sleep now")]))
        await until(lambda: "in_progress" in [getattr(u, "status", None) for u in editor.updates], within=30)
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(turn, 40)).stop_reason == "cancelled"
        assert "interrupted" in editor.text()
        again = await conn.prompt(session_id=sid, prompt=[text_block("go on")])
    assert again.stop_reason == "end_turn"
    last = stub.bodies()[-1]["messages"]
    answered = [b for m in last for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert "Interrupted by the human" in json.dumps(answered[-1])  # the cancelled call answered: a valid conversation


def _records(project: Path) -> list[dict[str, Any]]:
    folder = project / ".rhapsody" / "history"
    return [json.loads(line) for path in folder.glob("*.jsonl") for line in path.read_text().splitlines() if line]


async def test_handoff_replies_with_the_seams_figures_and_a_load_resumes_the_history(stub: Stub, project: Path) -> None:
    from tests.core.session.test_handoff_e2e import handoff_turn

    stub.script(call("I will list the project files first to see what the project holds.", "bash", command="ls"),
                say("Listed."), handoff_turn(), say("Noted."), say("Resumed and answering."))
    async with rhapsody_acp(stub, project, "--permission-mode", "auto-edit") as (conn, editor, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("list the files")])
        names = [c.name for u in editor.updates if u.session_update == "available_commands_update"
                 for c in u.available_commands]
        assert "handoff" in names and "quit" not in names
        editor.answers = [("yes", "")]
        reply = await conn.prompt(session_id=sid, prompt=[text_block("/handoff")])
    assert reply.stop_reason == "end_turn"
    (asked, options), = editor.questions  # a seam this small would not pay: its figures, and a yes/no
    assert asked.title == "hand off anyway?" and "would not pay" in asked.content[0].content.text
    assert [o.option_id for o in options] == ["yes", "no"]
    assert "seam 1: context ~" in editor.text() and "tool calls 2 → 1" in editor.text()
    async with rhapsody_acp(stub, project) as (conn, editor, _):
        listed = await conn.list_sessions(cwd=str(project))
        assert [(s.session_id, s.title) for s in listed.sessions] == [(sid, "list the files")]
        loaded = await conn.load_session(cwd=str(project), session_id=sid)
        replay = list(editor.updates)
        assert loaded.modes is not None and len(loaded.modes.available_modes) == 5
        await conn.set_session_mode(session_id=sid, mode_id="read-only")
        with pytest.raises(RequestError):
            await conn.set_session_mode(session_id=sid, mode_id="sideways")
        reply = await conn.prompt(session_id=sid, prompt=[text_block("and now?")])
    assert "list the files" in "".join(u.content.text for u in replay if u.session_update == "user_message_chunk")
    assert [u.title for u in replay if u.session_update == "tool_call"][0] == "bash ls"
    assert "Listed." in "".join(u.content.text for u in replay if u.session_update == "agent_message_chunk")
    assert reply.stop_reason == "end_turn"
    resumed = json.dumps(stub.bodies()[-1]["messages"])
    assert "list the files" in resumed and "and now?" in resumed
    assert [r["mode"] for r in _records(project) if r["kind"] == "permission_mode"][-1] == "read-only"


async def test_bad_input_gets_json_rpc_errors_and_stdout_holds_only_the_protocol(stub: Stub, project: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rhapsody", "acp", "--model", MODEL, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=acp_env(stub), cwd=project)
    lines = [b"this is not json\n", b"[1, 2]\n",
             b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}\n',
             b'{"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "nope", "prompt": []}}\n',
             b'{"jsonrpc": "2.0", "id": 3, "method": "session/load", "params": {"sessionId": "nope", "cwd": "%s", '
             b'"mcpServers": []}}\n' % str(project).encode(),
             b'{"jsonrpc": "2.0", "id": 4, "method": "no/such/method", "params": {}}\n',
             b'{"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": {"cwd": "relative", "mcpServers": []}}\n']
    out, err = await asyncio.wait_for(proc.communicate(b"".join(lines)), 60)
    replies = [json.loads(line) for line in out.decode().splitlines()]  # every line on stdout is a message
    errors = {r.get("id"): r["error"]["code"] for r in replies if "error" in r}
    assert [r["error"]["code"] for r in replies if r.get("id") is None] == [-32700, -32600]
    assert next(r for r in replies if r.get("id") == 1)["result"]["agentCapabilities"]["loadSession"] is True
    assert errors[2] == -32602 and errors[3] == -32002 and errors[4] == -32601 and errors[5] == -32602
    assert "Traceback" not in out.decode() + err.decode()
    assert proc.returncode == 0


async def test_files_go_through_the_clients_filesystem_when_it_offers_one(stub: Stub, project: Path) -> None:
    (project.parent / "outside.txt").write_text("not the project's\n")
    stub.script(call("I will read app.py first to see what the add function does right now.", "read_file",
                     path="app.py"),
                call(NARRATE, "write_file", path="hello.txt", content="hi\n"),
                call("I will try the file beside the project, which the confinement should refuse me.", "write_file",
                     path="../outside.txt", content="overwritten\n"),
                say("Done."))
    async with rhapsody_acp(stub, project, "--permission-mode", "auto-edit", fs=True) as (conn, editor, _):
        editor.files[str(project / "app.py")] = "def add(a, b):\n    return a + b  # unsaved in the editor\n"
        sid = (await conn.new_session(cwd=str(project))).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("read app.py, then write hello.txt")])
    read = stub.bodies()[1]["messages"][-1]["content"][0]
    assert "unsaved in the editor" in json.dumps(read)
    assert editor.written == {str(project / "hello.txt"): "hi\n"}
    assert not (project / "hello.txt").exists()  # the client wrote it (into its buffer), not rhapsody
    refused = stub.bodies()[3]["messages"][-1]["content"][0]
    assert refused["is_error"] and editor.read == [str(project / "app.py")]  # confined before the client is asked
    assert (project.parent / "outside.txt").read_text() == "not the project's\n"


async def test_a_cancel_while_a_question_is_open_drops_it_and_ends_the_turn_cancelled(stub: Stub, project: Path) -> None:
    stub.script(call(NARRATE, "write_file", path="hello.txt", content="hi\n"), say("After the cancel."))
    async with rhapsody_acp(stub, project, "--permission-mode", "ask") as (conn, editor, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        editor.answers = [("wait", "")]
        turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[text_block("write hello.txt")]))
        await until(lambda: bool(editor.questions), within=30)
        await conn.cancel(session_id=sid)
        assert (await asyncio.wait_for(turn, 20)).stop_reason == "cancelled"
        again = await conn.prompt(session_id=sid, prompt=[text_block("go on")])
    assert again.stop_reason == "end_turn" and not (project / "hello.txt").exists()
    answered = [b for m in stub.bodies()[-1]["messages"] for b in m["content"]
                if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert "Interrupted by the human" in json.dumps(answered[-1])


async def test_a_bang_command_runs_in_the_sandbox_and_reaches_the_model_with_the_next_prompt(
        stub: Stub, project: Path) -> None:
    stub.script(say("I see the listing."))
    async with rhapsody_acp(stub, project, "--permission-mode", "auto-edit") as (conn, editor, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        ran = await conn.prompt(session_id=sid, prompt=[text_block("!ls")])
        assert ran.stop_reason == "end_turn" and "app.py" in editor.text() and not stub.bodies()
        await conn.prompt(session_id=sid, prompt=[text_block("what did I see?")])
    assert "I ran `ls` myself" in json.dumps(stub.bodies()[0]["messages"][-1])


async def test_an_untrusted_projects_config_is_cut_down_and_the_editor_is_told(stub: Stub, project: Path) -> None:
    (project / ".rhapsody").mkdir()
    (project / ".rhapsody" / "config.toml").write_text('permission_mode = "yolo"\nallow = ["bash:*"]\n')
    async with rhapsody_acp(stub, project) as (conn, editor, _):
        session = await conn.new_session(cwd=str(project))
        await until(lambda: "rhapsody trust" in editor.text(), within=30)
    assert session.modes is not None and session.modes.current_mode_id == "ask"  # the project may not raise it
    assert "permission_mode" in editor.text()


async def test_a_plan_is_asked_as_a_permission_and_its_approval_switches_the_session_mode(
        stub: Stub, project: Path) -> None:
    stub.script(call("I will propose the plan now, since plan mode asks for it before any change.", "exit_plan",
                     plan="1. fix add"),
                call("I will propose a revised plan with tests first, as the human asked in the rejection.",
                     "exit_plan", plan="1. test add\n2. fix add"),
                say("Plan approved; starting."))
    async with rhapsody_acp(stub, project, "--permission-mode", "plan") as (conn, editor, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        editor.answers = [("reject", "write the test first"), ("auto-edit", "")]
        await conn.prompt(session_id=sid, prompt=[text_block("fix add")])
    (first, options), (second, _) = editor.questions
    assert [o.option_id for o in options] == ["auto-edit", "ask", "reject"] and first.kind == "switch_mode"
    assert "1. fix add" in first.content[0].content.text and "2. fix add" in second.content[0].content.text
    assert "write the test first" in json.dumps(stub.bodies()[1]["messages"][-1])
    assert [u.current_mode_id for u in editor.updates if u.session_update == "current_mode_update"] == ["auto-edit"]
    assert [r["mode"] for r in _records(project) if r["kind"] == "permission_mode"][-1] == "auto-edit"


async def test_slash_rewind_over_acp_is_the_op_and_refuses_to_overwrite_outside_changes_unforced(
        stub: Stub, project: Path) -> None:
    stub.script(call("I will write notes.txt with one line, expecting it to be created.", "write_file",
                     path="notes.txt", content="one\n"), say("Written."))
    async with rhapsody_acp(stub, project, "--permission-mode", "auto-edit") as (conn, editor, _):
        sid = (await conn.new_session(cwd=str(project))).session_id
        await conn.prompt(session_id=sid, prompt=[text_block("write the notes")])
        assert (project / "notes.txt").read_text() == "one\n"
        (project / "notes.txt").write_text("mine\n")  # the person's own edit in the editor, after the turn
        await conn.prompt(session_id=sid, prompt=[text_block("/rewind 1 files")])
        await until(lambda: "/rewind 1 files force overwrites them" in editor.text(), within=30)
        assert "notes.txt" in editor.text() and (project / "notes.txt").read_text() == "mine\n"
        await conn.prompt(session_id=sid, prompt=[text_block("/rewind 1 files force")])
        await until(lambda: "files restored" in editor.text(), within=30)
    assert not (project / "notes.txt").exists()
