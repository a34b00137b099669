"""The one renderer: loop events and history records become the lines every front end shows.

A `Line` carries structured fields (kind, state, key, body) so no front end parses prose:
the app maps a line to a widget, plain and headless print `plain(line)`, and a resumed
transcript is `record_lines(...)` over the same history the loop wrote.

Two doors, kept apart: what happens live is drawn from loop events only (`event_lines`,
`print_event`, `finished_view`); history records are drawn only to rebuild a transcript
(`record_lines`: on resume, after a rewind or a seam) and for the full view of an old result
(`full_result`). The loop's events carry every fact a live line needs (core/events.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO, assert_never

from rhapsody.core.attachments import shown as attachment
from rhapsody.core.session.images import label as image_label
from rhapsody.core import events as ev
from rhapsody.core.session import records as rec
from rhapsody.core.session.checkpoints import HARNESS_PREFIX
from rhapsody.core.session.history import collector_paused
from rhapsody.core.session.context import Conversation
from rhapsody.core.toolbox.output_caps import original_size
from rhapsody.core.session.messages import Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from rhapsody.core.session import todo
from rhapsody.core.own_files import read_own
from rhapsody.core.counts import counted
from rhapsody.view.sink import visible as visible  # the one function every byte for a terminal passes

KEY_ARGUMENTS = ("command", "path", "file_path", "notebook_path", "url", "pattern", "query", "id", "action",
                 "description", "subagent_type")
"""The argument that says what a call does, first found first: rhapsody's own tools' names, then those of
Claude Code's and Codex's tools in an imported session (`Read`'s `file_path`, `WebFetch`'s `url`, `Task`'s
`description`), so every call gets one readable line, never its arguments as JSON."""
SHELLS = ("bash", "sh", "zsh")
TOOL_TAGS = ("<task-notification>", "<command-name>", "<command-message>", "<command-args>",
             "<local-command-stdout>", "<local-command-stderr>", "<system-reminder>", "<bash-stdout>",
             "<bash-stderr>", "<user-prompt-submit-hook>", "<environment_context>", "<user_instructions>",
             "<turn_aborted>")
"""How the text an imported session's own tool put in a user message begins (Claude Code's notifications,
its slash commands' echo and output, system reminders; Codex's context blocks): the tool's words, not the
human's."""
INTERRUPTED_TEXT = "⏹ interrupted: what streamed so far is kept"
STRIPPED = " · stripped · recall "
"""Joins a stripped call's line and its recall id (`⊘ bash ls → ok (0.1 s) · stripped · recall S:ID`)."""


@dataclass(frozen=True)
class Line:
    """One transcript line; `body` is what unfolding shows, `key` a call or hint id."""

    kind: str
    text: str
    body: str = ""
    key: str = ""
    state: str = ""
    reason: str = ""
    """Why a call was refused or failed, whole (the line's text cuts it)."""
    full: str = ""
    """The text with the whole reason, as the line-based front ends print it; '' when it is `text`."""


@dataclass(frozen=True)
class ToolView:
    """What is known of one tool call: enough to draw its line in any state."""

    call: ToolUseBlock
    state: str = "running"
    """running, asking (a permission question is open), ok, error, exit, denied, interrupted, or violation (the
    narration rule refused it: no line of its own, its violation line says so)."""
    duration_ms: int = 0
    exit_code: int | None = None
    output: str = ""
    recall: str = ""
    proposed: str = ""
    """The diff a denied write or edit proposed (its record's `proposed_diff`)."""


# -- small pieces -----------------------------------------------------------------------


def one_line(text: str, width: int) -> str:
    """`text` on one line, cut to `width` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


LABELLED = re.compile(r"^(\s*\S+(?: \S+)* {2,})\S")
"""A table-like line: a label, two or more spaces, then its text (as /help lists commands)."""


def hanging(text: str, width: int) -> str:
    """`text` wrapped to `width` columns, each wrapped line indented under where its line's text starts:
    after a label (`/model        NAME…`) or after the line's own leading spaces."""
    import textwrap

    out = []
    for line in text.splitlines():
        if len(line) <= width or width < 20:
            out.append(line)
            continue
        labelled = LABELLED.match(line)
        indent = len(labelled.group(1)) if labelled else len(line) - len(line.lstrip(" "))
        indent = indent if indent <= width // 2 else 0
        out += textwrap.wrap(line, width, subsequent_indent=" " * indent, break_on_hyphens=False) or [line]
    return "\n".join(out)


