"""A Claude Code 2.1 session paced like the long ones people really have, for the seam's figures.

The long sessions the checkpoint policy is judged on (docs/performance.md) are Claude Code
2.1.38/2.1.39 sessions on claude-opus-4-6 in a 200k window, 150–240 tool calls each, which
compacted themselves once at about 167k tokens. This one copies their structure and pacing:

- about 24k tokens of Claude Code's own system prompt and tools on every request, which the
  transcript does not hold; every write a 1-hour one, as Claude Code 2.x asks;
- eight human turns of 14 to 38 calls, the person away between them: minutes, a coffee, one
  lunch past the hour (the 1-hour cache is cold after it), and short answers now and then;
- a todo list (`TodoWrite`) written at the start of a task and updated as items complete;
- reads of whole files (one to four thousand tokens), greps, edits with one-line results,
  parallel batches of two and three calls with hook progress lines between them (FACTS §6);
- a test run that fails (`Exit code 1`, a traceback) until the fix lands, then passes; a
  `git commit` after most tasks; a few seconds to a minute between requests;
- an `Explore` subagent answered by claude-haiku-4-5, twice (sidechain lines, with their usage);
- the automatic compaction at about 167k tokens, once (at 167,449).

Nothing here is tuned to a policy: the counts and sizes come from the description above and a
fixed seed. `python -m tests.transcripts long DIR` writes it as `claude-real.jsonl`.
"""

from __future__ import annotations

from typing import Any

from tests.transcripts import _output
from tests.transcripts_parallel import _Claude21

REAL_SESSION = "3f9a1c7e-5b2d-4e8f-a6c1-0d7e9b2f4a18"
HEAD = 24_000
"""Tokens of Claude Code 2.1's system prompt and tool definitions on every request."""
AUTOCOMPACT = 167_000
HAIKU = "claude-haiku-4-5-20251001"
TURNS = ((22, 4 * 60), (30, 9 * 60), (18, 35), (38, 27 * 60), (26, 70 * 60), (14, 50), (34, 16 * 60), (24, 6 * 60))
"""Each human turn: tool calls, then the pause (seconds) before the person's next message."""


