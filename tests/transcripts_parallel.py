"""A Claude Code 2.1 transcript with the structure its parallel calls really have, for the import tests.

Claude Code 2.1.38/2.1.39 writes one batch of parallel calls as: the message's text line, the
first call's line, `progress` (hook_progress) lines chained under it, the next call's line
hanging off the last of those, more progress, then each call's result with its own call's
line as parent (FACTS §6). Walking back from the last line passes the calls but not every
result; where the results come back in another order, the walk skips calls too. This session
holds several such batches (two, three and two calls, one with its results in reverse), hook
`system` records between calls, a pause of twenty minutes, a failing test run (`Exit code 1`),
an interrupted call (its result says so), a call whose result never came (Claude Code
stopped), a sidechain, and an automatic compaction at 167,117 tokens (a 200k window). Usage
is reported as Claude Code 2.x reports it: every write a 1-hour one. Deterministic (seeded).
"""

from __future__ import annotations

from typing import Any

from tests.transcripts import CLAUDE_HEAD, _Claude

PARALLEL_SESSION = "7c0d2e4f-1a3b-4c5d-8e6f-9a0b1c2d3e4f"
BD_SYNC = "Exporting beads to JSONL...\n✓ Exported 0 issues"
PRE_TOKENS = 167_117
NEVER_CAME = "toolu_never_came_0001"
"""The call whose result is not in the file (Claude Code stopped while it ran)."""
INTERRUPTED = "[Request interrupted by user for tool use]"


class _Claude21(_Claude):
    """Writes lines with explicit parents, as Claude Code 2.1 does for parallel calls."""

    def __init__(self) -> None:
        super().__init__(23, model="claude-opus-4-6", session=PARALLEL_SESSION, version="2.1.39")
        self.ttl_start = 0.0

    def line(self, kind: str, parent: str | None, **extra: Any) -> dict[str, Any]:
        self.parent = parent
        record = self._base(kind, **extra)
        self.lines.append(record)
        return record

    def usage(self) -> dict[str, Any]:
        """What the API reports for the next request: the cached prefix read, the rest written for an hour."""
        total = CLAUDE_HEAD + self.chars // 4
        written = max(0, total - self.cached - 3)
        usage = {"input_tokens": 3, "cache_creation_input_tokens": written, "cache_read_input_tokens": self.cached,
                 "output_tokens": 60 + self.rng.randint(0, 200), "service_tier": "standard",
                 "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": written}}
        self.cached = total - 3
        return usage

    def progress(self, parent: str, tool_use_id: str, n: int) -> str:
        """`n` hook_progress lines chained under `parent`; the last one's uuid."""
        for i in range(n):
            record = self.line("progress", parent, data={"type": "hook_progress", "hookEvent": "PreToolUse",
                                                         "hookName": "PreToolUse:Bash", "command": f"guard.sh {i}"},
                               parentToolUseID=tool_use_id, toolUseID=tool_use_id)
            record["timestamp"] = self.clock.tick(0.05)
            parent = record["uuid"]
        return parent

    def batch(self, parent: str, text: str, calls: list[tuple[dict[str, Any], str | None, bool]],
              reverse: bool = False) -> str:
        """One API message of parallel calls and their results; the uuid the next line hangs off.

        `calls`: (tool_use block, result text or None when it never came, is_error)."""
        usage, message_id = self.usage(), f"msg_01{self.rng.getrandbits(64):016x}"

        def message(block: dict[str, Any]) -> dict[str, Any]:
            return {"model": self.model, "id": message_id, "type": "message", "role": "assistant",
                    "content": [block], "stop_reason": "tool_use", "stop_sequence": None, "usage": usage}

        at = self.line("assistant", parent, message=message({"type": "text", "text": text}),
                       requestId=f"req_{message_id[6:]}")["uuid"]
        call_lines = []
        for call, _, _ in calls:
            record = self.line("assistant", at, message=message(call), requestId=f"req_{message_id[6:]}")
            call_lines.append(record["uuid"])
            at = self.progress(record["uuid"], call["id"], 4 if len(call_lines) == 1 else 2)
        self.chars += sum(len(str(c)) for c, _, _ in calls) + len(text)
        order = list(zip(calls, call_lines))
        last = at
        for (call, output, error), call_line in reversed(order) if reverse else order:
            if output is None:
                continue
            block: dict[str, Any] = {"tool_use_id": call["id"], "type": "tool_result", "content": output}
            if error:
                block["is_error"] = True
            result = self.line("user", call_line, message={"role": "user", "content": [block]},
                               toolUseResult={"stdout": output[:80], "stderr": "", "interrupted": False},
                               sourceToolAssistantUUID=call_line)
            self.chars += len(output)
            self.progress(result["uuid"], call["id"], 1)
            last = result["uuid"]  # the next line hangs off the result written last, not off its progress
        return last

    def say(self, parent: str, text: str, stop: str = "end_turn") -> str:
        usage, message_id = self.usage(), f"msg_01{self.rng.getrandbits(64):016x}"
        message = {"model": self.model, "id": message_id, "type": "message", "role": "assistant",
                   "content": [{"type": "text", "text": text}], "stop_reason": stop, "stop_sequence": None,
                   "usage": usage}
        self.chars += len(text)
        return str(self.line("assistant", parent, message=message, requestId=f"req_{message_id[6:]}")["uuid"])

    def human(self, parent: str | None, text: str, pause: float = 12.0) -> str:
        self.clock.tick(pause)
        self.chars += len(text)
        return str(self.line("user", parent, message={"role": "user", "content": text})["uuid"])

    def hook(self, parent: str) -> str:
        """A hook's `system` record between two requests, as Claude Code writes stop-hook summaries."""
        return str(self.line("system", parent, subtype="stop_hook_summary", content="Stop hook ran: lint ok",
                             level="info")["uuid"])

    def bash(self, i: int, command: str) -> dict[str, Any]:
        return self.call(i, "Bash", command=command, description=f"step {i}")


