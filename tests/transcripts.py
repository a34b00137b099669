"""Claude Code transcripts and Codex rollouts, made the way those tools write them, for the import tests.

`claude_session(calls)` and `codex_rollout(calls)` build a session of `calls` tool calls with
the usage each tool would report (a growing context read from the prompt cache). The small
ones cover every shape the importer maps (parallel calls, thinking with signatures, images,
interrupted calls, compaction, sidechains and a subagent file, queued messages, branches);
`python -m tests.transcripts` writes them to tests/fixtures/import/. Long sessions are built at
test time; `python -m tests.transcripts long DIR` writes the ones docs/performance.md measures. Everything is deterministic (seeded).
"""

from __future__ import annotations

import base64
import json
import random
import sys
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "import"
START = datetime(2025, 11, 20, 10, 0, 0, tzinfo=timezone.utc)
CLAUDE_HEAD = 16_000
"""Tokens of Claude Code's own system prompt and tools, which a transcript does not hold."""
CLAUDE_AUTOCOMPACT = 155_000
"""Context tokens at which Claude Code compacts on its own (about 78% of a 200k window)."""
CODEX_HEAD = 9_000
CODEX_AUTOCOMPACT = 240_000
PIXEL = base64.b64encode(bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                                       "1f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4c50000"
                                       "000049454e44ae426082")).decode()
SESSION = "5b1e7a52-9d0c-4f3e-8a61-2f4c1d3e9b70"
CODEX_SESSION = "019a2d7a-41c4-78b1-b7cc-a45d62a89cd5"


class _Clock:
    def __init__(self) -> None:
        self.t = START

    def tick(self, seconds: float = 12.0) -> str:
        self.t += timedelta(seconds=seconds)
        return self.t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _output(rng: random.Random, i: int) -> str:
    """A tool output of realistic size with a unique marker (`result-<i>-<n>`) to recall it by: most are
    short (a grep, a test run), about a third are whole files read (one to four thousand tokens)."""
    count = rng.randint(5, 40) if rng.random() < 0.65 else rng.randint(80, 300)
    lines = [f"{n:5d}→    value_{i}_{n} = compute({n}, {rng.randint(0, 999)})" for n in range(count)]
    return f"result-{i}-{rng.randint(1000, 9999)}\n" + "\n".join(lines)


