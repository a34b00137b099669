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

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any],
                                 **kwargs: Any) -> RequestPermissionResponse:
        self.questions.append((tool_call, options))
        option, reason = self.answers.pop(0) if self.answers else ("cancel", "")
        if option == "cancel":
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        meta = {"reason": reason} if reason else None
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option, field_meta=meta))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
                             **kwargs: Any) -> ReadTextFileResponse:
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