def key_argument(call: ToolUseBlock) -> str:
    """The one argument that says what a call does (command, path, pattern...)."""
    args: Any = call.input if isinstance(call.input, dict) else {}
    if call.name == "micro_handoff":
        return f"field note ({len(args.get('done') or [])} done, {len(args.get('open') or [])} open)"
    if call.name == "todo_write" and isinstance(args.get("todos"), list):
        items = args["todos"]
        done = sum(1 for i in items if isinstance(i, dict) and i.get("status") == "done")
        return f"({done}/{len(items)} done)"
    if call.name == "exit_plan":
        return f"plan ({counted(len(str(args.get('plan') or '').splitlines()), 'line')})"
    if call.name == "delegate":
        return f"{args.get('mode') or 'read-only'}: {one_line(visible(str(args.get('task') or '')), 80)}"
    for key in KEY_ARGUMENTS:
        if key in args and args[key]:
            return one_line(visible(_argument_text(args[key])), 90)
    if isinstance(args.get("todos"), list):  # Claude Code's TodoWrite
        return counted(len(args["todos"]), "todo")
    return one_line(visible(json.dumps(args, ensure_ascii=False)), 90) if args else ""


def _argument_text(value: object) -> str:
    """An argument as one string: a Codex command list as the line it runs (`["bash", "-lc", "ls"]` is `ls`)."""
    if not isinstance(value, list):
        return str(value)
    words = [str(w) for w in value]
    if len(words) == 3 and words[0].rsplit("/", 1)[-1] in SHELLS and words[1] in ("-c", "-lc"):
        return words[2]
    return " ".join(words)


def spoken_by(text: str) -> str:
    """Who wrote a text block of a user message: "rhapsody" (its own `[rhapsody] …` messages), "tool" (an
    imported session's tool, see TOOL_TAGS) or "human"."""
    head = text.lstrip()
    if head.startswith(HARNESS_PREFIX):
        return "rhapsody"
    return "tool" if head.startswith(TOOL_TAGS) else "human"


def first_line(text: str, width: int = 160) -> str:
    """The first non-empty line of `text`, cut to `width`."""
    return next((one_line(visible(t), width) for t in text.splitlines() if t.strip()), "")


# -- tool calls -------------------------------------------------------------------------


def call_title(call: ToolUseBlock) -> str:
    """A call as one readable line, its outcome left out: the tool and its key argument (`bash ls -la`)."""
    return f"{call.name} {key_argument(call)}".rstrip()


def tool_title(view: ToolView, reason: str = "") -> str:
    """tool, key argument, outcome and the tool's own time (never the human's wait), then "output capped"
    when a cap cut the output's middle; a refusal or failure says its reason cut to 100 characters, or
    `reason` when given (the whole of it)."""
    head = call_title(view.call)
    seconds = f"({view.duration_ms / 1000:.1f} s)" + (" · output capped" if original_size(view.output) else "")
    why = reason or first_line(view.output, 100)
    outcome = {
        "running": "… running",
        "asking": "… waiting for your answer",
        "interrupted": "→ interrupted",
        "denied": _denied(why),
        "exit": f"→ exit {view.exit_code} {seconds}",
        "error": f"→ error {seconds}: {why}",
        "ok": f"→ ok {seconds}",
    }[view.state]
    title = f"{head} {outcome}"
    return f"⊘ {title}{STRIPPED}{view.recall}" if view.recall else title


def _denied(why: str) -> str:
    """`→ denied` with its reason, saying "denied" once when the reason already does."""
    if not why:
        return "→ denied"
    return f"→ {why}" if why.startswith("denied") else f"→ denied: {why}"


def tool_line(view: ToolView) -> Line:
    """The transcript line of a tool call; `full` carries the whole refusal or failure reason."""
    reason = whole_reason(view.output) if view.state in ("error", "denied") else ""
    title = tool_title(view)
    full = tool_title(view, reason) if reason else ""
    body = f"{visible(view.proposed)}\n\n{view.output}" if view.proposed else view.output
    body = f"recall {view.recall}\n\n{body}" if view.recall else body  # the id, whatever the width
    return Line("tool", title, body=body, key=view.call.id, state=view.state, reason=reason,
                full=full if full != title else "")


def whole_reason(text: str, cap: int = 4000) -> str:
    """A refusal or failure reason on one line, control characters made visible, uncut up to `cap`."""
    return one_line(visible(text), cap)


