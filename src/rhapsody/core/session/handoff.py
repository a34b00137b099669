"""The micro-handoff seam: commit (audited and measured), undo, and what a seam strips; rolling cuts.

Committing a seam records `{"kind": "seam", "boundary": N, ...}`; the history keeps every
message, and the view strips the first N. Before the record is written the stripped view
is audited: the authored text must hash the same and the conversation must stay valid.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

from collections.abc import Sequence

import hashlib
import json
from typing import Any

from rhapsody.core.session.context import build_request, measure
from rhapsody.core.errors import ModelError
from rhapsody.core.session.messages import Message, ToolResultBlock, ToolUseBlock
from rhapsody.core.model import Model
from rhapsody.core.session.rolling import RollingPolicy, plan_cut
from rhapsody.core.session.session_figures import reported_input
from rhapsody.core.session.images import for_request
from rhapsody.core.session.session import Session
from rhapsody.core.session.strip import HANDOFF_TOOL, authored_sha256, shape, validity_problems
from rhapsody.core.session.traffic_digest import left, traffic_sha256
from rhapsody.core.session import records as rec

INDEX_LINES = 30
INDEX_CHARS = 1800


class AuditFailed(Exception):
    """The stripped view lost authored text or broke the API's rules."""


def audit(before: list[Message], after: list[Message]) -> str:
    """Check a strip; returns the authored-text SHA-256 or raises AuditFailed."""
    sha_before, sha_after = authored_sha256(before), authored_sha256(after)
    if sha_before != sha_after:
        raise AuditFailed(f"authored text changed (sha256 {sha_before[:12]} -> {sha_after[:12]})")
    problems = validity_problems(after)
    if problems:
        raise AuditFailed(f"stripped conversation is invalid: {problems[0]}")
    return sha_after


def commit_seam(session: Session, note_path: str = "", window: dict[str, Any] | None = None) -> rec.Seam:
    """Strip everything so far; returns the seam record, or raises AuditFailed (nothing changed).

    `window`: the seam is the strip at the context window (what refused the request), made before its note.
    """
    conv = session.conversation
    boundary = len(conv.messages)
    before, after = conv.active(), conv.view(boundary)
    sha = audit(before, after)
    body_before = build_request(session.spec, before)
    body_after = build_request(session.spec, after)
    stripped = left(before, after)
    return session.append(rec.Seam(
        seam=len(conv.seams) + len(conv.undone) + 1,
        boundary=boundary,
        note_path=note_path,
        authored_sha256=sha,
        stripped_sha256=traffic_sha256(stripped),
        stripped_calls=len(stripped),
        before=shape(before, *measure(body_before)),
        after=shape(after, *measure(body_after)),
        reported_input_before=reported_input(session.figures.last_usage),
        window=window or None,
        asked_est_tokens=None if window else _when_asked(session.records)))


def _when_asked(records: Sequence[rec.Record]) -> int | None:
    """The context figure when the handoff was asked for, or None when unknown.

    That is the context the request for the note joined, recorded by the `asked` record: every
    tool result that came in while the handoff was wanted is in it, so the seam's "before"
    figure minus it is the handoff's own part only (the request, the agent's note call and its
    result with the index, its closing line). Histories written before the `asked` record held
    the figure fall back to the last request before the `wanted` record. When a seam, cut or
    undo moved the figure after that, no figure is claimed.
    """
    asked = _last_asked(records)
    if asked is not None and asked.est_tokens is not None:
        return asked.est_tokens
    wanted = max((i for i, r in enumerate(records) if isinstance(r, rec.Handoff) and r.state == "wanted"),
                 default=None)
    if wanted is None:
        return None
    for record in reversed(records[:wanted]):
        if isinstance(record, rec.RequestMade):
            return record.est_tokens
        if isinstance(record, (rec.Seam, rec.Prune, rec.Unseam)):
            return None
    return None


def _last_asked(records: Sequence[rec.Record]) -> rec.Handoff | None:
    """The `asked` record of the handoff under way (None: none since the last seam or undo)."""
    for record in reversed(records):
        if isinstance(record, rec.Handoff) and record.state == "asked":
            return record
        if isinstance(record, (rec.Seam, rec.Unseam)):
            return None
    return None


