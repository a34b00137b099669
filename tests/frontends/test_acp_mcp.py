"""The MCP servers an editor passes with `session/new`: started for that session as the user's own are, their
tools offered to the model, and a transport rhapsody does not speak named instead of started."""

from __future__ import annotations

import sys
from pathlib import Path

from acp import text_block
from acp.schema import EnvVariable, McpServerStdio, SseMcpServer

from rhapsody.loopback.script import call, say
from tests.conftest import Stub, until
from tests.frontends.test_acp import rhapsody_acp
from tests.mcp.test_mcp import TIME_TOOLS, mark, marked_pids  # noqa: F401 (mark: the fixture)


async def test_the_editors_stdio_server_starts_its_tools_reach_the_model_and_an_sse_one_is_named(
        stub: Stub, project: Path, mark: str) -> None:
    clock = McpServerStdio(name="time", command=sys.executable,
                           args=["-m", "mcp_server_time", "--local-timezone", "UTC"],
                           env=[EnvVariable(name="RHAPSODY_TEST_MARK", value=mark)])
    feed = SseMcpServer(type="sse", name="feed", url="http://127.0.0.1:9/sse", headers=[])
    stub.script(call("I will ask the editor's time server for the time in UTC, expecting an ISO datetime.",
                     "mcp__time__get_current_time", timezone="UTC"),
                say("It is UTC time now."))
    async with rhapsody_acp(stub, project, "--permission-mode", "ask") as (conn, editor, _):
        session = await conn.new_session(cwd=str(project), mcp_servers=[clock, feed])
        await until(lambda: "MCP server feed not started" in editor.text(), within=30)
        editor.answers = [("once", "")]
        reply = await conn.prompt(session_id=session.session_id, prompt=[text_block("what time is it?")])
        assert marked_pids(mark)  # the editor's server runs while its session does
    assert reply.stop_reason == "end_turn"
    first, second = stub.bodies()
    assert [t["name"] for t in first["tools"] if t["name"].startswith("mcp__")] == TIME_TOOLS
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and not result.get("is_error") and '"timezone": "UTC"' in str(result)
    assert "SSE" in editor.text() and not any("feed" in t["name"] for t in first["tools"])
    await until(lambda: not marked_pids(mark), within=30)  # and stops with it
