"""The session: one history file, the conversation folded from it, hints and figures.

Every change goes through `record`, which appends to the history first and then folds the
record into memory, so what is in memory is always what a resume would rebuild: the
conversation, pending hints, the todo list (core/session/todo.py), figures (core/session/session_figures.py) and the micro-handoff's state (`handoff`, see
core/session/handoff_state.py).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, assert_never

from rhapsody import __version__
from rhapsody.core.session.context import Conversation, RequestSpec, build_request, measure_messages, spec_fields, spec_from_record
from rhapsody.core.session import handoff_state
from rhapsody.core.session import records as rec
from rhapsody.core.errors import HistoryError
from rhapsody.core.session.session_figures import Figures
from rhapsody.core.session.handoff_state import HandoffState
from rhapsody.core.session.images import for_request, has_images, image_tokens
from rhapsody.core.session.history import (HistoryRead, HistoryWriter, collector_paused, history_dir, new_session_id,
                                   not_history, read_history)
from rhapsody.core.session.messages import Block, Message, ToolResultBlock
from rhapsody.core.session.todo import TodoList

@dataclass(frozen=True)
class Hint:
    """Text the human typed while the agent worked.

    mode "steer" lands at the next tool boundary; "queue" waits for the end of the turn.
    """

    id: str
    text: str
    mode: str = "steer"


class Session:
    """A session's history, conversation view, pending hints and figures."""

    def __init__(self, root: Path, writer: HistoryWriter, spec: RequestSpec, session_id: str) -> None:
        self.root = root
        self.writer = writer
        self.spec = spec
        self.id = session_id
        self.conversation = Conversation()
        self.figures = Figures()
        self.pending: list[Hint] = []
        self._hint_ids = itertools.count(1)
        self.handoff = HandoffState()
        self.todos = TodoList()
        """The agent's todo list (core/session/todo.py), rewound with the conversation."""
        self.records: list[dict[str, Any]] = []
        self.delegated: list[Session] = []
        """The sub-agents running now (core/agent/subagent.py): a steering hint goes to the latest."""

    @property
    def path(self) -> Path:
        """The history file."""
        return self.writer.path

    @classmethod
    def start(cls, root: Path, spec: RequestSpec, branch: str = "", parent: rec.ParentLink | None = None) -> Session:
        """A new session with a new history file (`branch`: the git branch it started on, for the picker;
        `parent`: the session and call a sub-agent's session was started by)."""
        session_id = new_session_id()
        writer = HistoryWriter(history_dir(root) / f"{session_id}.jsonl")
        session = cls(root, writer, spec, session_id)
        session.record("session", session=session_id, cwd=str(root), version=__version__, **spec_fields(spec),
                       **({"branch": branch} if branch else {}), **({"parent": parent.model_dump()} if parent else {}))
        return session

    @classmethod
    def resume(cls, root: Path, path: Path, model: str | None = None) -> Session:
        """Reopen a session from its history; a different model cuts earlier thinking."""
        with collector_paused():  # read and fold in one pause; the typed records are gone before it ends
            read = read_history(path, typed=True)
            session = cls._opened(root, path, read)
            session._replay(read, path)
            read.typed.clear()
        session.record("resumed", skipped_lines=read.skipped, torn_tail=read.torn_tail)
        session._answer_orphan_calls()
        if model and model != session.spec.model:
            session.switch_model(model)
        return session

    @classmethod
    def _opened(cls, root: Path, path: Path, read: HistoryRead) -> Session:
        """The session a history's header record describes, with nothing folded yet."""
        why = not_history(read)
        if why:  # the words every command uses for a bad file
            raise HistoryError(f"{path} is not a rhapsody history file ({why})")
        head = read.records[0]
        missing = [key for key in ("session", "model", "system", "tools") if key not in head]
        if missing:
            raise HistoryError(f"{path.name}: the session record lacks {', '.join(missing)}")
        spec = spec_from_record(head)
        writer = HistoryWriter(path, next_seq=read.records[-1].get("seq", len(read.records)) + 1)
        return cls(root, writer, spec, head["session"])

    def _replay(self, read: HistoryRead, path: Path) -> None:
        for raw, record, line in zip(read.records, read.typed, read.lines):
            try:
                self._fold(raw, record)
            except (KeyError, TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise HistoryError(f"{path.name} line {line}: {record.kind} record cannot be read: {reason}") from None

    def record(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Append one event to history, then fold it into memory."""
        entry = self.writer.append(kind, **fields)
        self._fold(entry.raw, entry.record)
        return entry.raw

    def _fold(self, raw: dict[str, Any], record: rec.Record) -> None:
        self.records.append(raw)
        self.conversation.apply(record)
        self.handoff = handoff_state.fold(self.handoff, record)
        self.figures.add(record)
        match record:  # the kinds a history holds most of come first: each case is an isinstance check
            case rec.Message() | rec.Request() | rec.Usage() | rec.ToolRun():
                pass
            case rec.Hint():
                self.pending.append(Hint(record.id, record.text, record.mode))
                self._bump_hint_ids(record.id)
            case rec.HintDelivered():
                delivered = set(record.ids)
                self.pending = [h for h in self.pending if h.id not in delivered]
            case rec.Model():
                self.spec = dataclasses.replace(self.spec, model=record.model)
            case rec.Tools():
                self.spec = dataclasses.replace(self.spec, tools=record.tools)
            case rec.Todo():
                self.todos.add(record)
            case rec.Rewind():
                self.todos.rewind(record.to)
            case (rec.Session() | rec.Subagent() | rec.Retry() | rec.Violation() | rec.Permission() | rec.PermissionMode() | rec.Denial() | rec.MemoryReminder()
                  | rec.Handoff() | rec.HandoffAsked() | rec.Seam() | rec.Prune() | rec.SeamTokens()
                  | rec.SeamFailed() | rec.HandoffFailed() | rec.Unseam() | rec.ThinkingCut() | rec.SeamNote()
                  | rec.Notice() | rec.Interrupted() | rec.Limit() | rec.Error() | rec.Resumed() | rec.Hook()
                  | rec.Checkpoint() | rec.CheckpointFailed() | rec.Restore() | rec.Import()
                  | rec.Aside() | rec.Compaction() | rec.Shelve() | rec.Other()):
                pass
            case _:
                assert_never(record)

    def _bump_hint_ids(self, hint_id: str) -> None:
        number = int(hint_id[1:]) if hint_id[1:].isdigit() else 0
        current = next(self._hint_ids)
        self._hint_ids = itertools.count(max(current, number + 1))

    def _answer_orphan_calls(self) -> None:
        """A process killed mid-tool left calls without results; answer them so the API accepts it."""
        messages = self.conversation.messages
        if not messages or messages[-1].role != "assistant" or not messages[-1].tool_uses():
            return
        text = "Not finished: rhapsody stopped before this call returned. Check its effects before re-running."
        results = [ToolResultBlock(tool_use_id=c.id, content=text, is_error=True) for c in messages[-1].tool_uses()]
        self.append_message("user", list(results))

    # -- conversation ------------------------------------------------------------------

    def append_message(self, role: Literal["user", "assistant"], content: list[Block]) -> dict[str, Any]:
        """Append a message to the conversation (and the history)."""
        message = Message(role=role, content=content)
        return self.record("message", role=role, content=[b.dump() for b in message.content])

    def messages(self) -> list[Message]:
        """The active context: what the model sees now."""
        return self.conversation.active()

    def request_and_size(self, ttl: str = "5m") -> tuple[dict[str, Any], int, int]:
        """The next request body (its cache entries of lifetime `ttl`) with its compact size in bytes and
        estimated tokens."""
        messages = self.messages()
        if not has_images(messages):
            return build_request(self.spec, messages, ttl), *measure_messages(self.spec, messages)
        sent = for_request(messages, self.root)  # stored images as base64 blocks
        size = measure_messages(self.spec, sent)[0]  # the wire's bytes; tokens by image area, not base64 length
        return (build_request(self.spec, sent, ttl), size,
                measure_messages(self.spec, messages)[1] + image_tokens(messages))

    def switch_model(self, model: str) -> None:
        """Use another model from now on; earlier thinking leaves the view (it is bound to the old one)."""
        self.record("model", model=model)
        self.cut_thinking("model switched")

    def set_tools(self, tools: list[dict[str, Any]]) -> None:
        """Offer these tool definitions from the next request on (MCP servers came or went).

        Thinking blocks are bound to the tools they were written under, so earlier ones leave.
        """
        had_messages = bool(self.conversation.messages)
        self.record("tools", tools=tools)
        if self.spec.thinking and had_messages:
            self.cut_thinking("tools changed")

    def cut_thinking(self, reason: str) -> None:
        """Drop every thinking block so far from the view (their prefix no longer holds)."""
        self.record("thinking_cut", boundary=len(self.conversation.messages), reason=reason)

    # -- hints ---------------------------------------------------------------------------

    def hint(self, text: str, mode: str = "steer") -> Hint:
        """Queue a hint; it is on disk before this returns. A steering hint typed while a sub-agent runs is
        the sub-agent's: it goes into its history and reaches it at its next tool boundary."""
        hint_id = f"h{next(self._hint_ids)}"
        target = self.delegated[-1] if mode == "steer" and self.delegated else self
        target.record("hint", id=hint_id, text=text, mode=mode)
        return target.pending[-1]

    def take_hints(self, modes: tuple[str, ...] = ("steer", "queue")) -> list[Hint]:
        """The pending hints of the given modes, oldest first; a `hint_delivered` record removes them."""
        taken = [h for h in self.pending if h.mode in modes]
        return taken

    def context_tokens(self) -> int:
        """The best figure for the active context: API-reported when fresh, else estimated."""
        return self.figures.context_tokens()

    def request_handoff(self) -> bool:
        """Ask for a micro-handoff at the next tool boundary (or as the next turn when idle).

        False when one is already under way (nothing changes).
        """
        return handoff_state.want(self)
