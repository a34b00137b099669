"""The tool protocol and the toolbox that runs tool calls for the loop.

A tool declares a pydantic input model (its JSON schema goes to the API) and an async
`run`. The toolbox validates the model's arguments, applies the permission mode, and turns
every failure into an `is_error` outcome: nothing a model sends can crash the loop.

Imports: stdlib, pydantic and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pydantic import BaseModel, ValidationError

from rhapsody.core.session.checkpoints import Checkpointer, checkpoint
from rhapsody.core.toolbox.hooks import NOTHING, HookVerdict, Hooks, NoHooks, payload, tool_fields
from rhapsody.core.session.messages import INVALID_KEY, UNPARSED_KEY
from rhapsody.core.toolbox.permissions import (
    SANDBOXED,
    Call,
    Confinement,
    DecidedBy,
    Decision,
    Mode,
    Rules,
    Verdict,
    decide_call,
    outside,
    read_only_command,
    relative_keys,
    writes_nothing,
)
from rhapsody.core.secrets import mask
from rhapsody.core.toolbox.rule_suggestions import session_rules

if TYPE_CHECKING:
    from rhapsody.core.events import Event
    from rhapsody.core.session.session import Session
    from rhapsody.core.agent.subagent import Delegation


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returns: the text for the model, and facts for history."""

    content: str
    is_error: bool = False
    exit_code: int | None = None
    facts: dict[str, Any] = field(default_factory=dict)
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
    delegation: Delegation | None = None
    """What the agent lends the sub-agents a call starts (core/agent/subagent.py); None: it starts none."""
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
class Answer:
    """The permission decision once asked: the verdict, why, who decided, and the human's own words."""

    verdict: Verdict
    reason: str
    by: DecidedBy
    words: str = ""


@dataclass(frozen=True)
class Approval:
    """The human's answer to a permission question.

    `remember` holds rules (e.g. `bash:pytest *`) allowed for the rest of the session.
    """

    allow: bool
    reason: str = ""
    remember: tuple[str, ...] = ()
    words: str = ""
    """What the human typed with a denial, exactly; it reaches the model as the human's message."""


class Approver(Protocol):
    """Asks the human whether a call may run (the app and plain mode provide one).

    `args` are the call's validated arguments, so the question can show a diff or the exact command;
    `rules` are the session rules that would let it run (see core/toolbox/rule_suggestions.py), empty when no rule can.
    """

    async def __call__(self, tool: str, argument: str, why: str, args: dict[str, Any],
                       rules: tuple[str, ...] = ()) -> Approval:
        """The human's decision."""
        ...


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


MASK = "[masked secret]"
"""What a secret value becomes in tool output (the same text as core.secrets.MASK)."""