OUTCOME = re.compile(r" (… running|… waiting for your answer|→ interrupted|→ ok \(|→ exit -?\d+ \(|→ error \(|→ denied)")


def fit_tool_title(title: str, width: int) -> str:
    """A tool line cut to `width` columns: a stripped call's recall id goes first, then the reason of a
    refusal or failure (the unfolded body holds both whole), then the command or path, so the tool, its
    argument and its state stay in view."""
    if len(title) <= width or width < 20:
        return title
    if STRIPPED in title:
        title = title[: title.rindex(STRIPPED)] + " · stripped"
        if len(title) <= width:
            return title
    found = list(OUTCOME.finditer(title))
    if not found:
        return title
    head, outcome = title[: found[-1].start()], title[found[-1].start():]
    state, sep, reason = outcome.partition(": ")
    if sep and len(head) + len(state) + 3 <= width:  # 3: ": …"
        room = width - len(head) - len(state) - 2
        return f"{head}{state}: {reason[: room - 1]}…"
    outcome = f"{state}: …" if sep else outcome
    room = max(8, width - len(outcome) - 1)
    return (head[: room - 1] + "…" if len(head) > room else head) + outcome


def unfolded_title(title: str) -> str:
    """A refused or failed call's line without its reason, for the head of its unfolded body, which holds
    the reason whole: the message shows once (`bash x → error (0.1 s)`, `… → denied by the human`)."""
    found = list(OUTCOME.finditer(title))
    if not found:
        return title
    head, outcome = title[: found[-1].start()], title[found[-1].start():]
    mark = STRIPPED if STRIPPED in outcome else " · stripped" if outcome.endswith(" · stripped") else ""
    tail = outcome[outcome.rindex(mark):] if mark else ""
    outcome = outcome[: len(outcome) - len(tail)]
    state, sep, _ = outcome.partition(": ")
    if outcome.startswith(" → denied") and not sep:
        state = " → denied"  # the reason says "denied..." itself: the body shows it
    return head + state + tail


def finished_view(event: ev.ToolFinished) -> ToolView:
    """The view of a finished call, from its event (which carries the diff it applied or proposed)."""
    if event.refused:
        return ToolView(event.call, "denied", 0, None, event.refused, proposed=event.proposed)
    return ToolView(event.call, _state(event.is_error, event.exit_code), event.duration_ms, event.exit_code,
                    with_diff(event.output, event.diff))


def with_diff(output: str, diff: str) -> str:
    """A write's or edit's output followed by the diff it applied, as its unfolded body shows it."""
    return f"{output}\n\n{visible(diff)}" if diff else output


def _state(is_error: bool, exit_code: int | None) -> str:
    if exit_code is not None:
        return "exit"
    return "error" if is_error else "ok"


# -- seams and cuts -----------------------------------------------------------------------


def seam_line(record: rec.Seam) -> str:
    """The before → after figures of a seam (context in the one definition: estimated tokens).

    When the seam knows the figure at the moment the handoff was asked, it leads: a small
    session's context can rise across a seam (the field note and its index outweigh the
    stripped traffic), and the figures the status bar showed must add up with the divider's.
    """
    before, after = record.before, record.after
    reduction = 1 - after.request_bytes / before.request_bytes if before.request_bytes else 0.0
    size = f"{before.request_bytes:,} → {after.request_bytes:,} bytes, −{reduction:.0%}"
    asked = record.asked_est_tokens
    if asked is not None:  # the status bar's figures before the key and after the seam, then the two steps
        figures = (f"context ~{asked:,} → ~{after.est_tokens:,} tokens (the handoff and its note added "
                   f"~{before.est_tokens - asked:,}, the strip took ~{before.est_tokens - after.est_tokens:,}; "
                   f"{size})")
    else:
        figures = f"context ~{before.est_tokens:,} → ~{after.est_tokens:,} tokens ({size})"
    window = "at the window, stripped first (the note follows): " if record.window else ""
    return (f"seam {record.seam}: {window}{figures}, "
            f"tool calls {before.tool_use} → {after.tool_use}, text blocks kept {after.text_blocks}")


