"""The orchestrator: the one place a tool call is run, each step in order, in `Toolbox.run_call`.

validate → PreToolUse hooks → decide → ask → checkpoint → run → mask → PostToolUse hooks. Every
failure becomes an `is_error` outcome: nothing a model sends can crash the loop. The tool protocol
is core/toolbox/protocol.py, the registry core/toolbox/registry.py, the approval path (the ask
step's one call, `Toolbox._ask`) core/toolbox/approval.py.

Imports: stdlib, pydantic and rhapsody.core only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from rhapsody.core.access.permissions import (
    SANDBOXED,
    Call,
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
from rhapsody.core.session.checkpoints import Checkpointer, checkpoint
from rhapsody.core.session.messages import INVALID_KEY, UNPARSED_KEY
from rhapsody.core.toolbox.approval import Approver
from rhapsody.core.toolbox.hooks import NOTHING, HookVerdict, Hooks, NoHooks, payload, tool_fields
from rhapsody.core.toolbox.protocol import EditorFiles, Escape, PlanReviewer, Tool, ToolContext, ToolFailure, ToolOutcome
from rhapsody.core.toolbox.registry import Registry
from rhapsody.core.toolbox.rule_suggestions import session_rules
from rhapsody.core.session import records as rec


@dataclass(frozen=True)
class Ruling:
    """The permission decision once asked: the verdict, why, who decided, and the human's own words."""

    verdict: Verdict
    reason: str
    by: DecidedBy
    words: str = ""




