"""The `micro_handoff` and `recall` tools.

`micro_handoff` takes the agent's field note, appends facts the harness measures itself
(git state, files touched and commands run since the last seam), saves it as Markdown in
`.rhapsody/notes/` and returns it with an index of what the seam will strip. The strip
itself happens when the agent ends its turn (the loop commits it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from rhapsody.core.session import recall, todo
from rhapsody.core.session import records as rec
from rhapsody.core.session.last_failure import last_failure
from rhapsody.core.session.handoff import stripped_index
from rhapsody.core.accounting.seam_cost import FACTS_CAP_CHARS
from rhapsody.core.toolbox.protocol import NoteWritten
from rhapsody.core.session.history import private_dir, state_dir, write_private
from rhapsody.core.session.messages import ToolResultBlock
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.protocol import Tool, ToolContext, ToolFailure, ToolOutcome
from rhapsody.prompts import load
from rhapsody.tools.git import git_facts

MAX_COMMANDS = 20
MAX_COMMAND_CHARS = 900
COMMAND_LINE_CHARS = 240
"""One command in the list at most this long (the whole of it stays recallable)."""
LIST_CHARS = 300
"""Each list of paths (dirty, read, written) at most this long; its count is always given."""
FAILURE_TAIL_CHARS = 700
FAILURE_COMMAND_CHARS = 300
FACTS_CHARS = FACTS_CAP_CHARS
"""The harness facts in all (about 650 tokens): every note stays in the context for good, so its size
is paid on every later request (docs/performance.md, "The size a field note aims at")."""


class FieldNote(BaseModel):
    done: list[str] = Field(description="What is finished. Mark each claim [measured] or [inferred].")
    open: list[str] = Field(description="Next steps first, then what is still open; exact paths with line numbers.")
    went_wrong: list[str] = Field(default_factory=list, description="What was tried and failed or misled, and how it was found; errors verbatim.")
    decisions: list[str] = Field(default_factory=list, description="Decisions taken, each with its reason.")
    working_directory: str = Field(description="The directory you work in and which directory is the git repository.")
    tool_quirks: list[str] = Field(default_factory=list, description="Tools that behave unexpectedly (exit codes, paths, flags).")
    recipes: list[str] = Field(default_factory=list, description="Exact commands worth keeping, verbatim.")
    reasoning: str = Field("", description="Only reasoning that is load-bearing and non-obvious.")


NOT_REQUESTED = ("No micro-handoff is requested now (none was asked for, or the human cancelled the request): "
                 "nothing was written and nothing will be stripped. Carry on with the task.")


class MicroHandoff(Tool):
    """Write the field note; the harness strips tool traffic at the end of the turn."""

    name: ClassVar[str] = "micro_handoff"
    description: ClassVar[str] = load("tools/micro_handoff")
    Input: ClassVar[type[BaseModel]] = FieldNote
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = False

    async def run(self, args: FieldNote, ctx: ToolContext) -> ToolOutcome:
        session = ctx.session
        if not session.handoff.pending:  # never asked, or the human cancelled the request (Esc)
            return ToolOutcome(NOT_REQUESTED, is_error=True)
        stripped = session.handoff.after_strip  # the seam made at the window, before this note
        number = stripped or len(session.conversation.seams) + len(session.conversation.undone) + 1
        facts = await asyncio.to_thread(harness_facts, ctx.root, session)
        note = render_note(args, number, session.id, facts)
        folder = private_dir(state_dir(ctx.root) / "notes")
        path = folder / f"{session.id}-seam{number}.md"
        write_private(path, note)
        if stripped:
            content = f"{note}\n{load('window_done')}"
        else:
            index = stripped_index(session)
            content = f"{note}\n## What the seam strips (fetch any with recall by id)\n\n{index}\n\n{load('handoff_done')}"
        return NoteWritten(content, note_path=str(path.relative_to(ctx.root)), seam=number, note=note)


def _bullets(items: list[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "- (none)"


def render_note(note: FieldNote, number: int, session_id: str, facts: str) -> str:
    """The field note as Markdown: the agent's sections, then the harness's facts."""
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    parts = [
        f"# Field note, seam {number} (session {session_id}, {stamp})",
        f"## Next steps and open\n{_bullets(note.open)}",
        f"## Done\n{_bullets(note.done)}",
        f"## What went wrong\n{_bullets(note.went_wrong)}",
        f"## Decisions\n{_bullets(note.decisions)}",
        f"## Working directory and repository\n{note.working_directory}",
        f"## Tool quirks\n{_bullets(note.tool_quirks)}",
        f"## Recipes\n{_bullets(note.recipes)}",
    ]
    if note.reasoning.strip():
        parts.append(f"## Load-bearing reasoning\n{note.reasoning}")
    parts.append(facts)
    return "\n\n".join(parts) + "\n"


def harness_facts(root: Path, session: Session) -> str:
    """Facts measured by the harness since the last seam, bounded in size."""
    git = git_facts(root)
    since = _since_last_seam(session.records, session.handoff.after_strip)
    reads = sorted({r.path for r in since if r.op == "read" and r.path})
    writes = sorted({r.path for r in since if r.op == "write" and r.path})
    lines = ["## Harness facts (measured by rhapsody, not written by the agent)"]
    if git.get("git_root"):
        lines.append(f"- git root: {git['git_root']}; branch {git['branch']}; HEAD {git['head']}")
        lines.append(_listed("dirty files", [d.strip() for d in git["dirty"]]))
    else:
        lines.append(f"- git {git['refused']}" if git.get("refused") else f"- {root} is not in a git repository")
    lines.append(_listed("files written", writes))
    lines.append(_listed("files read", reads))
    delegated = [_delegated(r) for r in since if r.subagent]
    if delegated:  # their own calls are in their own histories: the note would not see what they changed
        lines.append(_listed("sub-agents", delegated))
    lines.append(_todo_facts(session))
    failure = last_failure(since, _outputs(session), FAILURE_TAIL_CHARS, FAILURE_COMMAND_CHARS)
    if failure:
        lines.append(failure)
    lines.append(_commands(since))  # last: where the net cuts, it cuts whole command lines
    return _bounded("\n".join(lines))


def _delegated(run: rec.ToolRun) -> str:
    """A sub-agent run since the seam: `sa1 done (session ID; changed a.py)`."""
    changed = run.subagent_changed or []
    what = f"; changed {' '.join(changed)}" if changed else ""
    return f"{run.subagent} {run.subagent_status or ''} (session {run.subagent_session or ''}{what})"


def _listed(label: str, items: list[str], chars: int = LIST_CHARS) -> str:
    """`- label (N): a, b, …`, cut at `chars` with how many were left out."""
    shown: list[str] = []
    for item in items:
        if sum(len(s) + 2 for s in shown) + len(item) > chars:
            return f"- {label} ({len(items)}): " + ", ".join(shown) + f", … {len(items) - len(shown)} more"
        shown.append(item)
    return f"- {label} ({len(items)}): " + (", ".join(shown) or "none")


def _bounded(text: str, chars: int = FACTS_CHARS) -> str:
    """The facts at most `chars` long, cut at a line and saying so (each part is bounded: this is the net)."""
    if len(text) <= chars:
        return text
    cut = text[: text.rfind("\n", 0, chars - 60)]
    return f"{cut}\n- … harness facts cut at {chars:,} characters"


def _todo_facts(session: Session) -> str:
    """The todo list as the agent last wrote it (the harness's record, not the agent's memory of it)."""
    items = session.todos.items()
    if not items:
        return "- todo list: none written"
    return "\n".join([f"### Todo list ({todo.summary(items)})", *(f"- {line}" for line in todo.lines(items))])


def _outputs(session: Session) -> dict[str, str]:
    """Tool result text by tool_use id, from the whole conversation (history keeps what a seam stripped)."""
    return {b.tool_use_id: b.text() for m in session.conversation.messages for b in m.content
            if isinstance(b, ToolResultBlock)}


def _since_last_seam(records: Sequence[rec.Record], note_of: int = 0) -> list[rec.ToolRun]:
    """Tool runs since the latest seam; `note_of`: the seam this note is for, made before it (at the window)."""
    start = 0
    for i, record in enumerate(records):
        if isinstance(record, rec.Seam) and record.seam != note_of:
            start = i + 1
    return list(rec.of(records[start:], rec.ToolRun))


def _commands(runs: list[rec.ToolRun]) -> str:
    """Commands run, newest first, repeats folded, at most MAX_COMMANDS or MAX_COMMAND_CHARS."""
    folded: dict[tuple[str, str], int] = {}
    for run in reversed(runs):
        if not run.command:
            continue
        key = (run.command, _outcome(run))
        folded[key] = folded.get(key, 0) + 1
    out = ["### Commands run since the last seam (newest first, verbatim; a long one cut at …)"]
    used = 0
    for n, ((command, outcome), times) in enumerate(folded.items()):
        shown = command if len(command) <= COMMAND_LINE_CHARS else command[:COMMAND_LINE_CHARS] + " …"
        line = f"- `{shown}` → {outcome}" + (f" (×{times})" if times > 1 else "")
        if n >= MAX_COMMANDS or used + len(line) > MAX_COMMAND_CHARS:
            out.append(f"- … {len(folded) - n} more distinct commands cut (limit {MAX_COMMANDS} or {MAX_COMMAND_CHARS} chars)")
            break
        out.append(line)
        used += len(line)
    if len(out) == 1:
        out.append("- none")
    return "\n".join(out)


def _outcome(run: rec.ToolRun) -> str:
    """`exit N` where the run has an exit status; an imported command whose source stated none says only
    whether it failed."""
    if run.exit_code is not None:
        return f"exit {run.exit_code}"
    return "error" if run.is_error else "ok"


class RecallInput(BaseModel):
    query: str | None = Field(None, description="Words to search for in stripped tool calls and results.")
    id: str | None = Field(None, description="A recall id (session:tool_use_id) to fetch in full.")
    page: int = Field(1, ge=1, description="Page of a fetched call.")
    all_sessions: bool = Field(False, description="Also search the project's earlier sessions.")


class Recall(Tool):
    """Search or fetch tool calls and results that a seam took out of context."""

    name: ClassVar[str] = "recall"
    description: ClassVar[str] = load("tools/recall")
    Input: ClassVar[type[BaseModel]] = RecallInput
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = False

    async def run(self, args: RecallInput, ctx: ToolContext) -> ToolOutcome:
        write = not ctx.read_only
        if args.id:
            try:
                found = await asyncio.to_thread(recall.fetch, ctx.root, args.id, args.page, write)
            except recall.RecallIdError as exc:
                raise ToolFailure(str(exc)) from None
            if found is None:
                raise ToolFailure(f"no recallable call with id {args.id!r}")
            return ToolOutcome(found)
        if not args.query or not args.query.strip():
            raise ToolFailure("give a query to search, or an id to fetch")
        return ToolOutcome(await asyncio.to_thread(recall_text, ctx.root, ctx.session, args.query, args.all_sessions,
                                                   write=write))


def recall_text(root: Path, session: Session, query: str, all_sessions: bool, for_human: bool = False,
                write: bool = True) -> str:
    """Search results as text, one hit per paragraph; shared by the tool and `/recall`.

    The model reads each match marked with brackets. A person (`for_human`) reads the same
    snippet as it was written, unmarked, under a label saying where it matched: brackets
    inside a command would pass for part of it. Without `write` (read-only mode) no index is written.
    """
    if all_sessions:
        hits = recall.search_project(root, session.path, query, write=write)
    else:
        children = {r.session for r in rec.of(session.records, rec.Subagent)}
        hits = recall.search_session(root, session.path, query, children, write=write)
    if not hits:
        return f"no stripped tool call matches {query!r}"
    out = ["snippets as written; … marks where one was cut"] if for_human else []
    for hit in hits:
        day = time.strftime("%Y-%m-%d", time.gmtime(hit.ts))
        found = _hanging(f"{hit.column}: ", hit.verbatim) if for_human else f"result: {hit.snippet}"
        before = narration_before(hit.narration)
        before = _hanging("narration before: ", before) if for_human else f"narration before: {before}"
        out.append(f"{hit.id} ({hit.tool}, {day})\n  {found}\n  {before}")
    return "\n".join(out)


def _hanging(label: str, text: str) -> str:
    """`text` after `label`, its later lines indented under the text, not level with the next label."""
    return label + text.replace("\n", "\n" + " " * (2 + len(label)))


def narration_before(narration: str, width: int = 200) -> str:
    """The words that led to a call: the end of the narration before it, at most `width` characters,
    cut at a word boundary with `…` where its start was left out (shared by the model and `/recall`)."""
    text = narration.strip()
    if len(text) <= width:
        return text
    tail = text[-(width - 1):]
    space = tail.find(" ")
    if 0 <= space < width // 2:
        tail = tail[space + 1:]
    return "…" + tail.lstrip()