class _Claude:
    """Writes Claude Code records: a parent chain, one line per content block, usage per API message."""

    def __init__(self, seed: int = 7, model: str = "claude-opus-4-5-20251101",
                 autocompact: int | None = CLAUDE_AUTOCOMPACT, session: str | None = None,
                 version: str = "2.0.42") -> None:
        self.rng = random.Random(seed)
        self.model = model
        self.autocompact = autocompact
        self.session = session or str(uuid.UUID(int=random.Random(f"{seed}{model}").getrandbits(128), version=4))
        self.clock = _Clock()
        self.version = version
        self.lines: list[dict[str, Any]] = []
        self.parent: str | None = None
        self.chars = 0
        self.cached = 0

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _base(self, kind: str, **extra: Any) -> dict[str, Any]:
        record = {"parentUuid": self.parent, "isSidechain": False, "userType": "external", "cwd": "/home/ana/proj",
                  "sessionId": self.session, "version": self.version, "gitBranch": "main", "type": kind, "uuid": self.uid(),
                  "timestamp": self.clock.tick(), **extra}
        self.parent = record["uuid"]
        return record

    def user(self, content: Any, **extra: Any) -> dict[str, Any]:
        record = self._base("user", message={"role": "user", "content": content}, **extra)
        self.chars += len(json.dumps(content))
        self.lines.append(record)
        return record

    def assistant(self, blocks: list[dict[str, Any]], stop: str = "tool_use") -> None:
        total = CLAUDE_HEAD + self.chars // 4
        usage = {"input_tokens": 3, "cache_creation_input_tokens": max(0, total - self.cached - 3),
                 "cache_read_input_tokens": self.cached, "output_tokens": 40 + self.rng.randint(0, 200),
                 "service_tier": "standard"}
        self.cached = total - 3
        message_id = f"msg_{self.rng.getrandbits(64):016x}"
        for block in blocks:  # Claude Code writes one line per content block, all with the message's id and usage
            message = {"model": self.model, "id": message_id, "type": "message", "role": "assistant",
                       "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage}
            self.lines.append(self._base("assistant", message=message, requestId=f"req_{message_id[4:]}"))
        self.chars += len(json.dumps(blocks))

    def call(self, i: int, name: str = "Bash", **arguments: Any) -> dict[str, Any]:
        return {"type": "tool_use", "id": f"toolu_{i:04d}{self.rng.getrandbits(40):010x}", "name": name,
                "input": arguments or {"command": f"grep -n value_{i} src/*.py", "description": f"step {i}"}}

    def result(self, call: dict[str, Any], text: str, error: bool = False) -> None:
        block: dict[str, Any] = {"tool_use_id": call["id"], "type": "tool_result", "content": text}
        if error:
            block["is_error"] = True
        self.user([block], toolUseResult={"stdout": text[:80], "stderr": "", "interrupted": False})

    def step(self, i: int) -> None:
        if self.autocompact and CLAUDE_HEAD + self.chars // 4 > self.autocompact:
            self.compact("auto")
        call = self.call(i)
        self.assistant([{"type": "text", "text": f"Step {i}: I will search for value_{i} to see where it is used."},
                        call])
        self.result(call, _output(self.rng, i))

    def compact(self, trigger: str, summary: str = "values traced so far are all read; continue with the next value.") -> None:
        """A compaction as Claude Code writes it: a boundary that starts a new root, then the summary."""
        self.lines.append({"parentUuid": None, "logicalParentUuid": self.parent, "isSidechain": False, "type": "system",
                           "subtype": "compact_boundary", "content": "Conversation compacted", "level": "info",
                           "compactMetadata": {"trigger": trigger, "preTokens": CLAUDE_HEAD + self.chars // 4},
                           "uuid": self.uid(), "timestamp": self.clock.tick(), "sessionId": self.session,
                           "cwd": "/home/ana/proj"})
        self.parent = self.lines[-1]["uuid"]
        self.chars, self.cached = 0, 0
        self.user("This session is being continued from a previous conversation that ran out of context. Summary: "
                  + summary,
                  isCompactSummary=True, isVisibleInTranscriptOnly=True)

    def thinking(self, text: str) -> dict[str, Any]:
        return {"type": "thinking", "thinking": text, "signature": base64.b64encode(self.rng.randbytes(96)).decode()}


def claude_session(calls: int, seed: int = 7, model: str = "claude-opus-4-5-20251101",
                   autocompact: int | None = CLAUDE_AUTOCOMPACT) -> list[dict[str, Any]]:
    """A plain long Claude Code session: one prompt, `calls` tool calls, a closing answer; Claude Code
    compacts on its own when the context passes `autocompact` (None: a 1M-token window it never fills)."""
    c = _Claude(seed, model, autocompact)
    c.lines.append({"type": "summary", "summary": "Trace every value through the parser", "leafUuid": c.uid()})
    c.user("Trace every value_N through the parser and tell me which ones are never read.")
    for i in range(calls):
        c.step(i)
    c.assistant([{"type": "text", "text": f"Done: I traced {calls} values; none is unread."}], stop="end_turn")
    return c.lines


def claude_paused_session(turns: int = 12, calls: int = 20, seed: int = 11) -> list[dict[str, Any]]:
    """A Claude Code session of `turns` human turns of `calls` tool calls each, with the pauses a person takes
    between turns (8 to 40 minutes: every one longer than the 5-minute cache), a test run every few calls that
    fails until the turn's fix and then passes, and a commit at the end of each turn."""
    c = _Claude(seed)
    c.lines.append({"type": "summary", "summary": "Fix the parser one value at a time", "leafUuid": c.uid()})
    i = 0
    for turn in range(turns):
        c.user(f"Turn {turn}: fix the next batch of values in the parser, run the tests, commit.")
        for n in range(calls):
            if n % 6 == 5:  # a test run: failing until the turn's last third, then passing
                run = c.call(i, command="pytest -q", description="run the tests")
                c.assistant([{"type": "text", "text": f"Step {i}: I will run the tests to see if the fix holds."}, run])
                passing = n > calls * 2 // 3
                c.result(run, "12 passed" if passing else "1 failed, 11 passed: test_value", error=not passing)
            else:
                c.step(i)
            i += 1
        commit = c.call(i, command=f"git commit -qam 'parser: batch {turn}'", description="commit")
        c.assistant([{"type": "text", "text": "I will commit the batch so the work has a point to return to."}, commit])
        c.result(commit, f"[main {c.rng.getrandbits(28):07x}] parser: batch {turn}")
        i += 1
        c.assistant([{"type": "text", "text": f"Batch {turn} is fixed, tested and committed."}], stop="end_turn")
        c.clock.tick(c.rng.randint(8 * 60, 40 * 60))  # the person reads, thinks, comes back
        c.cached = 0  # to a cache that expired meanwhile: the next request writes the whole context again
    return c.lines


def claude_session_1m(calls: int) -> list[dict[str, Any]]:
    """A long session on a model with a 1M-token window: Claude Code never compacts it."""
    return claude_session(calls, model="claude-opus-4-6", autocompact=None)


def claude_small() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every shape at once; returns (main transcript, one subagent transcript)."""
    c = _Claude(11, session=SESSION)
    c.lines.append({"type": "summary", "summary": "Fix the parser's off-by-one", "leafUuid": c.uid()})
    c.lines.append({"type": "file-history-snapshot", "messageId": c.uid(), "snapshot": {}, "isSnapshotUpdate": False})
    c.user("Caveat: the messages below were generated by the user while running local commands.", isMeta=True)
    c.user([{"type": "text", "text": "Here is the failing output; fix the off-by-one in the parser."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}}])
    first = c.call(1, "Read", file_path="/home/ana/proj/src/parser.py")
    c.assistant([c.thinking("The screenshot shows index 10 of 10; likely a range bound."),
                 {"type": "text", "text": "I will read the parser first to find the loop bound."}, first])
    c.result(first, _output(c.rng, 1))
    fork = c.parent
    # Two parallel calls; the first result is written before the second call's line (Claude Code streams).
    a, b = c.call(2, "Grep", pattern="range\\(", path="src"), c.call(3, "Glob", pattern="tests/**/*.py")
    c.assistant([{"type": "text", "text": "I will search the range calls and list the tests in parallel."}, a])
    c.result(a, "src/parser.py:41:    for i in range(len(tokens) + 1):")
    c.lines.append({**c.lines[-2], "uuid": c.uid(), "parentUuid": c.parent,
                    "message": {**c.lines[-2]["message"], "content": [b]}, "timestamp": c.clock.tick(1)})
    c.parent = c.lines[-1]["uuid"]
    c.result(b, "tests/test_parser.py")
    c.lines.append({"type": "queue-operation", "operation": "enqueue", "timestamp": c.clock.tick(),
                    "sessionId": SESSION, "content": "also run the linter when you are done"})
    task = c.call(4, "Task", description="check callers", prompt="Find every caller of parse()",
                  subagent_type="general-purpose")
    c.assistant([{"type": "text", "text": "I will ask a subagent to find every caller of parse()."}, task])
    side_parent = c.parent
    for role, content in (("user", "Find every caller of parse()"),
                          ("assistant", [{"type": "text", "text": "Callers: cli.py:12, api.py:40."}])):
        c.lines.append({**c._base(role, message={"role": role, "content": content}), "isSidechain": True,
                        "parentUuid": side_parent, "agentId": "a1b2c3d4"})
    c.parent = side_parent
    c.result(task, "Callers: cli.py:12, api.py:40.")
    edit = c.call(5, "Edit", file_path="/home/ana/proj/src/parser.py", old_string="len(tokens) + 1",
                  new_string="len(tokens)")
    c.assistant([{"type": "text", "text": "I will fix the bound: range(len(tokens)) instead of len + 1."}, edit])
    c.user([{"type": "text", "text": "[Request interrupted by user for tool use]"}])  # the edit never got a result
    c.user("also run the linter when you are done")
    c.compact("manual", "the parser's loop bound was off by one (range(len(tokens) + 1)); the fix is not applied yet.")
    lint = c.call(6, "Bash", command="ruff check src", description="lint")
    c.assistant([{"type": "text", "text": "I will apply the fix again, then run the linter as asked."}, lint])
    c.result(lint, "All checks passed!")
    c.lines.append({"parentUuid": c.parent, "isSidechain": False, "type": "system", "subtype": "informational",
                    "content": "Hook ran", "uuid": c.uid(), "timestamp": c.clock.tick(), "sessionId": SESSION})
    c.parent = c.lines[-1]["uuid"]
    c.assistant([{"type": "text", "text": "The linter passes; the bound is fixed."}], stop="end_turn")
    leaf = c.parent
    c.parent = fork  # an abandoned branch written earlier would sit here; Claude Code keeps it in the file
    abandoned = c._base("user", message={"role": "user", "content": "try a different approach"})
    c.lines.insert(8, abandoned)
    c.parent = leaf
    sub = [{**c._base(role, message={"role": role, "content": content}), "isSidechain": True, "agentId": "e5f6a7b8"}
           for role, content in (("user", "List the test files"),
                                 ("assistant", [{"type": "text", "text": "tests/test_parser.py"}]))]
    c.parent = leaf
    return c.lines, sub


class _Codex:
    """Writes a Codex rollout: response items, token counts after each response."""

    def __init__(self, seed: int = 5) -> None:
        self.rng = random.Random(seed)
        self.clock = _Clock()
        self.lines: list[dict[str, Any]] = []
        self.chars = 0
        self.total = 0
        self.prompt = 0

    def add(self, kind: str, payload: dict[str, Any], seconds: float = 6.0) -> None:
        self.lines.append({"timestamp": self.clock.tick(seconds), "type": kind, "payload": payload})
        if kind == "response_item":
            self.chars += len(json.dumps(payload))

    def tokens(self) -> None:
        prompt = CODEX_HEAD + self.chars // 4
        cached = self.prompt if self.prompt <= prompt else CODEX_HEAD  # the previous prompt is the cached prefix
        self.prompt = prompt
        last = {"input_tokens": prompt, "cached_input_tokens": cached, "output_tokens": 120,
                "reasoning_output_tokens": 64, "total_tokens": prompt + 120}
        self.total += prompt + 120
        info = {"total_token_usage": {"total_tokens": self.total}, "last_token_usage": last,
                "model_context_window": 272000}
        self.add("event_msg", {"type": "token_count", "info": info, "rate_limits": {"primary": None}}, 0.1)

    def user(self, text: str) -> None:
        self.add("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})

    def call(self, i: int) -> str:
        call_id = f"call_{self.rng.getrandbits(64):016x}"
        args = json.dumps({"command": ["bash", "-lc", f"rg -n value_{i} src"], "workdir": "/home/ana/proj"})
        self.add("response_item", {"type": "message", "role": "assistant",
                                   "content": [{"type": "output_text", "text": f"Searching for value_{i}."}]})
        self.add("response_item", {"type": "function_call", "name": "shell", "arguments": args, "call_id": call_id})
        return call_id

    def output(self, call_id: str, text: str) -> None:
        self.add("response_item", {"type": "function_call_output", "call_id": call_id, "output": text})

    def step(self, i: int) -> None:
        if CODEX_HEAD + self.chars // 4 > CODEX_AUTOCOMPACT:
            self.add("compacted", {"message": "Summary: values traced so far are all read; continue."})
            self.chars = 0
        self.add("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": f"**Step {i}**"}],
                                   "content": None, "encrypted_content": "gAAAA" + self.rng.randbytes(30).hex()})
        call_id = self.call(i)
        self.tokens()
        self.output(call_id, json.dumps({"output": _output(self.rng, i), "metadata": {"exit_code": 0}}))

    def open(self) -> None:
        self.add("session_meta", {"id": CODEX_SESSION, "timestamp": self.clock.tick(0), "cwd": "/home/ana/proj",
                                  "originator": "codex_cli_rs", "cli_version": "0.58.0", "instructions": None,
                                  "git": {"commit_hash": "a1b2c3", "branch": "main"}})
        self.add("response_item", {"type": "message", "role": "developer",
                                   "content": [{"type": "input_text", "text": "<permissions instructions>…"}]})
        self.user("<environment_context>\n  <cwd>/home/ana/proj</cwd>\n</environment_context>")
        self.add("turn_context", {"cwd": "/home/ana/proj", "approval_policy": "on-request", "model": "gpt-5-codex",
                                  "effort": "medium", "summary": "auto"})


def codex_rollout(calls: int, seed: int = 5) -> list[dict[str, Any]]:
    """A plain long Codex session: one prompt, `calls` shell calls, a closing answer."""
    c = _Codex(seed)
    c.open()
    c.user("Trace every value_N through the parser and tell me which ones are never read.")
    for i in range(calls):
        c.step(i)
    c.add("response_item", {"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": f"Done: traced {calls} values."}]})
    c.tokens()
    return c.lines


def codex_small() -> list[dict[str, Any]]:
    """Every Codex shape the importer maps."""
    c = _Codex(9)
    c.open()
    c.add("response_item", {"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": "Why does this screenshot show an off-by-one?"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PIXEL}"}]})
    c.add("event_msg", {"type": "token_count", "info": None, "rate_limits": None})
    c.step(1)
    counted = max(i for i, line in enumerate(c.lines) if line["payload"].get("type") == "token_count")
    c.lines.insert(counted + 1, c.lines[counted])  # a repeat after a rate-limit update: same totals, counted once
    first, second = f"call_{c.rng.getrandbits(64):016x}", f"call_{c.rng.getrandbits(64):016x}"
    for call_id, pattern in ((first, "range("), (second, "def parse")):
        c.add("response_item", {"type": "function_call", "name": "shell", "call_id": call_id,
                                "arguments": json.dumps({"command": ["rg", "-n", pattern, "src"]})})
    c.tokens()
    c.output(first, "src/parser.py:41:    for i in range(len(tokens) + 1):")
    c.add("response_item", {"type": "function_call_output", "call_id": second,
                            "output": {"content": "rg: src/missing: No such file", "success": False}})
    patch = "*** Begin Patch\n*** Update File: src/parser.py\n-    for i in range(len(tokens) + 1):\n+    for i in range(len(tokens)):\n*** End Patch"
    c.add("response_item", {"type": "custom_tool_call", "status": "completed", "call_id": "call_patch1",
                            "name": "apply_patch", "input": patch})
    c.tokens()
    c.add("response_item", {"type": "custom_tool_call_output", "call_id": "call_patch1", "output": "Success."})
    c.add("response_item", {"type": "local_shell_call", "call_id": "call_shell1", "status": "completed",
                            "action": {"type": "exec", "command": ["pytest", "-q"], "timeout_ms": 60000}})
    c.tokens()
    c.add("response_item", {"type": "function_call_output", "call_id": "call_shell1", "output": "3 passed"})
    interrupted = c.call(2)
    c.tokens()
    c.add("event_msg", {"type": "turn_aborted", "reason": "interrupted"})
    del interrupted
    c.user("stop; summarise instead")
    c.add("compacted", {"message": "Summary: the loop bound in src/parser.py was off by one; fixed with "
                                   "apply_patch; pytest passes (3 tests)."})
    c.user("thanks, anything left?")
    c.add("response_item", {"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": "Nothing left: the fix is in and tested."}]})
    c.tokens()
    return c.lines


def dump(lines: list[dict[str, Any]], path: Path) -> Path:
    """Write records as JSONL (one compact object per line)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines), encoding="utf-8")
    return path


