"""The dialog recorder: a log in dialogs/ at the end of each task that used tools, and at each seam."""

from __future__ import annotations

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
        if isinstance(event, ev.TurnStarted):
            if event.user_text:
                self.request, self.calls, self.answer, self.result = event.user_text, [], "", None
        elif isinstance(event, ev.ToolFinished) and event.call.name not in ("micro_handoff", "recall"):
            self.calls.append(tool_title(finished_view(event)))
        elif isinstance(event, ev.ModelResponse) and not event.message.tool_uses():
            self.answer = "\n\n".join(t.strip() for t in event.message.texts() if t.strip())
        elif isinstance(event, ev.MemoryReminded) and self.result is None:
            self.result = self.answer
        elif isinstance(event, ev.SeamCommitted):
            note = event.record.get("note_path", "")
            self._write(session, "micro-handoff", f"seam {event.record['seam']}; field note {note}", "context stripped")
        elif isinstance(event, ev.TurnEnded) and self.calls:
            result = (self.answer if self.result is None else self.result) or "(no final answer)"
            self._write(session, self.request, "\n".join(f"- {c}" for c in self.calls[-40:]), result)
            self.calls, self.result = [], None

    def _write(self, session: Session, request: str, work: str, result: str) -> None:
        written = write_dialog(session.root, self.path, session.id, request, work, result)
        if written is not None and self.commit:
            commit_memory(session.root, self.path, f"memory: dialog {written.name}")


