"""Claude on Vertex AI through the SDK's own AsyncAnthropicVertex client, against the loopback server."""

from __future__ import annotations

from pathlib import Path

from rhapsody.providers.anthropic import AnthropicModel, vertex_client
from rhapsody.config.settings import Settings
from rhapsody.core.events import ToolFinished
from rhapsody.loopback.script import call, say
from rhapsody.wiring import build

from tests.conftest import SANDBOX, Stub, collect

VERTEX_MODEL = "claude-sonnet-4-5@20250929"


async def test_vertex_client_streams_a_narrated_tool_call_through_the_loop(stub: Stub, project: Path) -> None:
    stub.script(call("I will list the project files to find the module under test, expecting app.py.", "bash",
                     command="ls"), say("There is app.py."))
    client = vertex_client("my-project", "us-east5", 5.0, access_token="ya29.test-token", base_url=stub.server.url)
    model = AnthropicModel(client, retries=0)
    wiring = build(project, Settings(provider="vertex", model=VERTEX_MODEL, permission_mode="yolo", sandbox=SANDBOX), model, VERTEX_MODEL)
    events = await collect(wiring.agent.run("what files are there?"))
    assert [e.is_error for e in events if isinstance(e, ToolFinished)] == [False]
    first, second = stub.server.requests
    assert first.path.startswith("/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5")
    assert first.path.endswith(":streamRawPredict") and first.headers["authorization"] == "Bearer ya29.test-token"
    assert "anthropic_version" in first.body and second.body["model"] == VERTEX_MODEL
    assert second.body["messages"][-1]["content"][0]["type"] == "tool_result"


def test_each_sdk_has_exactly_one_importer() -> None:
    import ast

    src = Path(__file__).parents[2] / "src" / "rhapsody"
    importers: dict[str, set[str]] = {"mcp": set(), "mcp_types": set(), "openai": set(), "anthropic": set()}
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            for name in names:
                top = name.split(".")[0]
                if top in importers:
                    importers[top].add(str(path.relative_to(src)))
    assert importers == {"mcp": {"mcp/tools.py"}, "mcp_types": set(), "openai": {"providers/openai.py"},
                         "anthropic": {"providers/anthropic.py"}}


async def test_bedrock_client_streams_event_stream_frames_through_the_loop(stub: Stub, project: Path) -> None:
    from rhapsody.providers.anthropic import bedrock_client

    bedrock_model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    stub.script(call("I will list the project files to find the module under test, expecting app.py.", "bash",
                     command="ls"), say("There is app.py."))
    client = bedrock_client("us-east-1", 5.0, api_key="bedrock-test-key", base_url=stub.server.url)
    model = AnthropicModel(client, retries=0)
    wiring = build(project, Settings(provider="bedrock", model=bedrock_model, permission_mode="yolo", sandbox=SANDBOX), model,
                   bedrock_model)
    events = await collect(wiring.agent.run("what files are there?"))
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [e.is_error for e in finished] == [False] and "app.py" in finished[0].output
    first, second = stub.server.requests
    assert first.path.startswith("/model/us.anthropic.claude-sonnet-4-5-20250929-v1")
    assert first.path.endswith("/invoke-with-response-stream")
    assert first.headers["authorization"] == "Bearer bedrock-test-key" and first.body["anthropic_version"]
    assert second.body["messages"][-1]["content"][0]["type"] == "tool_result"
    assert wiring.session.figures.usage["output_tokens"] > 0