class Toolbox(Registry):
    """The registry with what every call is run under: the mode, the rules, the approver, the hooks,
    the checkpointer and the secrets to mask."""

    def __init__(
        self,
        tools: list[Tool],
        permission_mode: Mode = "yolo",
        rules: Rules | None = None,
        secrets: tuple[str, ...] = (),
        approver: Approver | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__(tools)
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
        self.protected: tuple[str, ...] = ()
        """The user's `protected_paths`, made absolute: every call's context carries them."""
        self.checkpointer: Checkpointer | None = None
        """Records the working tree before each turn and each call that may write; None: no checkpoints."""
        self.hooks: Hooks = NoHooks()
        """The user's hooks (rhapsody.hook_runner); the loop fires its own events through them too."""
        self._background: set[asyncio.Task[HookVerdict]] = set()

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

    async def close_sources(self) -> None:
        """Stop what the sources started (every MCP server process) and any Notification hook still running."""
        await super().close_sources()
        for task in list(self._background):
            task.cancel()

    async def run(self, name: str, raw_input: Any, ctx: ToolContext) -> tuple[ToolOutcome, int]:
        """Run one call; returns the outcome (secrets masked) and how long the tool itself ran, in milliseconds."""
        outcome, started = await self._run(name, raw_input, ctx)
        return outcome, int((self.clock() - started) * 1000)

    async def _run(self, name: str, raw_input: Any, ctx: ToolContext) -> tuple[ToolOutcome, float]:
        """The steps of one call, in order; the outcome, masked, and when the tool itself started."""
        started = self.clock()
        checked = self._checked(name, raw_input)  # validate
        if isinstance(checked, ToolOutcome):
            return self._mask(checked), started
        tool, args = checked
        call = self._describe(tool, args, ctx)
        hooked = self.hooks.wants("PreToolUse", name) or self.hooks.wants("PostToolUse", name)
        fields = tool_fields(name, args.model_dump(), ctx.root) if hooked else {}
        hook = await self._tool_hook(ctx, "PreToolUse", name, fields)  # hooks
        decision, by = _hooked(decide_call(self.permission_mode, self.rules, call), hook)  # decide
        answer = Ruling(decision.verdict, decision.reason, by)
        if answer.verdict == "ask":  # ask: the one call to the approval path
            answer = await self._ask(call, _why(decision, call), args.model_dump(), ctx)
        refusal = await self._settled(tool, call, decision, answer, args, ctx)
        if refusal:
            return self._mask(refusal), started
        if tool.writes and (call.leave_sandbox or call.confinement != "read-only"):  # checkpoint
            await checkpoint(ctx.session, self.checkpointer, "tool", tool_use_id=ctx.call_id, name=tool.name)
        started = self.clock()  # the duration is the tool's, not the human's time to answer
        outcome = self._mask(await self._execute(tool, args, self._call_context(call, ctx)))  # run, mask
        self._take_mode(outcome, ctx)
        response = {"output": outcome.content, "is_error": outcome.is_error, "exit_code": outcome.exit_code}
        after = await self._tool_hook(ctx, "PostToolUse", name, fields, tool_response=response)  # hooks
        return _with_hook_words(outcome, after, self._masked), started

    def _call_context(self, call: Call, ctx: ToolContext) -> ToolContext:
        """The context the tool runs in: where its command runs, the rules and the mode as they are now."""
        return dataclasses.replace(ctx, confinement="off" if call.leave_sandbox else call.confinement,
                                   read_deny=self.rules.read_denied(), read_only=writes_nothing(self.permission_mode),
                                   protected=self.protected, rules=self.rules, mode=self.permission_mode,
                                   reviewer=self.reviewer, files=self.files,
                                   read_outside=bool(outside(call.keys)) and call.reads_files)

    def _take_mode(self, outcome: ToolOutcome, ctx: ToolContext) -> None:
        """The permission mode a call leaves the session in (an approved plan picks it), recorded."""
        if outcome.mode is not None and outcome.mode != self.permission_mode:
            self.permission_mode = outcome.mode
            ctx.session.append(rec.PermissionMode(mode=outcome.mode))

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

    async def _settled(self, tool: Tool, call: Call, decision: Decision, answer: Ruling, args: BaseModel,
                       ctx: ToolContext) -> ToolOutcome | None:
        """None when the call may run, else the refusal the model gets; every decision is recorded.

        A call the human denied keeps the diff it proposed (`proposed_diff`), so unfolding it shows what was refused."""
        verdict, reason, by, words = answer.verdict, answer.reason, answer.by, answer.words
        if tool.writes or verdict != "allow" or decision.rule:  # plain reads are not worth a record
            ctx.session.append(rec.Permission(tool=tool.name, argument=call.argument, decision=verdict, by=by,
                               reason=reason, confinement=call.confinement or None))
        if verdict == "allow":
            return None
        shown = f"denied by the human: {words}" if words else reason
        if words:
            reason = "denied by the human; their reason follows the tool results, in their own words"
        facts = await self._proposal(tool, args, ctx) if by == "human" else None
        return ToolOutcome(f"Not run: permission denied for {tool.name} {call.argument!r}: {reason}", is_error=True,
                           words=words, refused=shown, facts=facts)

    async def _proposal(self, tool: Tool, args: BaseModel, ctx: ToolContext) -> rec.ProposalFacts | None:
        """The diff a denied write or edit proposed, for its record (the tool's `proposal`)."""
        ctx = dataclasses.replace(ctx, read_deny=self.rules.read_denied(), protected=self.protected)
        diff = await asyncio.to_thread(tool.proposal, args, ctx)
        return rec.ProposalFacts(proposed_diff=self._masked(diff)) if diff else None

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

    async def _ask(self, call: Call, why: str, args: dict[str, Any], ctx: ToolContext) -> Ruling:
        tool, argument = call.tool, call.argument
        if self.approver is None:
            return Ruling("deny", f"{why}, and no human can answer here (headless); {self._headless_way(call)}", "mode")
        self._notify(ctx, f"rhapsody needs your permission to use {tool}: {argument}"[:300])
        answer = await self.approver(tool, argument, why, args, rules=session_rules(self.permission_mode, self.rules, call))
        self.rules.session_allow.extend(answer.remember)
        words = "" if answer.allow or not answer.words.strip() else answer.words
        reason = answer.reason or (f"denied by the human: {words}" if words else "")
        reason = reason or ("allowed by the human" if answer.allow else "denied by the human")
        if answer.remember:
            reason += f"; {', '.join(answer.remember)} allowed for this session"
        return Ruling("allow" if answer.allow else "deny", reason, "human", words)

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


def _why(decision: Decision, call: Call) -> str:
    """What the human is asked about: the rules' reason, and the model's justification for leaving the sandbox."""
    if call.leave_sandbox:
        return decision.reason + f". The model's justification: {call.justification or '(none given)'}"
    return decision.reason


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