class _Real(_Claude21):
    """_Claude21 with a 24k head, the hour's cache expiring, and the compaction Claude Code makes."""

    def __init__(self) -> None:
        super().__init__()
        self.session = REAL_SESSION
        self.last = self.clock.t

    def usage(self) -> dict[str, Any]:
        if (self.clock.t - self.last).total_seconds() > 3600:  # past the 1-hour cache: written again
            self.cached = 0
        self.last = self.clock.t
        total = HEAD + self.chars // 4
        written = max(0, total - self.cached - 3)
        usage = {"input_tokens": 3, "cache_creation_input_tokens": written, "cache_read_input_tokens": self.cached,
                 "output_tokens": 80 + self.rng.randint(0, 400), "service_tier": "standard",
                 "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": written}}
        self.cached = total - 3
        return usage

    def full(self) -> bool:
        return HEAD + self.chars // 4 > AUTOCOMPACT

    def compact_here(self, at: str) -> str:
        self.lines.append({"parentUuid": None, "logicalParentUuid": at, "isSidechain": False, "type": "system",
                           "subtype": "compact_boundary", "content": "Conversation compacted", "level": "info",
                           "compactMetadata": {"trigger": "auto", "preTokens": HEAD + self.chars // 4},
                           "uuid": self.uid(), "timestamp": self.clock.tick(), "sessionId": REAL_SESSION,
                           "cwd": "/home/ana/proj"})
        self.chars, self.cached = 0, HEAD - 3  # the system prompt and tools stay cached across it
        summary = self.line("user", self.lines[-1]["uuid"], message={"role": "user", "content": (
            "This session is being continued from a previous conversation that ran out of context. Summary: "
            "the tokenizer and the parser are fixed and committed; the formatter's task is in progress.")},
            isCompactSummary=True, isVisibleInTranscriptOnly=True)
        return str(summary["uuid"])

    def explore(self, at: str, i: int) -> str:
        """A Task call whose Explore subagent runs on Haiku: its requests are sidechain lines with usage."""
        task = self.call(i, "Task", description="find callers", prompt=f"Find every caller of step_{i}",
                         subagent_type="Explore")
        at = self.batch(at, "I will ask an Explore subagent where this is called from.",
                        [(task, f"Callers of step_{i}: cli.py:12, render.py:40.", False)])
        side, cached = at, 0
        for n in range(6):
            total = 9_000 + 1_500 * n
            usage = {"input_tokens": 3, "cache_creation_input_tokens": total - cached - 3,
                     "cache_read_input_tokens": cached, "output_tokens": 120, "service_tier": "standard",
                     "cache_creation": {"ephemeral_5m_input_tokens": total - cached - 3, "ephemeral_1h_input_tokens": 0}}
            cached = total - 3
            message = {"model": HAIKU, "id": f"msg_01{self.rng.getrandbits(64):016x}", "type": "message",
                       "role": "assistant", "content": [{"type": "text", "text": f"Searching {n}."}],
                       "stop_reason": "tool_use", "stop_sequence": None, "usage": usage}
            record = {**self._base("assistant", message=message), "isSidechain": True, "parentUuid": side,
                      "agentId": f"a{i:07d}"}
            self.lines.append(record)
            side = record["uuid"]
        self.parent = at
        return at


def _todos(items: list[str], done: int) -> dict[str, Any]:
    return {"todos": [{"content": t, "activeForm": t, "status": "completed" if n < done else
                       ("in_progress" if n == done else "pending")} for n, t in enumerate(items)]}


def claude_real_session() -> list[dict[str, Any]]:
    """The session the module docstring describes (222 tool calls)."""
    c = _Real()
    c.lines.append({"type": "file-history-snapshot", "messageId": c.uid(), "snapshot": {}, "isSnapshotUpdate": False})
    at: str = c.human(None, "The formatter, the tokenizer and the parser each have a bug from the issue list; "
                            "work through them one at a time, with tests, and commit each.")
    i, compacted = 0, False
    for turn, (calls, pause) in enumerate(TURNS):
        items = [f"turn {turn}: read the code", f"turn {turn}: reproduce with a test", f"turn {turn}: fix it",
                 f"turn {turn}: run the suite and commit"]
        todo = c.call(i, "TodoWrite", **_todos(items, 0))
        at, i = c.batch(at, "I will write down the plan for this task.", [(todo, "Todos have been modified.", False)]), i + 1
        start, failing, explored = i, True, turn not in (1, 5)
        while i - start < calls:
            if not compacted and c.full():
                at, compacted = c.compact_here(at), True
            n = i - start
            c.clock.tick(c.rng.randint(3, 40))
            if n in (calls // 4, calls * 3 // 4) or n == calls - 2:  # a todo item done
                todo = c.call(i, "TodoWrite", **_todos(items, min(3, 1 + (n > calls // 4) + (n > calls // 2))))
                at = c.batch(at, "I will mark the item done.", [(todo, "Todos have been modified.", False)])
            elif n % 7 == 6:  # the test run: failing until the fix, which lands past the middle of the task
                failing = failing and n < calls // 2
                run = c.bash(i, "python -m pytest -q tests")
                out = ("Exit code 1\n" + _output(c.rng, i) + "\nFAILED tests/test_fmt.py::test_wrap - AssertionError\n"
                       "1 failed, 41 passed" if failing else "42 passed in 3.1s")
                at = c.batch(at, "I will run the tests to see where the fix stands.", [(run, out, failing)])
            elif n % 5 == 2:  # a parallel batch: two or three reads and greps at once
                batch = [(c.call(i + k, "Read", file_path=f"/home/ana/proj/src/mod_{i + k}.py"), _output(c.rng, i + k),
                          False) for k in range(2 + (n % 3 == 0))]
                at = c.batch(at, "I will read these files in parallel.", batch, reverse=n % 2 == 0)
                i += len(batch) - 1
            elif n % 4 == 1:
                edit = c.call(i, "Edit", file_path=f"/home/ana/proj/src/mod_{i}.py", old_string="a", new_string="b")
                at = c.batch(at, "I will make the edit.", [(edit, f"The file src/mod_{i}.py has been updated.", False)])
            elif not explored and n >= 3:  # once in the second and the sixth task
                at, explored = c.explore(at, i), True
            else:
                call = c.bash(i, f"grep -rn step_{i} src")
                at = c.batch(at, f"Step {i}: I will search where step_{i} is used.", [(call, _output(c.rng, i), False)])
            i += 1
        if turn % 4 != 2:  # most tasks end with a commit
            commit = c.bash(i, f"git add -A && git commit -m 'fix: task {turn}'")
            at = c.batch(at, "I will commit the fix.", [(commit, f"[main {c.rng.getrandbits(28):07x}] fix: task {turn}\n"
                                                                  " 2 files changed, 14 insertions(+), 3 deletions(-)", False)])
            i += 1
        at = c.hook(at)
        at = c.say(at, f"Task {turn} is done: the fix, its test and the suite passing.")
        at = c.human(at, f"Good. Next: task {turn + 1}." if turn < len(TURNS) - 1 else "Thanks, that is all.", pause)
    c.say(at, "All tasks are done and committed.")
    return c.lines