def seam_entry(record: rec.Seam, root: Path) -> Line:
    """A divider carrying the seam's figures; its body is the field note."""
    note = ""
    if record.note_path:
        path = root / record.note_path
        # a history can be committed by a cloned repository: a note of rhapsody's own folder only (`.env` is not one)
        text = read_own(root, path) if _note_place(record.note_path) else None
        note = text if text is not None else f"(note {path} is missing)"
    return Line("seam", f"──── {seam_line(record)} ────", body=note, key=str(record.seam))


def _note_place(note_path: str) -> bool:
    """Whether a seam record's note path is where micro_handoff writes field notes: `.rhapsody/notes/NAME.md`."""
    parts = note_path.split("/")
    return len(parts) == 3 and parts[:2] == [".rhapsody", "notes"] and parts[2].endswith(".md") and ".." not in parts


def cut_line(record: rec.Prune) -> Line:
    """A rolling cut, or the room made for the note at the window: how many calls left and what the context
    went to."""
    b, a = record.before, record.after
    what = "at the window, room for the field note" if record.reason.startswith("at the window") else "rolling cut"
    return Line("notice", f"── {what}: {counted(len(record.ids), 'older call')} left the context "
                          f"(~{b.est_tokens:,} → ~{a.est_tokens:,} tokens)")


def undo_text(record: rec.Unseam) -> str:
    """What `/unhandoff` says: the seam undone, and whether what came back is exactly what left."""
    head = f"seam {record.seam} undone: its tool traffic is back in context"
    n = record.returned_calls or 0
    if record.verified is None:
        return f"{head} ({counted(n, 'call')}; not verified: the seam recorded no hash of what it stripped)"
    if record.verified:
        return f"{head}; verified: the {counted(n, 'call')} put back {'hashes' if n == 1 else 'hash'} to the SHA-256 the seam recorded ({(record.returned_sha256 or '')[:12]}…)"
    return f"{head}; NOT VERIFIED: the {counted(n, 'call')} put back {'does' if n == 1 else 'do'} not hash to what the seam recorded"


def unseam_line(record: rec.Unseam) -> Line:
    """A seam put back by /unhandoff."""
    return Line("notice", undo_text(record), key=str(record.seam), state="undone")


# -- hints ------------------------------------------------------------------------------


def hint_line(hint_id: str, text: str, where: str = "") -> Line:
    """A hint: pending (where = "") or where it was delivered."""
    state = f"delivered · {where}" if where else "pending"
    return Line("hint", f"✎ {hint_id} [{state}] {text}", body=text, key=hint_id, state="delivered" if where else "pending")


def pending_hint(hint_id: str, text: str, mode: str) -> Line:
    """A hint just typed, with where it will land."""
    where = "end of turn" if mode == "queue" else "next tool boundary"
    return replace(hint_line(hint_id, text), text=f"✎ {hint_id} [pending · {where}] {text}")


# -- events -------------------------------------------------------------------------------


def violation_line(name: str, words: int, required: int, total: int | None = None) -> Line:
    """A call refused for missing narration."""
    tail = f" (violations this session: {total})" if total is not None else ""
    return Line("violation", f"✗ {name} not run: {counted(words, 'word')} of narration, {required} required{tail}")


def event_lines(event: ev.Event) -> list[Line]:
    """The lines one loop event adds (streamed text and bookkeeping events add none); every event has its case."""
    match event:
        case ev.ToolStarted():
            return [tool_line(ToolView(event.call))]
        case ev.ToolFinished():
            return [tool_line(finished_view(event))]
        case ev.NarrationViolation():
            return [violation_line(event.call.name, event.words, event.required, event.total)]
        case ev.Retrying():
            asked = f" (server asked {event.asked:g} s)" if event.asked is not None and event.asked > event.delay else ""
            return [retry_line(event.attempt, event.delay, event.reason, asked)]
        case ev.ContextPruned():
            return [cut_line(event.record)]
        case ev.HandoffFailed():
            return [handoff_failed_line(event.reason)]
        case ev.Failed():
            return [error_line(event.message)]
        case ev.Interrupted():
            return [Line("interrupted", INTERRUPTED_TEXT)]
        case ev.LimitsExceeded():
            return [Line("error", f"■ {limit_line(event)}")]
        case ev.Notice():
            return [Line("notice", f"! {event.text}")]
        case ev.DenialDelivered():
            return [denial_line(event.text)]
        case ev.HarnessSaid():
            return [harness_line(event.text)]
        case ev.ImagesAttached():
            return [Line("user", f"  {text}") for text in event.labels]
        case ev.TodoUpdated():
            return [todo_line(event.items)]
        case ev.FilesAttached():
            return [line for text in event.texts if (line := attached_line(text))]
        case ev.SubagentStarted():
            return [subagent_started_line(event.id, event.model, event.mode, event.task)]
        case ev.SubagentEnded():
            return [Line("subagent", f"⤶ sub-agent {event.id} {event.status}: {one_line(event.summary, 160)}",
                         key=event.id)]
        case ev.SubagentStep():
            return step_lines(event)
        case (ev.TurnStarted() | ev.TextDelta() | ev.ThinkingDelta() | ev.BlockStopped() | ev.RetryCountdown()
              | ev.ModelResponse() | ev.RequestSent() | ev.UsageReported() | ev.HintDelivered() | ev.MemoryReminded()
              | ev.HandoffAsked() | ev.SeamCommitted() | ev.TurnEnded() | ev.ApprovalAsked() | ev.ShellRan()
              | ev.PlanReviewAsked() | ev.Idle()):
            return []  # streamed text, bookkeeping, or shown by a front end's own widget (a seam, a question)
        case _:
            assert_never(event)