class Toolbox:
    """The registry of tools and the one place tool calls are run and permitted."""

    def __init__(
        self,
        tools: list[Tool],
        permission_mode: Mode = "yolo",
        rules: Rules | None = None,
        secrets: tuple[str, ...] = (),
        approver: Approver | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.tools = {t.name: t for t in tools}
        self.permission_mode: Mode = permission_mode
        self.rules = rules or Rules()
        self.approver = approver
        """Who answers `ask` decisions; None where no human can answer (headless)."""
        self.reviewer: PlanReviewer | None = None
        """Who answers a plan `exit_plan` proposes; None where no human can answer (headless)."""
        self.files: EditorFiles | None = None
        """The editor's files, where the front end is an editor that offers them (see EditorFiles)."""
        self.clock = clock
        """Times tool runs (seconds); a fixed clock pins durations in layout snapshots."""
        self.secrets = tuple(s for s in secrets if len(s) >= 8)
        self.sources: list[ToolSource] = []
        self._builtin = list(self.tools)
        self.protected: tuple[str, ...] = ()
        """The user's `protected_paths`, made absolute: every call's context carries them."""
        self.checkpointer: Checkpointer | None = None
        """Records the working tree before each turn and each call that may write; None: no checkpoints."""
        self.hooks: Hooks = NoHooks()
        """The user's hooks (rhapsody.hook_runner); the loop fires its own events through them too."""
        self._background: set[asyncio.Task[HookVerdict]] = set()

    def specs(self) -> list[dict[str, Any]]:
        """Tool definitions for the request, in registration order."""
        return [
            {"name": t.name, "description": t.description,
             "input_schema": t.schema()}
            for t in self.tools.values()
        ]

    def runs_alongside(self, name: str, raw_input: Any) -> bool:
        """Whether a call may run at the same time as its neighbours that may too (the tool says, on valid arguments)."""
        checked = self._checked(name, raw_input)
        return not isinstance(checked, ToolOutcome) and checked[0].concurrent(checked[1])

    def streams(self, name: str) -> bool:
        """Whether the named tool has events while it runs."""
        tool = self.tools.get(name)
        return tool is not None and tool.streams

    def add_secrets(self, values: list[str]) -> None:
        """More values to mask in every tool result (an MCP server's env and header values)."""
        self.secrets = (*self.secrets, *(v for v in values if len(v) >= 8 and v not in self.secrets))

    def start_sources(self) -> list[str]:
        """Start every source in the background without waiting (needs a running loop); returns notices."""
        notices: list[str] = []
        for source in self.sources:
            source.start()
            notices += source.notices()
        return notices

    async def close_sources(self) -> None:
        """Stop what the sources started (every MCP server process) and any Notification hook still running."""
        for source in self.sources:
            await source.close()
        for task in list(self._background):
            task.cancel()

    async def refresh(self) -> list[str]:
        """Take in the tools of every source (built-ins first, then each source's in its order); returns notices."""
        if not self.sources:
            return []
        tools = {name: self.tools[name] for name in self._builtin}
        notices: list[str] = []
        for source in self.sources:
            source.start()
            for tool in await source.tools():
                tools.setdefault(tool.name, tool)
            notices += source.notices()
        self.tools = tools
        return notices

    async def run(self, name: str, raw_input: Any, ctx: ToolContext) -> tuple[ToolOutcome, int]:
        """Run one call; returns the outcome (secrets masked) and how long the tool itself ran, in milliseconds."""
        outcome, started = await self._run(name, raw_input, ctx)
        return outcome, int((self.clock() - started) * 1000)

    async def _run(self, name: str, raw_input: Any, ctx: ToolContext) -> tuple[ToolOutcome, float]:
        """The outcome, masked, and when the tool itself started (after any question to the human)."""
        started = self.clock()
        checked = self._checked(name, raw_input)
        if isinstance(checked, ToolOutcome):
            return self._mask(checked), started
        tool, args = checked
        call = self._describe(tool, args, ctx)
        hooked = self.hooks.wants("PreToolUse", name) or self.hooks.wants("PostToolUse", name)
        fields = tool_fields(name, args.model_dump(), ctx.root) if hooked else {}
        hook = await self._tool_hook(ctx, "PreToolUse", name, fields)
        refusal = await self._permit(tool, call, ctx, args, hook)
        if refusal:
            return self._mask(refusal), started
        if tool.writes and (call.leave_sandbox or call.confinement != "read-only"):
            await checkpoint(ctx.session, self.checkpointer, "tool", tool_use_id=ctx.call_id, name=tool.name)
        started = self.clock()  # the duration is the tool's, not the human's time to answer
        ctx = dataclasses.replace(ctx, confinement="off" if call.leave_sandbox else call.confinement,
                                  read_deny=self.rules.read_denied(), read_only=writes_nothing(self.permission_mode),
                                  protected=self.protected, rules=self.rules, mode=self.permission_mode,
                                  reviewer=self.reviewer, files=self.files, read_outside=bool(outside(call.keys)) and call.reads_files)
        outcome = self._mask(await self._execute(tool, args, ctx))
        if outcome.mode is not None and outcome.mode != self.permission_mode:
            self.permission_mode = outcome.mode
            ctx.session.record("permission_mode", mode=outcome.mode)
        response = {"output": outcome.content, "is_error": outcome.is_error, "exit_code": outcome.exit_code}
        after = await self._tool_hook(ctx, "PostToolUse", name, fields, tool_response=response)
        return _with_hook_words(outcome, after, self._masked), started

    def _checked(self, name: str, raw_input: Any) -> tuple[Tool, BaseModel] | ToolOutcome:
        """The tool a call names and its validated arguments, or why it cannot run (unknown, unparsed, invalid)."""
        tool = self.tools.get(name)
        if tool is None:
            return ToolOutcome(_unknown_tool(name, list(self.tools)), is_error=True)
        if isinstance(raw_input, dict) and UNPARSED_KEY in raw_input:
            return ToolOutcome(_unparsed_reason(name, raw_input), is_error=True)
        try:
            return tool, tool.Input.model_validate(raw_input if isinstance(raw_input, dict) else {})
        except ValidationError as exc:
            return ToolOutcome(f"Invalid arguments for {name}: {_first_error(exc)}", is_error=True)

    async def _execute(self, tool: Tool, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        try:
            return await tool.run(args, ctx)
        except ToolFailure as exc:
            return ToolOutcome(str(exc), is_error=True)
        except Exception as exc:  # noqa: BLE001 - a tool bug must not end the session
            return ToolOutcome(f"{tool.name} failed: {type(exc).__name__}: {exc}", is_error=True)

    async def _tool_hook(self, ctx: ToolContext, event: str, name: str, fields: dict[str, Any],
                         **more: Any) -> HookVerdict:
        """Fire a tool event's hooks; its payload (the arguments masked like everything else that leaves) is
        built only when a hook takes the tool."""
        if not self.hooks.wants(event, name):
            return NOTHING
        masked = {**fields, "tool_input": {k: self._masked(v) if isinstance(v, str) else v
                                           for k, v in fields["tool_input"].items()}}
        event_input = payload(ctx.session, event, self.permission_mode, **masked, tool_use_id=ctx.call_id, **more)
        return await self.hooks.fire(ctx.session, event, event_input, name)

    async def _permit(self, tool: Tool, call: Call, ctx: ToolContext, args: BaseModel,
                      hook: HookVerdict = NOTHING) -> ToolOutcome | None:
        """None when the call may run, else the refusal the model gets; every decision is recorded.

        `args` go to the approver, so the question can show the diff or the exact command; a call the
        human denied keeps the diff it proposed (`proposed_diff`), so unfolding it shows what was refused."""
        decision, by = _hooked(decide_call(self.permission_mode, self.rules, call), hook)
        answer = Answer(decision.verdict, decision.reason, by)
        if answer.verdict == "ask":
            why = decision.reason
            if call.leave_sandbox:
                why += f". The model's justification: {call.justification or '(none given)'}"
            answer = await self._ask(call, why, args.model_dump(), ctx)
        verdict, reason, by, words = answer.verdict, answer.reason, answer.by, answer.words
        if tool.writes or verdict != "allow" or decision.rule:  # plain reads are not worth a record
            ctx.session.record("permission", tool=tool.name, argument=call.argument, decision=verdict, by=by,
                               reason=reason, **({"confinement": call.confinement} if call.confinement else {}))
        if verdict == "allow":
            return None
        shown = f"denied by the human: {words}" if words else reason
        if words:
            reason = "denied by the human; their reason follows the tool results, in their own words"
        facts = await self._proposal(tool, args, ctx) if by == "human" else {}
        return ToolOutcome(f"Not run: permission denied for {tool.name} {call.argument!r}: {reason}", is_error=True,
                           words=words, refused=shown, facts=facts)

    async def _proposal(self, tool: Tool, args: BaseModel, ctx: ToolContext) -> dict[str, Any]:
        """The diff a denied write or edit proposed, for its record (the tool's `proposal`)."""
        ctx = dataclasses.replace(ctx, read_deny=self.rules.read_denied(), protected=self.protected)
        diff = await asyncio.to_thread(tool.proposal, args, ctx)
        return {"proposed_diff": self._masked(diff)} if diff else {}

    def _describe(self, tool: Tool, args: BaseModel, ctx: ToolContext) -> Call:
        """What the permission check needs: the argument, resolved path keys, where a command would run."""
        path = tool.path_of(args)
        try:
            keys = relative_keys(ctx.root, path) if path and "\x00" not in path else ()
        except (OSError, ValueError, RuntimeError):
            keys = ()
        confinement = tool.confinement(self.permission_mode)
        escape = tool.escape(args) or Escape(False)
        if (tool.name == "bash" and self.permission_mode == "ask" and confinement == "workspace-write"
                and not escape.asked and read_only_command(self.rules.parse(tool.argument_of(args)))):
            confinement = "read-only"  # it runs unasked only where it cannot write, whatever the parse missed
        return Call(tool.name, tool.argument_of(args), tool.writes, tool.reads_files, keys,
                    confinement, confinement in SANDBOXED and escape.asked, escape.justification)

    async def _ask(self, call: Call, why: str, args: dict[str, Any], ctx: ToolContext) -> Answer:
        tool, argument = call.tool, call.argument
        if self.approver is None:
            return Answer("deny", f"{why}, and no human can answer here (headless); {self._headless_way(call)}", "mode")
        self._notify(ctx, f"rhapsody needs your permission to use {tool}: {argument}"[:300])
        answer = await self.approver(tool, argument, why, args, rules=session_rules(self.permission_mode, self.rules, call))
        self.rules.session_allow.extend(answer.remember)
        words = "" if answer.allow or not answer.words.strip() else answer.words
        reason = answer.reason or (f"denied by the human: {words}" if words else "")
        reason = reason or ("allowed by the human" if answer.allow else "denied by the human")
        if answer.remember:
            reason += f"; {', '.join(answer.remember)} allowed for this session"
        return Answer("allow" if answer.allow else "deny", reason, "human", words)

    def _notify(self, ctx: ToolContext, message: str) -> None:
        """Fire the Notification hooks without waiting: the question is shown at once."""
        if not self.hooks.wants("Notification"):
            return
        event = payload(ctx.session, "Notification", self.permission_mode, message=self._masked(message),
                        title="rhapsody")
        task = asyncio.ensure_future(self.hooks.fire(ctx.session, "Notification", event))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _headless_way(self, call: Call) -> str:
        """How to let a call run without a human: a rule that would allow it, or, when none can, the mode."""
        if call.leave_sandbox:
            first = call.argument.split()[0] if call.argument else ""
            return (f"allow it with a rule such as allow = [\"unsandboxed:{first}*\"] in your user config "
                    "or pick another --permission-mode")
        rules = session_rules(self.permission_mode, self.rules, call)
        if rules:
            listed = ", ".join(f'"{r}"' for r in rules)
            return f"allow it with a rule such as allow = [{listed}] or pick another --permission-mode"
        opaque = self.rules.parse(call.argument).opaque if call.tool == "bash" else ""
        return f"no allow rule can allow this call{f' ({opaque})' if opaque else ''}; pick another --permission-mode"

    def _mask(self, outcome: ToolOutcome) -> ToolOutcome:
        content = self._masked(outcome.content)
        blocks = outcome.blocks and [
            {**b, "text": self._masked(b["text"])} if b.get("type") == "text" else b for b in outcome.blocks
        ]
        if content == outcome.content and blocks == outcome.blocks:
            return outcome
        return dataclasses.replace(outcome, content=content, blocks=blocks)

    def _masked(self, text: str) -> str:
        return mask(text, self.secrets)


def _hooked(decision: Decision, hook: HookVerdict) -> tuple[Decision, DecidedBy]:
    """The rules' decision after the PreToolUse hooks: they may deny or ask, never allow what would be asked."""
    if decision.verdict == "deny" or not (hook.denies or hook.decision == "ask"):
        return decision, "rules"
    why = hook.reason or "no reason given"
    if hook.denies:
        return Decision("deny", f"denied by a PreToolUse hook: {why}"), "hook"
    if decision.verdict == "allow":
        return Decision("ask", f"a PreToolUse hook asks: {why}"), "hook"
    return decision, "rules"


def _with_hook_words(outcome: ToolOutcome, hook: HookVerdict, masked: Callable[[str], str]) -> ToolOutcome:
    """The result with what PostToolUse hooks said to the model appended (exit 2, a block reason, context), masked."""
    said = "\n".join(t for t in (hook.reason, hook.context) if t)
    if not said:
        return outcome
    note = f"\n[PostToolUse hook] {masked(said)}"
    blocks = outcome.blocks and [*outcome.blocks, {"type": "text", "text": note.strip()}]
    return dataclasses.replace(outcome, content=outcome.content + note, blocks=blocks)


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema


def _unparsed_reason(name: str, raw_input: dict[str, Any]) -> str:
    raw = str(raw_input.get(UNPARSED_KEY, ""))
    shown = raw if len(raw) <= 200 else raw[:200] + "..."
    why = raw_input.get(INVALID_KEY, "not a JSON object")
    return f"Not run: the arguments of {name} are {why}: {shown!r}. Send the call again with a JSON object."


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    err = errors[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "input"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {err['msg']}{more}"


def _unknown_tool(name: str, available: list[str]) -> str:
    """Why a call names no tool; an MCP tool offered earlier in the session names its server as gone."""
    parts = name.split("__")
    if len(parts) >= 3 and parts[0] == "mcp":
        return (f"Tool {name!r} is unavailable: the MCP server {parts[1]!r} is not running in this session "
                "(it was removed from the configuration or is not trusted here). Do not call its tools again.")
    return f"Unknown tool {name!r}. Available: {', '.join(available)}."
