"""The active context: a view of the history, and the request body built from it.

The history keeps every message; seams and thinking cuts are records that change what the
view shows, never what is on disk. `Conversation.active()` is the list of messages the
model sees: thinking dropped before the latest thinking cut, tool traffic stripped before
the latest active seam, messages before the latest `compaction` left out (an imported
session's source compacted its context there), empty messages dropped and same-role
neighbours merged.

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import assert_never

from rhapsody.core.session import records as rec
from rhapsody.core.session.messages import Message, TextBlock, compact_json
from rhapsody.core.session.strip import compact, drop_messages, drop_thinking_blocks, drop_tool_ids, shelve_blocks, strip_blocks
from rhapsody.core.session.tokens import estimate_chars
from rhapsody.core.json_types import JsonObject

EPHEMERAL = {"type": "ephemeral"}


@dataclass(frozen=True)
class Shelf:
    """The second window: the words of messages before `boundary` left the view, and their field notes
    before `notes_boundary` (0: every note stays); `notice` stands first in the view in their place."""

    boundary: int
    notice: Message
    notes_boundary: int = 0


def message_of(record: rec.MessageAdded) -> Message:
    """The message a record adds: one object per record (its blocks validated as read: not again), so every
    conversation folded from one history shares its messages and each message's cached size and digest."""
    found = _MESSAGES.get(id(record))
    if found is None or found[0]() is not record:
        if len(_MESSAGES) >= _MESSAGES_MAX:  # let go of the messages of histories long folded
            _MESSAGES.clear()
        found = _MESSAGES[id(record)] = (weakref.ref(record), Message(role=record.role, content=record.content))
    return found[1]


_MESSAGES: dict[int, tuple[weakref.ref[rec.MessageAdded], Message]] = {}
"""The message of each record folded lately, by the record's identity (a weak reference beside it tells a record
from a later one at the same address: a record read and folded once, as an import does, is not kept alive)."""
_MESSAGES_MAX = 1 << 16


def notice(text: str) -> Message:
    """The harness's notice that opens a shelved view (a user message)."""
    return Message(role="user", content=[TextBlock(text=text)])


@dataclass
class Conversation:
    """Messages and the seams over them, rebuilt from history records in order."""

    messages: list[Message] = field(default_factory=list)
    seams: list[rec.Seam] = field(default_factory=list)
    undone: list[rec.Seam] = field(default_factory=list)
    thinking_cut: int = 0
    pruned: set[str] = field(default_factory=set)
    compacted: int = 0
    """Messages before this index left the source's context at a compaction (imported sessions)."""
    abandoned: set[int] = field(default_factory=set)
    """Indexes of messages a conversation rewind left behind: in the history, out of the view."""
    shelf: Shelf | None = None
    """The second window (core/session/shelf.py): what left the view, and the notice that stands in its place."""
    _view: list[Message] | None = field(default=None, repr=False)

    def apply(self, record: rec.Record) -> None:
        """Fold one history record into the conversation."""
        match record:  # the kinds a history holds most of come first: each case is an isinstance check
            case rec.MessageAdded():
                self._add(message_of(record))
            case rec.RequestMade() | rec.UsageRecorded() | rec.ToolRun():
                pass
            case rec.Seam():
                self._view = None
                self.seams.append(record)
            case rec.Unseam():
                if self.seams:
                    self._view = None
                    self.undone.append(self.seams.pop())
                    self.thinking_cut = max(self.thinking_cut, record.boundary)
            case rec.Prune():
                self._view = None
                self.pruned.update(record.ids)
            case rec.ThinkingCut():
                self._view = None
                self.thinking_cut = max(self.thinking_cut, record.boundary)
            case rec.Compaction():
                self._view = None
                self.compacted = max(self.compacted, record.boundary)
            case rec.Shelve():
                self._view = None
                self.shelf = Shelf(record.boundary, notice(record.text), record.notes_boundary)
            case rec.ConversationRewind():
                self._rewind(record.to)
            case (rec.SessionStarted() | rec.Retry() | rec.Violation()
                  | rec.Hint() | rec.HintsDelivered() | rec.Permission() | rec.PermissionMode() | rec.Denial() | rec.Todo()
                  | rec.Subagent()
                  | rec.MemoryReminder() | rec.Handoff() | rec.LegacyHandoffAsked() | rec.SeamTokens() | rec.SeamFailed()
                  | rec.HandoffAbandoned() | rec.SeamNote() | rec.ModelSwitched() | rec.Tools() | rec.NoticeShown()
                  | rec.TurnInterrupted() | rec.Limit() | rec.Error() | rec.Resumed() | rec.Hook() | rec.Checkpoint()
                  | rec.CheckpointFailed() | rec.Restore() | rec.Import() | rec.KeptAside()
                  | rec.Other()):
                pass
            case _:
                assert_never(record)

    def _rewind(self, to: int) -> None:
        """The view continues from message `to`: later messages, and seams placed after it, leave it."""
        self._view = None
        self.abandoned.update(range(to, len(self.messages)))
        while self.seams and self.seams[-1].boundary > to:
            self.seams.pop()
        if self.shelf is not None and self.shelf.boundary > to:  # the words come back with the point they lead to
            self.shelf = None

    def _add(self, message: Message) -> None:
        self.messages.append(message)
        if self._view is not None:
            # A new message lies after every seam and cut: it joins the view as it is.
            if self._view and self._view[-1].role == message.role:
                self._view[-1:] = compact([self._view[-1], message])
            else:
                self._view.append(message)

    def boundary(self) -> int:
        """How many messages the latest active seam strips (0 with no seam)."""
        return self.seams[-1].boundary if self.seams else 0

    def active(self) -> list[Message]:
        """The messages the model sees now (cached; extended as messages arrive)."""
        if self._view is None:
            self._view = self.view(self.boundary())
        return list(self._view)

    def view(self, boundary: int, pruned: set[str] | None = None, shelf: Shelf | None = None) -> list[Message]:
        """The messages the model would see with a seam at `boundary` (and these calls pruned, and `shelf`
        taken out: the conversation's own when None)."""
        msgs: list[Message] = list(self.messages)
        ids = self.pruned if pruned is None else pruned
        if ids:
            msgs = drop_tool_ids(msgs, ids)
        if self.thinking_cut:
            msgs = drop_thinking_blocks(msgs, self.thinking_cut)
        if boundary:
            msgs = strip_blocks(msgs, boundary)
        if self.abandoned:
            msgs = drop_messages(msgs, self.abandoned)
        shelf = self.shelf if shelf is None else shelf
        if shelf is not None:
            return compact([shelf.notice, *shelve_blocks(msgs, shelf.boundary, shelf.notes_boundary)[self.compacted:]])
        return compact(msgs[self.compacted:])

    @classmethod
    def from_records(cls, records: list[JsonObject]) -> Conversation:
        """Rebuild from history records (as read: each is parsed into its type)."""
        return cls.of(rec.parse(record) for record in records)

    @classmethod
    def of(cls, records: Iterable[rec.Record]) -> Conversation:
        """Rebuild from history records already parsed into their types."""
        conv = cls()
        for record in records:
            conv.apply(record)
        return conv