SUBAGENT_INDENT = "  │ "
"""What a sub-agent's step lines begin with, under its call: plain mode prints them so, the app folds them."""


def subagent_started_line(sid: str, model: str, mode: str, task: str) -> Line:
    """A sub-agent started: its id, model, mode and task (live and on resume)."""
    return Line("subagent", f"⤷ sub-agent {sid} ({model}, {mode}): {one_line(visible(task), 140)}", key=sid,
                body=task)


def step_lines(step: ev.SubagentStep) -> list[Line]:
    """A sub-agent's step as indented lines: its finished calls, its refusals and its words once each reply is whole."""
    inner = step.step
    match inner:
        case ev.ModelResponse():
            text = "\n".join(t for t in inner.message.texts() if t.strip())
            return [Line("subagent", SUBAGENT_INDENT + visible(one_line(text, 200)), body=text, key=step.id)] if text else []
        case ev.ToolStarted() | ev.SubagentStep() | ev.TodoUpdated():
            return []
        case _:  # the rest as the agent's own lines show them, indented (event_lines' match is exhaustive)
            return [Line("subagent", SUBAGENT_INDENT + (f"⏺ {line.full or line.text}" if line.kind == "tool"
                                                        else line.text),
                         body=line.body, key=step.id, state=line.state) for line in event_lines(inner)]


def subagent_record_line(record: rec.Subagent) -> Line:
    """A sub-agent's `subagent` record in a rebuilt transcript: started, or how it ended with what it spent."""
    if record.state == "started":
        return subagent_started_line(record.id, record.model, record.mode or "imported", record.task)
    spent = dollars(record.cost_usd) if record.priced else "cost unknown"
    return Line("subagent", f"⤶ sub-agent {record.id} {record.state}: {counted(record.tool_calls, 'tool call')}, "
                            f"{spent}, ~{record.kept_out_tokens:,} tokens of traffic kept out · session {record.session}",
                key=record.id)


def todo_line(items: Sequence[Mapping[str, str]]) -> Line:
    """The todo list as the agent left it: a head with the count, then one line per item (live and on resume)."""
    typed = [rec.TodoItem.model_validate(i) for i in items]
    shown = [visible(one_line(text, 100)) for text in todo.lines(typed)]
    return Line("todo", "\n".join([f"☰ {todo.summary(typed)}", *(f"  {text}" for text in shown)]))


def attached_line(text: str) -> Line | None:
    """A file or folder the human attached: one folded line (`attached README.md (1.2 KB)`), its text the body."""
    found = attachment(text)
    return Line("attached", found.label(), body=found.body) if found else None


def retry_line(attempt: int, delay: float, reason: str, asked: str = "") -> Line:
    """A request being retried, live (with what the server asked for) and on resume."""
    return Line("retry", f"↻ retry {attempt} in {delay:.1f} s{asked}: {reason}")


def handoff_failed_line(reason: str) -> Line:
    """A handoff that ended without a seam, live and on resume."""
    return Line("error", f"✗ handoff: {reason}")


def error_line(message: str) -> Line:
    """A failure the loop reported, live and on resume."""
    return Line("error", f"✗ {message}")


def denial_line(words: str) -> Line:
    """The human's own words with a denial, as the model received them."""
    return Line("user", f"› {words}", body=words)


