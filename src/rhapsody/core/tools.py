"""The tool protocol and the toolbox that runs tool calls for the loop.

A tool declares a pydantic input model (its JSON schema goes to the API) and an async
`run`. The toolbox validates the model's arguments, applies the permission mode, and turns
every failure into an `is_error` outcome: nothing a model sends can crash the loop.

Imports: stdlib, pydantic and rhapsody.core only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ValidationError

if TYPE_CHECKING:
    from rhapsody.core.session import Session


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returns: the text for the model, and facts for history."""

    content: str
    is_error: bool = False
    exit_code: int | None = None
    facts: dict[str, Any] = field(default_factory=dict)


class ToolFailure(Exception):
    """Raised inside a tool for an expected failure; becomes an is_error outcome."""


@dataclass
class ToolContext:
    """What a tool may touch: the project root and the session."""

    root: Path
    session: Session
    bash_timeout: float = 120.0
    output_cap: int = 30000


class Tool(Protocol):
    """A tool the model can call."""

    name: ClassVar[str]
    description: ClassVar[str]
    Input: ClassVar[type[BaseModel]]
    writes: ClassVar[bool]

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutcome:
        """Run with validated arguments."""
        ...


PERMISSION_MODES = ("read-only", "ask", "auto-edit", "yolo")


class Toolbox:
    """The registry of tools and the one place tool calls are run."""

    def __init__(self, tools: list[Tool], permission_mode: str = "yolo") -> None:
        self.tools = {t.name: t for t in tools}
        self.permission_mode = permission_mode

    def specs(self) -> list[dict[str, Any]]:
        """Tool definitions for the request, in registration order."""
        return [
            {"name": t.name, "description": t.description, "input_schema": _schema(t.Input)}
            for t in self.tools.values()
        ]

    async def run(self, name: str, raw_input: Any, ctx: ToolContext) -> tuple[ToolOutcome, int]:
        """Run one call; returns the outcome and its duration in milliseconds."""
        start = time.perf_counter()
        outcome = await self._run(name, raw_input, ctx)
        return outcome, int((time.perf_counter() - start) * 1000)

    async def _run(self, name: str, raw_input: Any, ctx: ToolContext) -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None:
            return ToolOutcome(f"Unknown tool {name!r}. Available: {', '.join(self.tools)}.", is_error=True)
        refusal = self._refusal(tool)
        if refusal:
            return ToolOutcome(refusal, is_error=True)
        try:
            args = tool.Input.model_validate(raw_input if isinstance(raw_input, dict) else {})
        except ValidationError as exc:
            return ToolOutcome(f"Invalid arguments for {name}: {_first_error(exc)}", is_error=True)
        try:
            return await tool.run(args, ctx)
        except ToolFailure as exc:
            return ToolOutcome(str(exc), is_error=True)
        except Exception as exc:  # noqa: BLE001 - a tool bug must not end the session
            return ToolOutcome(f"{name} failed: {type(exc).__name__}: {exc}", is_error=True)

    def _refusal(self, tool: Tool) -> str | None:
        if self.permission_mode == "read-only" and tool.writes:
            return f"{tool.name} is refused: rhapsody runs in read-only mode (no writes, no bash)."
        return None


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    err = errors[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "input"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {err['msg']}{more}"
