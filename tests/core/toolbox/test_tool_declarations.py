"""What a tool declares (core.toolbox.protocol.Tool) is what the toolbox uses: the path rules match, the argument
shown, the schema sent, and the time the tool itself ran."""

from __future__ import annotations

from rhapsody.core.session.records import dumped
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from rhapsody.core.session.context import RequestSpec
from rhapsody.core.access.permissions import Rules
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.approval import Approval
from rhapsody.core.toolbox.orchestrator import Toolbox
from rhapsody.core.toolbox.protocol import Tool, ToolContext, ToolOutcome


class NoteInput(BaseModel):
    path: str
    text: str = ""


class Plain(Tool):
    """Declares nothing beyond what every tool must: no path, no sandbox, no proposal."""

    name: ClassVar[str] = "plain"
    description: ClassVar[str] = "a tool that declares only its input"
    Input: ClassVar[type[BaseModel]] = NoteInput
    writes: ClassVar[bool] = True
    reads_files: ClassVar[bool] = False

    async def run(self, args: NoteInput, ctx: ToolContext) -> ToolOutcome:
        return ToolOutcome("ran")


class Pathed(Plain):
    """Declares the path its calls name, so rules match it resolved."""

    name: ClassVar[str] = "pathed"

    def path_of(self, args: NoteInput) -> str:
        return args.path


@pytest.fixture
def ctx(project: Path) -> ToolContext:
    session = Session.start(project, RequestSpec(model="m", system="s", tools=[]))
    return ToolContext(project, session)


def permissions(ctx: ToolContext) -> list[dict[str, Any]]:
    return [r for r in dumped(ctx.session.records) if r["kind"] == "permission"]


async def test_a_tool_that_declares_no_path_shows_no_argument_and_sends_its_input_schema(ctx: ToolContext) -> None:
    box = Toolbox([Plain()], "ask")
    outcome, _ = await box.run("plain", {"path": "a.txt"}, ctx)
    assert outcome.is_error and "no human can answer here" in outcome.content
    assert permissions(ctx)[-1]["argument"] == "" and permissions(ctx)[-1]["by"] == "mode"
    schema = box.specs()[0]["input_schema"]
    assert set(schema["properties"]) == {"path", "text"} and "title" not in schema


async def test_a_declared_path_is_matched_resolved(ctx: ToolContext) -> None:
    box = Toolbox([Pathed(), Plain()], "yolo", Rules(deny=["pathed:secret/*", "plain:secret/*"]))
    refused, _ = await box.run("pathed", {"path": "./docs/../secret/key"}, ctx)
    assert refused.is_error and "denied by rule 'pathed:secret/*'" in refused.content
    assert permissions(ctx)[-1]["argument"] == "./docs/../secret/key"
    ran, _ = await box.run("plain", {"path": "secret/key"}, ctx)  # no path declared: the rule has nothing to match
    assert ran.content == "ran"


async def test_the_duration_is_the_tools_own_not_the_time_the_human_took(ctx: ToolContext) -> None:
    now = [100.0]

    async def slow_human(tool: str, argument: str, why: str, args: dict[str, Any],
                         rules: tuple[str, ...] = ()) -> Approval:
        now[0] += 30.0
        return Approval(True)

    class Timed(Plain):
        async def run(self, args: NoteInput, ctx: ToolContext) -> ToolOutcome:
            now[0] += 0.25
            return ToolOutcome("ran")

    box = Toolbox([Timed()], "ask", approver=slow_human, clock=lambda: now[0])
    outcome, ms = await box.run("plain", {"path": "a.txt"}, ctx)
    assert outcome.content == "ran" and ms == 250
    assert permissions(ctx)[-1]["by"] == "human" and permissions(ctx)[-1]["decision"] == "allow"
