"""The tool protocol: what a tool declares and returns, what it may touch, and where tools come from.

A tool declares a pydantic input model (its JSON schema goes to the API) and an async `run` that
returns a `ToolOutcome`; the orchestrator (core/toolbox/orchestrator.py) runs it, the registry
(core/toolbox/registry.py) holds it. Two outcomes the loop acts on are typed here too: the field
note written (`NoteWritten`) and the todo list written (`TodoWritten`).

Imports: stdlib, pydantic and rhapsody.core only.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel

from rhapsody.core.access.permissions import Confinement, Mode, Rules
from rhapsody.core.session import records as rec

if TYPE_CHECKING:
    from rhapsody.core.events import Event
    from rhapsody.core.session.session import Session


EXIT_TRAILER = re.compile(r"\n*\[exit code -?\d+\]\s*$")
"""The last line of a command's result (`exit_trailer`); what says the exit code another way strips it."""


def exit_trailer(code: int | None) -> str:
    """The line bash's result ends with, naming the command's exit status."""
    return f"\n[exit code {code}]"


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returns: the text for the model, and facts for history."""

    content: str
    is_error: bool = False
    exit_code: int | None = None
    facts: rec.ToolFacts | None = None
    words: str = ""
    """The human's own words about this call (a typed denial reason). The loop delivers
    them verbatim as a text block after the tool results, like a hint, so a seam keeps them."""
    blocks: list[dict[str, Any]] | None = None
    """tool_result content blocks (text, image) when plain text cannot carry the result; `content`
    is then its text form for front ends."""
    refused: str = ""
    """Why the call was not run (a permission refusal); empty when it ran."""
    mode: Mode | None = None
    """The permission mode the call leaves the session in (an approved plan picks it); None: unchanged."""


class ToolFailure(Exception):
    """Raised inside a tool for an expected failure; becomes an is_error outcome."""


@dataclass
class ToolContext:
    """What a tool may touch: the project root and the session."""

    root: Path
    session: Session
    bash_timeout: float = 120.0
    output_cap: int = 30000
    confinement: Confinement = ""
    """Where this call's command runs: a sandbox level, 'off' or 'unavailable' (set per call by the toolbox)."""
    read_deny: tuple[str, ...] = ()
    """Path patterns of `read_file` deny rules: search and listing leave those files out too."""
    read_only: bool = False
    """The permission mode is read-only: a tool writes nothing, not even its own caches."""
    protected: tuple[str, ...] = ()
    """The user's `protected_paths` (absolute): no tool reads or writes them, the sandbox hides them."""
    call_id: str = ""
    """The tool_use id of the call being run (its checkpoint names it; hooks get it)."""
    rules: Rules = field(default_factory=Rules)
    """The permission rules (set per call by the toolbox): web_fetch decides on each address it resolves."""
    read_outside: bool = False
    """This call's read outside the project was permitted (asked and allowed, or by a rule): the tool may read
    there, credential locations still refused."""
    mode: Mode = "yolo"
    """The permission mode the call runs in (set per call by the toolbox)."""
    reviewer: PlanReviewer | None = None
    """Who reviews a proposed plan (the toolbox's); None where no human can answer."""
    files: EditorFiles | None = None
    """The editor's files, which file tools read and write through (the toolbox's); None: the disk itself."""
    delegation: object | None = None
    """What the agent lends the sub-agents a call starts (a `core.agent.subagent.Delegation`, which the toolbox,
    below the agent, cannot name); None: it starts none."""
    progress: Callable[[Event], None] | None = None
    """Where a tool that `streams` puts the events it has while it runs (set per call by core/agent/tool_calls.py)."""