@dataclass(frozen=True)
class RequestSpec:
    """The fixed parts of every request of a session; frozen so the cache prefix survives."""

    model: str
    system: str
    tools: list[JsonObject]
    max_tokens: int = 16000
    parallel_tools: bool = False
    thinking: JsonObject | None = None


def spec_fields(spec: RequestSpec) -> JsonObject:
    """The spec as the fields of a history `session` record."""
    return {"model": spec.model, "system": spec.system, "tools": spec.tools, "max_tokens": spec.max_tokens,
            "parallel_tools": spec.parallel_tools, "thinking": spec.thinking}


def spec_from_record(head: rec.SessionStarted) -> RequestSpec:
    """The spec a `session` record was written from (missing optional fields take their defaults)."""
    return RequestSpec(model=head.model, system=head.system, tools=list(head.tools), max_tokens=head.max_tokens,
                       parallel_tools=head.parallel_tools, thinking=head.thinking)


def build_request(spec: RequestSpec, messages: list[Message], ttl: str = "5m") -> JsonObject:
    """The Messages API body, with cache breakpoints after system and on the newest message (`ttl`: their
    lifetime, "5m" or "1h": core/accounting/cache_ttl.py)."""
    control = EPHEMERAL if ttl == "5m" else {**EPHEMERAL, "ttl": ttl}
    body: JsonObject = {"model": spec.model, "max_tokens": spec.max_tokens}
    body["system"] = [{"type": "text", "text": spec.system, "cache_control": control}]
    if spec.tools:
        body["tools"] = spec.tools
        body["tool_choice"] = {"type": "auto", "disable_parallel_tool_use": not spec.parallel_tools}
    if spec.thinking:
        body["thinking"] = spec.thinking
    api = [m.api for m in messages]
    if api:
        api[-1] = _with_breakpoint(api[-1], control)
    body["messages"] = api
    return body


def _with_breakpoint(message: JsonObject, control: JsonObject = EPHEMERAL) -> JsonObject:
    msg = copy.copy(message)
    content = msg["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    else:
        content = list(content)
    for i in range(len(content) - 1, -1, -1):
        if content[i].get("type") not in ("thinking", "redacted_thinking"):
            content[i] = {**content[i], "cache_control": control}
            break
    msg["content"] = content
    return msg


def measure(body: JsonObject) -> tuple[int, int]:
    """Request-body bytes and estimated tokens of a built request."""
    text = compact_json(body)
    return len(text.encode("utf-8", "surrogatepass")), estimate_chars(len(text))


def measure_messages(spec: RequestSpec, messages: list[Message]) -> tuple[int, int]:
    """The same figures as `measure(build_request(spec, messages))`, from cached message sizes.

    Each message's compact JSON size is computed once (messages are frozen); only the
    request head and the newest message, which carries the cache breakpoint, are dumped.
    """
    if not messages:
        return measure(build_request(spec, messages))
    head_text = compact_json(build_request(spec, []))
    last = compact_json(_with_breakpoint(messages[-1].api))
    n_bytes = len(head_text.encode("utf-8", "surrogatepass")) + len(last.encode("utf-8", "surrogatepass"))
    n_chars = len(head_text) + len(last)
    for message in messages[:-1]:
        size, chars = message.api_size
        n_bytes += size + 1
        n_chars += chars + 1
    return n_bytes, estimate_chars(n_chars)