def dollars(amount: float) -> str:
    """An amount in USD: cents from a dollar up, four decimals below."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def limit_line(event: ev.LimitsExceeded) -> str:
    """Which limit ended the turn, and how to go on."""
    if event.limit == "max_cost_usd":
        reached = f"{dollars(event.value)} spent of max_cost_usd {dollars(event.maximum)}"
    elif event.limit == "max_tool_calls":
        reached = f"{counted(int(event.value), 'tool call')}, max_tool_calls {event.maximum:.0f}"
    elif event.limit == "max_tokens_spent":
        reached = f"{int(event.value):,} tokens, max_tokens_spent {event.maximum:,.0f}"
    else:
        reached = f"{counted(int(event.value), 'request')} this turn, max_steps_per_turn {event.maximum:.0f}"
    return f"limit reached: {reached}; the turn stopped (raise the setting to go on)"


def print_event(event: ev.Event, out: TextIO) -> None:
    """One event as the line-based front ends (plain, headless text) show it."""
    match event:
        case ev.TextDelta():
            out.write(visible(event.text))  # the model's words never drive the terminal (OSC 52, cursor moves)
        case ev.BlockStopped():
            if event.kind == "text":
                out.write("\n")
        case ev.SeamCommitted():
            out.write(f"  {seam_line(event.record)}\n")
            if event.shelved:
                out.write(plain(_other_lines(event.shelved, Path("."), {}, set())[0]) + "\n")
        case ev.HintDelivered():
            noun = "hint" if len(event.hint_ids) == 1 else "hints"
            out.write(f"  ✓ {noun} {', '.join(event.hint_ids)} delivered ({event.where})\n")
        case ev.ToolStarted() | ev.DenialDelivered():
            pass  # a denial's words are already whole on its tool line ("→ denied by the human: …")
        case _:
            for line in event_lines(event):
                out.write(plain(line) + "\n")


def plain(line: Line) -> str:
    """A line as the line-based front ends print it (a tool line says why a call was refused or failed), control
    characters escaped: a notice can carry a name a project chose (an MCP server's, in `.mcp.json`)."""
    return visible(f"  ⏺ {line.full or line.text}" if line.kind == "tool" else f"  {line.text}")


# -- history -------------------------------------------------------------------------------


def record_lines(records: Sequence[rec.Record], root: Path, session_id: str,
                 conversation: Conversation | None = None, approvals: bool = False) -> list[tuple[int, Line]]:
    """Every line of a recorded session, each with the index of the record it came from.

    The records are typed already (read once, never parsed again here). `conversation` is the session's own, folded from
    the same records (folded here when not given): it knows what the latest seam and the
    rolling cuts took out. `approvals`: also a line for each call the human allowed (an
    export; the app showed the question itself when it was asked).
    """
    with collector_paused():  # tens of thousands of lines and no cycles (see core/session/history.py)
        return _typed_lines(records, root, session_id, conversation or Conversation.of(records), approvals)


def _typed_lines(records: Sequence[rec.Record], root: Path, session_id: str,
                 conversation: Conversation, approvals: bool) -> list[tuple[int, Line]]:
    boundary, pruned, parsed = conversation.boundary(), conversation.pruned, conversation.messages
    hints = {r.id: r.text for r in records if isinstance(r, rec.Hint)}
    delivered: dict[int | None, list[tuple[str, str, str]]] = {}
    for r in records:
        if isinstance(r, rec.HintsDelivered):
            delivered.setdefault(r.message_seq, []).extend((i, hints.get(i, ""), r.where) for i in r.ids)
    landed = {i for d in delivered.values() for i, _, _ in d}
    calls = _call_views(records, parsed)
    out: list[tuple[int, Line]] = []
    index = 0
    for n, record in enumerate(records):
        match record:
            case rec.MessageAdded():
                lines = _message_lines(parsed[index], delivered.get(record.seq, []), calls, session_id,
                                       index < boundary, pruned)
                if index in conversation.abandoned:
                    lines = rewound_lines(lines)
                out += [(n, line) for line in lines]
                index += 1
            case rec.Resumed():
                out.append((n, resumed_line(session_id, index, records[n - 1].ts if n else record.ts)))
            case rec.Permission():
                out += [(n, approval_line(record))] if approvals and _approved(record) else []
            case _:
                out += [(n, line) for line in _other_lines(record, root, hints, landed)]
    return out


def rewound_lines(lines: list[Line]) -> list[Line]:
    """A message a conversation rewind left behind: one dimmed line that unfolds to what it said."""
    if not lines:
        return []
    return [Line("rewound", f"↶ {one_line(lines[0].text, 200)}", body="\n".join(plain(line).strip() for line in lines))]


def rewind_line(record: rec.ConversationRewind | rec.Restore) -> Line:
    """A `rewind` record (the conversation went back) or a finished `restore` (files went back)."""
    if isinstance(record, rec.ConversationRewind):
        return Line("notice", f"↶ conversation rewound to before › {one_line(record.text, 120)}; "
                              "what followed stays in the history (dimmed above) and in recall")
    return Line("notice", f"↶ files restored to a checkpoint ({counted(record.changed or 0, 'path')} changed)")


def _fact(record: rec.Record, name: str, default: Any) -> Any:
    """A fact an open kind carries without declaring it (a tool's `diff`, an import's `source_session`)."""
    return (record.model_extra or {}).get(name, default)


def notice_line(record: rec.NoticeShown) -> Line:
    """A `notice` record: the slash command the human typed, a command's output, or a note of the app's own."""
    text = record.text
    if record.command:  # echoed above its output, so scrolling back tells which query gave which hits
        return Line("user", f"› {text}", body=text)
    if record.shown == "as is":
        return Line("error" if record.error else "notice", text)
    return Line("notice", f"! {text}")


def approval_line(record: rec.Permission) -> Line:
    """A call the human allowed when asked (a `permission` record), with what they allowed for the session."""
    reason = record.reason
    head = f"✓ {record.tool} {one_line(visible(record.argument), 90)}".rstrip()
    return Line("approval", f"{head}: {reason}", body=reason, state="allowed")


def _approved(record: rec.Permission) -> bool:
    return record.by == "human" and record.decision == "allow"


def resumed_line(session_id: str, messages: int, last_ts: float) -> Line:
    """Where a session was resumed (`--continue`, `--resume`): the `resumed` record each resume writes;
    `last_ts`: the time of the record before it."""
    import time

    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(last_ts))
    return Line("notice", f"· resumed session {session_id} ({counted(messages, 'message')}, last active {when})")