class Tool:
    """A tool the model can call: the base every tool extends, declaring what the toolbox needs to know.

    `writes` (files or bash) and `reads_files` drive permissions; the methods below have defaults that
    fit a tool without a path, a sandbox or a diff to show, and a tool overrides what applies to it."""

    name: ClassVar[str]
    description: ClassVar[str]
    Input: ClassVar[type[BaseModel]]
    writes: ClassVar[bool]
    reads_files: ClassVar[bool]
    streams: ClassVar[bool] = False
    """The tool has events while it runs (a sub-agent's steps): it runs as a task whose progress the loop yields."""

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutcome:
        """Run with validated arguments."""
        raise NotImplementedError

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the input the request sends: the input model's, without titles."""
        return _schema(self.Input)

    def path_of(self, args: Any) -> str | None:
        """The path a call names, which rules match once resolved; None: the call names none."""
        return None

    def argument_of(self, args: Any) -> str:
        """What rules match and approval shows: by default the path the call names."""
        return self.path_of(args) or ""

    def confinement(self, permission_mode: Mode) -> Confinement:
        """Where the tool's process would run in this mode; '' for a tool that runs no process."""
        return ""

    def concurrent(self, args: Any) -> bool:
        """Whether this call may run at the same time as its neighbours of the same round that may too."""
        return False

    def escape(self, args: Any) -> Escape | None:
        """The call's request to run outside the sandbox, with the model's justification; None: it stays in."""
        return None

    def proposal(self, args: Any, ctx: ToolContext) -> str:
        """The diff a write would make, shown when the human is asked and kept when it is denied; '' for none."""
        return ""


@dataclass(frozen=True)
class Escape:
    """A call's request to leave the sandbox: whether it asks, and the model's justification."""

    asked: bool
    justification: str = ""


@dataclass(frozen=True)
class PlanReview:
    """The human's answer to a proposed plan: approved (as edited, then this mode) or rejected with a reason."""

    approved: bool
    plan: str = ""
    """The plan as the human approved it (their edits included)."""
    mode: Mode = "auto-edit"
    """The permission mode the work goes on in once approved."""
    reason: str = ""
    """Why the human rejected it, in their own words ('' for none given)."""


class PlanReviewer(Protocol):
    """Shows the human a proposed plan (Markdown) and returns their answer (the app and plain mode provide one)."""

    async def __call__(self, plan: str) -> PlanReview:
        """The human's answer."""
        ...


class EditorFiles(Protocol):
    """The files as the human's editor holds them (unsaved changes included), where a front end offers them
    (an editor over the Agent Client Protocol). File tools still confine and check every path on disk first."""

    async def read(self, path: Path) -> str:
        """The text of `path` (absolute) as the editor has it."""
        ...

    async def write(self, path: Path, content: str) -> None:
        """Write `content` to `path` (absolute) through the editor."""
        ...


class ToolSource(Protocol):
    """Tools that arrive after start-up (MCP servers): started in the background, waited for per turn."""

    def start(self) -> None:
        """Begin starting in the background (needs a running event loop); repeated calls do nothing."""
        ...

    async def tools(self) -> list[Tool]:
        """Every tool available now, in a fixed order; waits for what is still starting, bounded."""
        ...

    def notices(self) -> list[str]:
        """Status lines not yet shown (a server failed, died, or waits for trust)."""
        ...

    def status(self) -> list[str]:
        """What `/mcp` shows: each server, its state and its tools."""
        ...

    async def close(self) -> None:
        """Stop everything this source started."""
        ...


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    return dict(json.loads(_schema_text(model)))  # a fresh copy each time: a caller may change its own


@functools.cache
def _schema_text(model: type[BaseModel]) -> str:
    """An input model's schema, built once per model: pydantic takes milliseconds a tool, every session start."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return json.dumps(schema)


@dataclass(frozen=True)
class NoteWritten(ToolOutcome):
    """What `micro_handoff` returns: the note is saved, and the seam is to be committed."""

    note_path: str = ""
    seam: int = 0
    note: str = ""
    """The note as saved (PostHandoff hooks get it)."""


@dataclass(frozen=True)
class TodoWritten(ToolOutcome):
    """A todo_write call's outcome: the list it left, for the loop's event."""

    items: tuple[rec.TodoItem, ...] = ()
