"""The dialog recorder: a log in dialogs/ at the end of each task that used tools, and at each seam."""

from __future__ import annotations

from typing import assert_never

from rhapsody.core import events as ev
from rhapsody.core.session.session import Session
from rhapsody.memory.layout import commit_memory, write_dialog
from rhapsody.view.render import finished_view, tool_title


class DialogRecorder:
    """Writes a dialog log at the end of each task that used tools, and at each seam.

    An observer of the loop: it runs on the observers' worker thread, never on the event loop.
    """

    def __init__(self, path: str, commit: bool) -> None:
        self.path = path
        self.commit = commit
        self.request = ""
        self.calls: list[str] = []
        self.answer = ""
        """The text of the newest reply that called no tool: the task's final answer."""
        self.result: str | None = None
        """The answer frozen when the memory reminder went out (what follows is bookkeeping)."""

    def __call__(self, session: Session, event: ev.Event) -> None:
        match event:
            case ev.TurnStarted():
                if event.user_text:
                    self.request, self.calls, self.answer, self.result = event.user_text, [], "", None
            case ev.ToolFinished():
                if event.call.name not in ("micro_handoff", "recall"):
                    self.calls.append(tool_title(finished_view(event)))
            case ev.ModelResponse():
                if not event.message.tool_uses():
                    self.answer = "\n\n".join(t.strip() for t in event.message.texts() if t.strip())
            case ev.MemoryReminded():
                if self.result is None:
                    self.result = self.answer
            case ev.SeamCommitted():
                note = event.record.note_path
                self._write(session, "micro-handoff", f"seam {event.record.seam}; field note {note}",
                            "context stripped")
            case ev.TurnEnded():
                if self.calls:
                    self._ended(session)
            case (ev.TextDelta() | ev.ThinkingDelta() | ev.BlockStopped() | ev.Retrying() | ev.RetryCountdown()
                  | ev.RequestSent() | ev.UsageReported() | ev.ToolStarted() | ev.NarrationViolation()
                  | ev.HintDelivered() | ev.HarnessSaid() | ev.DenialDelivered() | ev.HandoffAsked()
                  | ev.ContextPruned() | ev.HandoffFailed() | ev.Interrupted() | ev.LimitsExceeded() | ev.Notice()
                  | ev.ImagesAttached() | ev.TodoUpdated() | ev.FilesAttached() | ev.Failed() | ev.ApprovalAsked()
                  | ev.PlanReviewAsked() | ev.ShellRan() | ev.Idle() | ev.SubagentStarted() | ev.SubagentStep()
                  | ev.SubagentEnded()):
                pass  # the log keeps the task, its calls and its answer: the rest is in the history
            case _:
                assert_never(event)

    def _ended(self, session: Session) -> None:
        """A task that used tools ended: its log, with the answer frozen at the memory reminder if one went out."""
        result = (self.answer if self.result is None else self.result) or "(no final answer)"
        self._write(session, self.request, "\n".join(f"- {c}" for c in self.calls[-40:]), result)
        self.calls, self.result = [], None

    def _write(self, session: Session, request: str, work: str, result: str) -> None:
        written = write_dialog(session.root, self.path, session.id, request, work, result)
        if written is not None and self.commit:
            commit_memory(session.root, self.path, f"memory: dialog {written.name}")