def prune(session: Session, ids: list[str], reason: str) -> rec.Prune:
    """Take these calls out of the view; audited like a strip. Raises AuditFailed (nothing changed)."""
    conv = session.conversation
    before = conv.active()
    after = conv.view(conv.boundary(), conv.pruned | set(ids))
    audit(before, after)
    stripped = left(before, after)
    return session.append(rec.Prune(ids=ids, reason=reason, stripped_sha256=traffic_sha256(stripped),
        stripped_calls=len(stripped),
        before=shape(before, *measure(build_request(session.spec, before))),
        after=shape(after, *measure(build_request(session.spec, after)))))


def roll(session: Session, policy: RollingPolicy) -> rec.Prune | None:
    """The rolling policy's batch cut, when working memory overflowed: the prune record, or None."""
    conv = session.conversation
    ids = plan_cut(conv.messages, conv.pruned, policy, conv.boundary())
    if not ids:
        return None
    try:
        record = prune(session, ids, "rolling context: working memory overflowed")
    except AuditFailed as exc:
        session.append(rec.SeamFailed(reason=f"rolling cut abandoned: {exc}"))
        return None
    if session.spec.thinking:
        session.cut_thinking("rolling cut changed the prefix")
    return record


async def count_seam_tokens(session: Session, model: Model, seam: int) -> None:
    """Record the count_tokens endpoint's exact figures on both sides of the latest seam."""
    before, after = seam_views(session)
    try:
        exact = [await model.count_tokens(build_request(session.spec, for_request(m, session.root))) for m in (before, after)]
    except ModelError as exc:
        session.append(rec.Error(message=f"count_tokens failed: {exc}"))
        return
    session.append(rec.SeamTokens(seam=seam, before=exact[0], after=exact[1]))


def seam_views(session: Session) -> tuple[list[Message], list[Message]]:
    """The active context just before and just after the latest seam."""
    conv = session.conversation
    previous = conv.seams[-2].boundary if len(conv.seams) > 1 else 0
    return conv.view(previous), conv.active()


def undo_seam(session: Session) -> rec.Unseam | None:
    """Put the last seam's stripped blocks back; thinking before this point is cut."""
    conv = session.conversation
    seams = conv.seams
    if not seams:
        return None
    previous = seams[-2].boundary if len(seams) > 1 else 0
    back = left(conv.view(previous), conv.active())
    returned = traffic_sha256(back)
    recorded = seams[-1].stripped_sha256
    return session.append(rec.Unseam(seam=seams[-1].seam, boundary=len(conv.messages), returned_sha256=returned,
                          returned_calls=len(back), verified=recorded == returned if recorded else None))


def stripped_calls(session: Session) -> list[tuple[ToolUseBlock, ToolResultBlock | None]]:
    """The tool calls the next seam will strip (not yet stripped, handoff calls excluded)."""
    conv = session.conversation
    results = {
        b.tool_use_id: b for m in conv.messages for b in m.content if isinstance(b, ToolResultBlock)
    }
    start = conv.boundary()
    calls = [
        b for i, m in enumerate(conv.messages[start:], start) if i not in conv.abandoned for b in m.content
        if isinstance(b, ToolUseBlock) and b.name != HANDOFF_TOOL
    ]
    return [(c, results.get(c.id)) for c in calls]


def arg_digest(value: Any, width: int = 60) -> str:
    """A one-line digest of tool arguments: the text itself when short, else head plus hash."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    if len(text) <= width:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{text[: width - 12]}…#{digest}"


def stripped_index(session: Session, only: set[str] | None = None) -> str:
    """One line per call the seam strips (`only`: of these calls): recall id, tool, argument digest, size,
    outcome."""
    lines: list[str] = []
    calls = [(c, r) for c, r in stripped_calls(session) if only is None or c.id in only]
    used = 0
    for call, result in calls:
        size = len(result.text()) if result else 0
        outcome = "no result" if result is None else ("error" if result.is_error else "ok")
        line = f"{session.id}:{call.id}  {call.name} {arg_digest(call.input)}  {size} chars  {outcome}"
        if len(lines) >= INDEX_LINES or used + len(line) > INDEX_CHARS:
            lines.append(f"… {len(calls) - len(lines)} more calls not listed; search them with recall")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines) if lines else "(no tool calls to strip)"
