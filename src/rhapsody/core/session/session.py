"""The session: one history file, the conversation folded from it, hints and figures.

Every change goes through `append(model)`, which appends to the history first and then folds the
record into memory, so what is in memory is always what a resume would rebuild: the
conversation, pending hints, the todo list (core/session/todo.py), figures (core/session/session_figures.py) and the micro-handoff's state (`handoff`, see
core/session/handoff_state.py).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any, Literal, TypeVar, assert_never

from rhapsody import __version__
from rhapsody.core.session.context import Conversation, RequestSpec, build_request, measure_messages, spec_from_record
from rhapsody.core.session import handoff_state
from rhapsody.core.session import records as rec
from rhapsody.core.errors import HistoryError
from rhapsody.core.session.session_figures import SessionFigures
from rhapsody.core.session.handoff_state import HandoffState
from rhapsody.core.session.images import for_request, has_images, image_tokens
from rhapsody.core.session.history import (HistoryRead, HistoryWriter, collector_paused, history_dir, new_session_id,
                                   not_history, read_history)
from rhapsody.core.session.messages import Block, Message, ToolResultBlock
from rhapsody.core.session.todo import TodoList

R = TypeVar("R", bound=rec.Known)

class Session:
    """A session's history, conversation view, pending hints and figures."""

    def __init__(self, root: Path, writer: HistoryWriter, spec: RequestSpec, session_id: str) -> None:
        self.root = root
        self.writer = writer
        self.spec = spec
        self.id = session_id
        self.conversation = Conversation()
        self.figures = SessionFigures()
        self.pending: list[rec.Hint] = []
        """Hints typed while the agent worked, not yet delivered: mode "steer" lands at the next tool boundary,
        "queue" waits for the end of the turn."""
        self._hint_ids = itertools.count(1)
        self.handoff = HandoffState()
        self.todos = TodoList()
        """The agent's todo list (core/session/todo.py), rewound with the conversation."""
        self.records: list[rec.Record] = []
        """Every record of the history, typed, in order (pick by kind with `rec.of(session.records, rec.Seam)`)."""
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
        session.append(rec.SessionStarted(session=session_id, cwd=str(root), version=__version__, model=spec.model,
                                          system=spec.system, tools=spec.tools, max_tokens=spec.max_tokens,
                                          parallel_tools=spec.parallel_tools, thinking=spec.thinking,
                                          branch=branch, parent=parent))
        return session

    @classmethod
    def resume(cls, root: Path, path: Path, model: str | None = None) -> Session:
        """Reopen a session from its history; a different model cuts earlier thinking."""
        with collector_paused():  # read and fold in one pause; the typed records are gone before it ends
            read = read_history(path, typed=True)
            session = cls._opened(root, path, read)
            read.records.clear()  # the typed records are the session's from here on
            session._replay(read, path)
        session.append(rec.Resumed(skipped_lines=read.skipped, torn_tail=read.torn_tail))
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
        head = read.typed[0]
        assert isinstance(head, rec.SessionStarted)  # not_history: a history starts with its session record
        missing = [key for key in ("session", "model", "system", "tools") if key not in head.model_fields_set]
        if missing:
            raise HistoryError(f"{path.name}: the session record lacks {', '.join(missing)}")
        last_seq = read.typed[-1].seq if "seq" in read.typed[-1].model_fields_set else len(read.typed)
        return cls(root, HistoryWriter(path, next_seq=last_seq + 1), spec_from_record(head), head.session)

    def _replay(self, read: HistoryRead, path: Path) -> None:
        for record, line in zip(read.typed, read.lines):
            try:
                self._fold(record)
            except (KeyError, TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise HistoryError(f"{path.name} line {line}: {record.kind} record cannot be read: {reason}") from None

    def append(self, record: R) -> R:
        """Append one record to the history (`session.append(rec.Seam(...))`), then fold it into memory;
        returns it as written (numbered and dated)."""
        written = self.writer.append(record)
        self._fold(written)
        return written

    def _fold(self, record: rec.Record) -> None:
        self.records.append(record)
        self.conversation.apply(record)
        self.handoff = handoff_state.fold(self.handoff, record)
        self.figures.add(record)
        match record:  # the kinds a history holds most of come first: each case is an isinstance check
            case rec.MessageAdded() | rec.RequestMade() | rec.UsageRecorded() | rec.ToolRun():
                pass
            case rec.Hint():
                self.pending.append(record)
                self._bump_hint_ids(record.id)
            case rec.HintsDelivered():
                delivered = set(record.ids)
                self.pending = [h for h in self.pending if h.id not in delivered]
            case rec.ModelSwitched():
                self.spec = dataclasses.replace(self.spec, model=record.model)
            case rec.Tools():
                self.spec = dataclasses.replace(self.spec, tools=record.tools)
            case rec.Todo():
                self.todos.add(record)
            case rec.ConversationRewind():
                self.todos.rewind(record.to)
            case (rec.SessionStarted() | rec.Subagent() | rec.Retry() | rec.Violation() | rec.Permission() | rec.PermissionMode()
                  | rec.Denial() | rec.MemoryReminder()
                  | rec.Handoff() | rec.LegacyHandoffAsked() | rec.Seam() | rec.Prune() | rec.SeamTokens()
                  | rec.SeamFailed() | rec.HandoffAbandoned() | rec.Unseam() | rec.ThinkingCut() | rec.SeamNote()
                  | rec.NoticeShown() | rec.TurnInterrupted() | rec.Limit() | rec.Error() | rec.Resumed() | rec.Hook()
                  | rec.Checkpoint() | rec.CheckpointFailed() | rec.Restore() | rec.Import()
                  | rec.KeptAside() | rec.Compaction() | rec.Shelve() | rec.Other()):
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

    def append_message(self, role: Literal["user", "assistant"], content: list[Block]) -> rec.MessageAdded:
        """Append a message to the conversation (and the history)."""
        return self.append(rec.MessageAdded(role=role, content=list(content)))

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
        self.append(rec.ModelSwitched(model=model))
        self.cut_thinking("model switched")

    def set_tools(self, tools: list[dict[str, Any]]) -> None:
        """Offer these tool definitions from the next request on (MCP servers came or went).

        Thinking blocks are bound to the tools they were written under, so earlier ones leave.
        """
        had_messages = bool(self.conversation.messages)
        self.append(rec.Tools(tools=tools))
        if self.spec.thinking and had_messages:
            self.cut_thinking("tools changed")

    def cut_thinking(self, reason: str) -> None:
        """Drop every thinking block so far from the view (their prefix no longer holds)."""
        self.append(rec.ThinkingCut(boundary=len(self.conversation.messages), reason=reason))

    # -- hints ---------------------------------------------------------------------------

    def hint(self, text: str, mode: str = "steer") -> rec.Hint:
        """Queue a hint; it is on disk before this returns. A steering hint typed while a sub-agent runs is
        the sub-agent's: it goes into its history and reaches it at its next tool boundary."""
        target = self.delegated[-1] if mode == "steer" and self.delegated else self
        return target.append(rec.Hint(id=f"h{next(self._hint_ids)}", text=text, mode=mode))

    def pending_hints(self, modes: tuple[str, ...] = ("steer", "queue")) -> list[rec.Hint]:
        """The pending hints of the given modes, oldest first; they stay pending until a `hint_delivered`
        record names them (a request that fails leaves them to be sent again)."""
        return [h for h in self.pending if h.mode in modes]

    def context_tokens(self) -> int:
        """The best figure for the active context: API-reported when fresh, else estimated."""
        return self.figures.context_tokens()

    def request_handoff(self) -> bool:
        """Ask for a micro-handoff at the next tool boundary (or as the next turn when idle).

        False when one is already under way (nothing changes).
        """
        return handoff_state.want(self)