def _other_lines(record: rec.Record, root: Path, hints: dict[str, str], landed: set[str]) -> list[Line]:
    match record:  # the kinds a history holds most of come first: each case is an isinstance check
        case rec.RequestMade() | rec.UsageRecorded() | rec.ToolRun():
            return []
        case rec.Seam():
            return [seam_entry(record, root)]
        case rec.Unseam():
            return [unseam_line(record)]
        case rec.Prune():
            return [cut_line(record)]
        case rec.Violation():
            return [violation_line(record.name, record.words, record.required)]
        case rec.TurnInterrupted():
            return [Line("interrupted", INTERRUPTED_TEXT)]
        case rec.Retry():
            return [retry_line(record.attempt, record.delay, record.reason)]
        case rec.HandoffAbandoned():
            from rhapsody.core.session.handoff_state import failed_reason

            return [handoff_failed_line(failed_reason(record.reason))]
        case rec.Error():
            return [error_line(record.message)]
        case rec.NoticeShown():
            return [notice_line(record)]
        case rec.ConversationRewind():
            return [rewind_line(record)]
        case rec.Restore():
            return [rewind_line(record)] if record.state == "done" else []
        case rec.CheckpointFailed():
            return [error_line(f"checkpoint not taken: {record.reason}")]
        case rec.SeamFailed():
            old = not record.reason.startswith(("strip abandoned", "rolling cut abandoned"))  # before the live wording
            return [handoff_failed_line(f"{'strip abandoned, context unchanged: ' if old else ''}{record.reason}")]
        case rec.Hint():
            return [] if record.id in landed else [hint_line(record.id, record.text)]
        case rec.Import() | rec.Compaction():
            return [imported_line(record)]
        case rec.Todo():
            return [todo_line([i.model_dump() for i in record.items])]
        case rec.Subagent():
            return [subagent_record_line(record)]
        case rec.Shelve():
            from rhapsody.core.session.shelf import one_line

            return [Line("notice", f"! {one_line(record.seams, record.messages, record.before_tokens - record.after_tokens)}")]
        case (rec.SessionStarted() | rec.MessageAdded() | rec.HintsDelivered()
              | rec.Permission() | rec.PermissionMode() | rec.Denial() | rec.MemoryReminder() | rec.Handoff()
              | rec.LegacyHandoffAsked() | rec.SeamTokens() | rec.ThinkingCut() | rec.SeamNote() | rec.ModelSwitched() | rec.Tools()
              | rec.Resumed() | rec.Hook() | rec.Checkpoint() | rec.KeptAside() | rec.Limit() | rec.Other()):
            return []  # no line of their own (messages, resumes and approvals are drawn by `_typed_lines`)
        case _:
            assert_never(record)


