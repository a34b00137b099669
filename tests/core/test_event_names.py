"""Every event's public name is pinned: the JSON lines and the Python API keep it whatever the class is called."""

from __future__ import annotations

import json
from pathlib import Path

from rhapsody.core import events as ev
from rhapsody.core.event_json import EVENT_TYPES, as_json
from rhapsody.core.session.messages import ToolUseBlock

PUBLIC = {
    "TurnStarted": "turn_started",
    "TextDelta": "text_delta",
    "ThinkingDelta": "thinking_delta",
    "BlockStopped": "block_stopped",
    "Retrying": "retrying",
    "RetryCountdown": "retry_countdown",
    "ModelResponse": "model_response",
    "RequestSent": "request_sent",
    "UsageReported": "usage_reported",
    "ToolStarted": "tool_started",
    "ToolFinished": "tool_finished",
    "NarrationViolation": "narration_violation",
    "HintDelivered": "hint_delivered",
    "HarnessSaid": "harness_said",
    "DenialDelivered": "denial_delivered",
    "MemoryReminded": "memory_reminded",
    "HandoffAsked": "handoff_asked",
    "SeamCommitted": "seam_committed",
    "ContextPruned": "context_pruned",
    "HandoffFailed": "handoff_failed",
    "Interrupted": "interrupted",
    "LimitsExceeded": "limits_exceeded",
    "Notice": "notice",
    "ImagesAttached": "images_attached",
    "FilesAttached": "files_attached",
    "TurnEnded": "turn_ended",
    "TodoUpdated": "todo_list",
    "Failed": "failed",
    "ApprovalAsked": "approval_asked",
    "PlanReviewAsked": "plan_review_asked",
    "ShellRan": "shell_ran",
    "Idle": "idle",
    "SubagentStarted": "subagent_started",
    "SubagentStep": "subagent_step",
    "SubagentEnded": "subagent_ended",
}
"""The class that carried each public name when it was pinned → the name. A class may be renamed (the key is
only a reference); a public name changes only with a note to every script that reads the lines."""

DOCS = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def test_every_event_declares_its_pinned_public_name() -> None:
    assert [cls.__name__ for cls in EVENT_TYPES if "json_name" not in cls.__dict__] == []  # its own, not inherited
    assert sorted(cls.__dict__["json_name"] for cls in EVENT_TYPES) == sorted(PUBLIC.values())


def test_public_names_are_unique() -> None:
    assert len(set(PUBLIC.values())) == len(PUBLIC) == len(EVENT_TYPES)


def test_a_renamed_class_keeps_its_public_name() -> None:
    """The name comes from the declaration, not the class: a subclass under another name prints the same."""

    class TurnBegan(ev.TurnStarted):
        pass

    assert as_json(TurnBegan(user_text="hi")) == {"event": "turn_started", "user_text": "hi"}


def test_an_event_serialises_to_plain_json() -> None:
    call = ToolUseBlock(id="t1", name="bash", input={"command": "ls"})
    line = json.loads(json.dumps(as_json(ev.ToolFinished(call=call, output="a\n", is_error=False, duration_ms=3))))
    assert line["event"] == "tool_finished" and line["call"]["name"] == "bash" and line["output"] == "a\n"


def test_a_typed_record_an_event_carries_is_its_history_line() -> None:
    """Events carry typed records (a seam's, a cut's): the JSON line holds each as the history file does."""
    from rhapsody.core.session import records as rec

    line = {"v": 1, "seq": 4, "ts": 1.0, "kind": "prune", "ids": ["t1"], "before": {"messages": 9},
            "after": {"messages": 5}}
    pruned = ev.ContextPruned(record=rec.parse(line))  # type: ignore[arg-type]
    assert json.loads(json.dumps(as_json(pruned)))["record"] == line


def test_the_docs_list_every_public_name() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert [name for name in PUBLIC.values() if f"`{name}`" not in text] == []


def test_a_sub_agents_step_carries_its_own_event_by_its_public_name() -> None:
    step = ev.SubagentStep(id="s1", step=ev.TextDelta(text="hi"))
    assert as_json(step) == {"event": "subagent_step", "id": "s1", "step": {"event": "text_delta", "text": "hi"}}