def long_sessions(folder: Path, calls: int = 400) -> list[Path]:
    """The long sessions docs/performance.md measures: Claude Code on a 200k window (it compacts on its
    own), on a 1M window (it never does), with long human pauses, commits and test runs, Codex, and one paced
    like the long sessions people have (tests/transcripts_real.py)."""
    from tests.transcripts_real import claude_real_session

    return [dump(claude_session(calls), folder / "claude-200k.jsonl"),
            dump(claude_session_1m(calls), folder / "claude-1m.jsonl"),
            dump(claude_paused_session(), folder / "claude-paused.jsonl"),
            dump(codex_rollout(calls), folder / "codex" / f"rollout-2025-11-20T10-00-00-{CODEX_SESSION}.jsonl"),
            dump(claude_real_session(), folder / "claude-real.jsonl")]


def main() -> None:
    """Write the small fixtures to tests/fixtures/import/; with `long DIR`, the long sessions to DIR."""
    if sys.argv[1:2] == ["long"]:
        for path in long_sessions(Path(sys.argv[2])):
            print(path)
        return
    from tests.transcripts_parallel import PARALLEL_SESSION, claude_parallel

    main_lines, sub = claude_small()
    dump(main_lines, FIXTURES / "claude" / f"{SESSION}.jsonl")
    dump(claude_parallel(), FIXTURES / "claude-2.1" / f"{PARALLEL_SESSION}.jsonl")
    dump(sub, FIXTURES / "claude" / SESSION / "subagents" / "agent-e5f6a7b8.jsonl")
    dump(codex_small(), FIXTURES / "codex" / "2025" / "11" / "20" / f"rollout-2025-11-20T10-00-00-{CODEX_SESSION}.jsonl")


if __name__ == "__main__":
    main()