def imported_line(record: rec.Import | rec.Compaction) -> Line:
    """Where an imported session came from (`import`), and where its source compacted (`compaction`)."""
    if isinstance(record, rec.Import):
        return Line("notice", f"· imported {record.format} session {_fact(record, 'source_session', '')} "
                              f"from {record.source}")
    trigger = _fact(record, "trigger", None)
    how = f", {trigger}" if trigger else ""
    return Line("notice", f"· the source compacted its context here{how}: its model saw only the summary below "
                          "and what follows (what came before stays recallable)")


def _call_views(records: Sequence[rec.Record], parsed: list[Message]) -> dict[str, ToolView]:
    runs = {r.tool_use_id: r for r in records if isinstance(r, rec.ToolRun)}
    interrupted = {i for r in records if isinstance(r, rec.TurnInterrupted) for i in r.open}
    unrun = {r.tool_use_id for r in records if isinstance(r, rec.Violation)}
    results = {b.tool_use_id: b for m in parsed if m.role == "user" for b in m.content if isinstance(b, ToolResultBlock)}
    views: dict[str, ToolView] = {}
    for message in parsed:
        for call in message.tool_uses():
            views[call.id] = ToolView(call, "violation") if call.id in unrun else \
                _call_view(call, runs.get(call.id), results.get(call.id), call.id in interrupted)
    return views


def _call_view(call: ToolUseBlock, run: rec.ToolRun | None, result: ToolResultBlock | None,
               interrupted: bool) -> ToolView:
    output = result.text() if result else "(no result)"
    if interrupted or run is None:
        state = "interrupted" if interrupted or result is None or result.is_error else "ok"
        return ToolView(call, state, 0, None, output)
    if run.refused:
        return ToolView(call, "denied", 0, None, run.refused, proposed=run.proposed_diff or "")
    state = _state(bool(result and result.is_error), run.exit_code)
    return ToolView(call, state, run.duration_ms, run.exit_code, with_diff(output, run.diff or ""))


def _message_lines(message: Message, hints: list[tuple[str, str, str]], calls: dict[str, ToolView],
                   session_id: str, stripped: bool, pruned: set[str]) -> list[Line]:
    out: list[Line] = []
    hint_texts = {text: (i, where) for i, text, where in hints}
    for block in message.content:
        if isinstance(block, TextBlock) and message.role == "user":
            out.append(attached_line(block.text) or _user_text(block.text, hint_texts))
        elif isinstance(block, TextBlock):
            out.append(Line("assistant", block.text))
        elif isinstance(block, ThinkingBlock):
            out.append(Line("thinking", "thinking", body=block.thinking))
        elif block.type == "image" and message.role == "user":
            out.append(Line("user", f"  {image_label(block.dump())}"))
        elif isinstance(block, ToolUseBlock):
            view = calls.get(block.id, ToolView(block, "interrupted"))
            if view.state == "violation":  # the narration rule refused it: its violation line says so, as live
                continue
            gone = (stripped or block.id in pruned) and block.name != "micro_handoff"
            out.append(tool_line(replace(view, recall=f"{session_id}:{block.id}" if gone else "")))
    return out


def _user_text(text: str, hints: dict[str, tuple[str, str]]) -> Line:
    if text in hints:
        hint_id, where = hints[text]
        return hint_line(hint_id, text, where or "delivered")
    if spoken_by(text) != "human":
        return harness_line(text)
    return Line("user", f"› {text}")


def harness_line(text: str) -> Line:
    """A message the harness itself sent to the model."""
    return Line("harness", f"⚙ {one_line(text, 240)}", body=text)


def full_result(records: Sequence[rec.Record], tool_use_id: str) -> str | None:
    """The whole result of one call as the history holds it."""
    for record in rec.of(records, rec.MessageAdded):
        for block in record.content if record.role == "user" else []:
            if isinstance(block, ToolResultBlock) and block.tool_use_id == tool_use_id:
                return block.text()
    return None
