"""rhapsody's loop events as Agent Client Protocol session updates, live and replayed from a history.

The model's narration streams as `agent_message_chunk`, thinking as `agent_thought_chunk`; each tool
call is a `tool_call` (its readable one-line title from view/render.py, its kind, the file it touches)
followed by `tool_call_update`s (in_progress, then completed or failed, with the diff an edit applied);
the todo list is the client's plan; everything rhapsody itself says (a seam's figures, a notice, an
interruption) is a line of agent text, as the line-based front ends print it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Any, assert_never

from acp import (plan_entry, start_tool_call, text_block, tool_content, tool_diff_content, update_agent_message_text,
                 update_agent_thought_text, update_plan, update_tool_call, update_user_message_text)
from acp.schema import (AgentMessageChunk, AgentPlanUpdate, AgentThoughtChunk, ToolCallLocation, ToolCallProgress,
                        ToolCallStart, ToolCallStatus, ToolKind, UserMessageChunk)

from rhapsody.core import events as ev
from rhapsody.core.session import records as rec
from rhapsody.core.session.messages import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from rhapsody.view.render import call_title, event_lines, plain, seam_line, spoken_by

Update = AgentMessageChunk | AgentThoughtChunk | ToolCallStart | ToolCallProgress | AgentPlanUpdate | UserMessageChunk
"""The session updates this front end sends."""

KINDS: dict[str, ToolKind] = {
    "read_file": "read", "write_file": "edit", "edit_file": "edit", "bash": "execute", "git": "execute",
    "find_files": "search", "search_text": "search", "recall": "search", "web_fetch": "fetch",
    "todo_write": "think", "micro_handoff": "think", "exit_plan": "switch_mode",
}
"""The protocol's kind of each of rhapsody's tools (the client picks an icon by it); MCP tools are `other`."""

EDITS = ("write_file", "edit_file")
OUTPUT_CAP = 20_000
"""Characters of a call's output a `tool_call_update` carries (the history keeps it whole)."""

STOPS = {"end_turn": "end_turn", "max_tokens": "max_tokens", "limit": "max_turn_requests", "refusal": "refusal"}
"""The protocol's stop reason for each of the loop's (`limit`: a max_steps or cost limit ended the turn)."""


def kind_of(name: str) -> ToolKind:
    """The protocol's kind of a tool."""
    return KINDS.get(name, "other")


def path_arg(call: ToolUseBlock) -> str:
    """The file a call names ('' for none)."""
    args = call.input if isinstance(call.input, dict) else {}
    value = args.get("path")
    return value if isinstance(value, str) else ""


def locations(call: ToolUseBlock, root: Path) -> list[ToolCallLocation] | None:
    """Where a call reads or writes, as the absolute path the client opens (with a read's first line)."""
    given = path_arg(call)
    if not given:
        return None
    line = call.input.get("start_line") if isinstance(call.input, dict) else None
    return [ToolCallLocation(path=str((root / given).resolve()), line=line if isinstance(line, int) else None)]


def old_text(call: ToolUseBlock, root: Path) -> str | None:
    """What an edit's file holds before it runs (None for a new file, or a call that edits nothing)."""
    given = path_arg(call)
    if call.name not in EDITS or not given:
        return None
    try:
        return (root / given).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def proposed_text(name: str, args: dict[str, Any], before: str | None) -> str | None:
    """What an edit would leave in its file (None when it cannot be said: the edit would fail)."""
    if name == "write_file" and isinstance(args.get("content"), str):
        return str(args["content"])
    old, new = args.get("old"), args.get("new")
    if name != "edit_file" or before is None or not isinstance(old, str) or not isinstance(new, str) or not old:
        return None
    if before.count(old) != 1 and not args.get("replace_all"):
        return None
    return before.replace(old, new) if args.get("replace_all") else before.replace(old, new, 1)


@dataclass
class CallBook:
    """What the updates of calls still open need: each edit's file content before it ran."""

    root: Path
    before: dict[str, str | None] = field(default_factory=dict)

    def started(self, call: ToolUseBlock) -> list[Update]:
        """A call announced (pending), then handed to the toolbox, which asks first when it must."""
        self.before[call.id] = old_text(call, self.root)
        start = start_tool_call(call.id, call_title(call), kind=kind_of(call.name), status="pending",
                                locations=locations(call, self.root), raw_input=call.input)
        return [start, update_tool_call(call.id, status="in_progress")]

    def finished(self, event: ev.ToolFinished) -> list[Update]:
        """A call's outcome: completed or failed, with its output (an edit: the diff it applied)."""
        call = event.call
        before = self.before.pop(call.id, None)
        content: list[Any] = [tool_content(text_block(event.refused or event.output[:OUTPUT_CAP]))]
        if call.name in EDITS and not event.is_error and not event.refused and isinstance(call.input, dict):
            after = proposed_text(call.name, call.input, before)  # the file may live in the client's buffer only
            if after is not None:
                content.insert(0, tool_diff_content(str((self.root / path_arg(call)).resolve()), after, before))
        failed = event.is_error or bool(event.refused)
        return [update_tool_call(call.id, status="failed" if failed else "completed", content=content,
                                 raw_output={"exit_code": event.exit_code, "duration_ms": event.duration_ms})]