def claude_parallel() -> list[dict[str, Any]]:
    """The session the module docstring describes."""
    c = _Claude21()
    c.lines.append({"type": "file-history-snapshot", "messageId": c.uid(), "snapshot": {}, "isSnapshotUpdate": False})
    at = c.human(None, "The parser drops the last token; find out why and fix it.")
    read = c.call(1, "Read", file_path="/home/ana/proj/src/parser.py")
    at = c.batch(at, "I will read the parser first.", [(read, "    41→    for i in range(len(tokens) + 1):", False)])
    grep, sync = c.call(2, "Grep", pattern="range\\(", path="src"), c.bash(3, "bd sync 2>&1")
    at = c.batch(at, "I will search the range calls and sync the issue tracker in parallel.",
                 [(grep, "src/parser.py:41:    for i in range(len(tokens) + 1):", False), (sync, BD_SYNC, False)])
    at = c.hook(at)
    glob, log, status = (c.call(4, "Glob", pattern="tests/**/*.py"), c.bash(5, "git log --oneline -3"),
                         c.bash(6, "git status --short"))
    at = c.batch(at, "I will list the tests, the recent commits and the working tree at once.",
                 [(glob, "tests/test_parser.py", False), (log, "a1b2c3d parser: tokens\n9f8e7d6 init", False),
                  (status, " M src/parser.py", False)], reverse=True)
    at = c.say(at, "The bound is range(len(tokens) + 1): one past the end. Shall I run the tests first?")
    at = c.human(at, "yes, run the tests", pause=20 * 60)  # the human was away for twenty minutes
    pytest = c.bash(7, "pytest -q")
    at = c.batch(at, "I will run the test suite to see the failure.",
                 [(pytest, "Exit code 1\nFAILED tests/test_parser.py::test_last_token - assert 9 == 10\n"
                           "1 failed, 3 passed in 0.21s", True)])
    edit = c.call(8, "Edit", file_path="/home/ana/proj/src/parser.py", old_string="len(tokens) + 1",
                  new_string="len(tokens)")
    slow = c.bash(9, "pytest -q tests/test_slow.py")
    at = c.batch(at, "I will fix the bound and run the slow tests together.",
                 [(edit, "The file /home/ana/proj/src/parser.py has been updated.", False),
                  (slow, INTERRUPTED, True)])
    at = c.human(at, INTERRUPTED, pause=3)
    at = c.human(at, "skip the slow tests; run the fast ones again")
    fast, lint = c.bash(10, "pytest -q tests/test_parser.py"), c.bash(11, "ruff check src")
    lint["id"] = NEVER_CAME
    at = c.batch(at, "I will run the fast tests and the linter in parallel.",
                 [(fast, "4 passed in 0.12s", False), (lint, None, False)])
    at = c.human(at, "you stopped; where were we?", pause=90)  # Claude Code was restarted: no result for the lint
    task = c.call(12, "Task", description="check callers", prompt="Find every caller of parse()",
                  subagent_type="general-purpose")
    side = c.batch(at, "I will ask a subagent for every caller of parse().", [(task, "Callers: cli.py:12.", False)])
    for role, content in (("user", "Find every caller of parse()"),
                          ("assistant", [{"type": "text", "text": "Callers: cli.py:12."}])):
        c.lines.append({**c._base(role, message={"role": role, "content": content}), "isSidechain": True,
                        "parentUuid": side, "agentId": "b7c8d9e0"})
    c.lines.append({"parentUuid": None, "logicalParentUuid": side, "isSidechain": False, "type": "system",
                    "subtype": "compact_boundary", "content": "Conversation compacted", "level": "info",
                    "compactMetadata": {"trigger": "auto", "preTokens": PRE_TOKENS}, "uuid": c.uid(),
                    "timestamp": c.clock.tick(), "sessionId": PARALLEL_SESSION, "cwd": "/home/ana/proj"})
    c.chars, c.cached = 0, CLAUDE_HEAD - 3  # the system prompt and tools stay cached across the compaction
    at = c.lines[-1]["uuid"]
    summary = c.line("user", at, message={"role": "user", "content": (
        "This session is being continued from a previous conversation that ran out of context. Summary: the "
        "parser's bound is fixed; the linter has not run.")}, isCompactSummary=True, isVisibleInTranscriptOnly=True)
    again, diff = c.bash(13, "ruff check src"), c.bash(14, "git diff --stat")
    at = c.batch(summary["uuid"], "I will run the linter again and show the diff.",
                 [(again, "All checks passed!", False), (diff, " src/parser.py | 2 +-", False)])
    c.say(at, "The bound is fixed, the tests pass and the linter is clean.")
    return c.lines