def said(text: str) -> AgentMessageChunk:
    """A line rhapsody itself says, on a line of its own between the model's words."""
    return update_agent_message_text(f"\n\n{text}\n\n")


def todo_plan(items: tuple[dict[str, str], ...]) -> AgentPlanUpdate:
    """The agent's todo list as the client's plan."""
    status = {"done": "completed", "in_progress": "in_progress"}
    return update_plan([plan_entry(i.get("content", ""), status=status.get(i.get("status", ""), "pending"))  # type: ignore[arg-type]
                        for i in items])


def event_updates(event: ev.Event, calls: CallBook) -> list[Update]:
    """The updates one loop event sends (bookkeeping events send none)."""
    match event:
        case ev.TextDelta(text=text):
            return [update_agent_message_text(text)]
        case ev.ThinkingDelta(text=text):
            return [update_agent_thought_text(text)]
        case ev.BlockStopped(kind=kind):
            return [update_agent_message_text("\n\n")] if kind == "text" else []
        case ev.ToolStarted(call=call):
            return calls.started(call)
        case ev.ToolFinished():
            return calls.finished(event)
        case ev.NarrationViolation(call=call):
            line = plain(event_lines(event)[0]).strip()
            return [start_tool_call(call.id, call_title(call), kind=kind_of(call.name), status="failed",
                                    content=[tool_content(text_block(line))], raw_input=call.input)]
        case ev.SeamCommitted(record=record):
            return [said(seam_line(rec.Seam.model_validate(record)))]
        case ev.TodoUpdated(items=items):
            return [todo_plan(items)]
        case ev.HintDelivered(hint_ids=ids, where=where):
            return [said(f"✓ {', '.join(ids)} delivered ({where})")]
        case (ev.Retrying() | ev.ContextPruned() | ev.HandoffFailed() | ev.Failed() | ev.Interrupted()
              | ev.LimitsExceeded() | ev.Notice() | ev.HarnessSaid() | ev.FilesAttached() | ev.ImagesAttached()
              | ev.SubagentStarted() | ev.SubagentStep() | ev.SubagentEnded()):  # a sub-agent's lines as the app's
            return [said(plain(line).strip()) for line in event_lines(event)]
        case (ev.TurnStarted() | ev.RetryCountdown() | ev.ModelResponse() | ev.RequestSent() | ev.UsageReported()
              | ev.DenialDelivered() | ev.MemoryReminded() | ev.HandoffAsked() | ev.TurnEnded()
              | ev.ApprovalAsked() | ev.PlanReviewAsked() | ev.ShellRan() | ev.Idle()):
            # a denial's words are the human's own, already in the client's dialog; questions, the human's
            # commands and the end of the work are the server's to answer (server.py)
            return []
        case _:
            assert_never(event)


def replayed(records: Sequence[rec.Record], root: Path) -> list[Update]:
    """A history as the updates that show it again (`session/load`): the conversation's words and calls,
    each call completed or failed as its result says, and every seam's figures where it fell."""
    updates: list[Update] = []
    results: dict[str, ToolResultBlock] = {}
    for message in rec.of(records, rec.MessageAdded):
        results.update({b.tool_use_id: b for b in message.content if isinstance(b, ToolResultBlock)})
    for record in records:
        if isinstance(record, rec.MessageAdded):
            updates += _message_updates(record, root, results)
        elif isinstance(record, rec.Seam):
            updates.append(said(seam_line(record)))
    return updates


def _message_updates(record: rec.MessageAdded, root: Path, results: dict[str, ToolResultBlock]) -> list[Update]:
    out: list[Update] = []
    for block in record.content:
        if isinstance(block, TextBlock) and block.text.strip():
            if record.role == "assistant":
                out.append(update_agent_message_text(block.text + "\n\n"))
            elif spoken_by(block.text) == "human":
                out.append(update_user_message_text(block.text))
            else:  # rhapsody's own words to the model, never shown as the human's
                out.append(said(block.text))
        elif isinstance(block, ThinkingBlock) and block.thinking:
            out.append(update_agent_thought_text(block.thinking))
        elif isinstance(block, ToolUseBlock):
            result = results.get(block.id)
            status: ToolCallStatus = "failed" if result is None or result.is_error else "completed"
            text = result_text(result)
            out.append(start_tool_call(block.id, call_title(block), kind=kind_of(block.name), status=status,
                                       locations=locations(block, root), raw_input=block.input,
                                       content=[tool_content(text_block(text[:OUTPUT_CAP]))] if text else None))
    return out


def result_text(result: ToolResultBlock | None) -> str:
    """A tool result's text (its text blocks joined; '' for none)."""
    if result is None:
        return ""
    if isinstance(result.content, str):
        return result.content
    if isinstance(result.content, list):
        return "\n".join(str(b.get("text", "")) for b in result.content if isinstance(b, dict))
    return ""
