"""Record a long, realistic session into history/ and report what one seam saves.

    python bench/record_session.py [--out history/]

The codebase is rhapsody's own source, copied into a temporary git repository. The agent
is a scripted reviewer served by the loopback server: it narrates before each call what
it will do, why and what it expects, and after each result what it measured, quoting the
numbers it read in that result (line counts, match counts, exit codes). It runs through
the real loop and real tools, two hints arrive mid-run, and after 150+ tool calls the human
asks for a micro-handoff. The history file is copied to the output folder and the seam's
figures are printed.
"""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import argparse
import asyncio
import json
import re
import shutil
import subprocess
import tempfile
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anthropic

from rhapsody.providers.anthropic import AnthropicModel
from rhapsody.config.settings import Settings
from rhapsody.core.events import SeamCommitted, ToolStarted
from rhapsody.demo import answered_handoff
from rhapsody.loopback.server import LoopbackServer
from rhapsody.wiring import build

REPO = Path(__file__).resolve().parent.parent


class Reviewer:
    """A careful scripted reviewer: one narrated call per turn, facts from the last result."""

    def __init__(self, files: list[str]) -> None:
        self.plan = self._plan(files)
        self.step = 0
        self.last_call: tuple[str, dict[str, Any]] | None = None

    def _plan(self, files: list[str]) -> list[tuple[str, str, dict[str, Any]]]:
        plan: list[tuple[str, str, dict[str, Any]]] = [
            ("list every Python file, to size the review before reading anything", "find_files", {"pattern": "src/**/*.py"}),
            ("check the repository state, so later diffs are mine alone", "git", {"action": "status"}),
        ]
        for i, path in enumerate(files):
            plan.append((f"read {path}, to learn what it owns before judging it", "read_file", {"path": path}))
            plan.append((f"list the functions of {path}, to see how finely it is cut", "search_text",
                         {"pattern": r"^\s*(async )?def ", "path": path}))
            plan.append((f"count lines and byte-compile {path}, to confirm it is valid Python",
                         "bash", {"command": f"wc -l {path} && python -m py_compile {path} && echo compiled"}))
            if i % 4 == 3:
                plan.append(("look for imports that would break the core's isolation from the front ends",
                             "search_text", {"pattern": r"^(from|import) (textual|anthropic|rich|git)\b", "path": "src/rhapsody/core"}))
        plan.append(("run the strip's property tests once, to measure them rather than assume them",
                     "bash", {"command": "python -m pytest -q -p no:cacheprovider tests/core/session/test_strip.py 2>&1 | tail -n 3"}))
        return plan

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]["content"]
        blocks = last if isinstance(last, list) else [{"type": "text", "text": last}]
        texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
        if any("Micro-handoff requested" in t for t in texts):
            return self._turn("I'll write my field note now, with the measured figures first.", "micro_handoff", self._note())
        if answered_handoff(body["messages"]):
            return {"content": [{"type": "text", "text": "Field note written; ready to continue from it."}]}
        outcome = self._outcome(blocks)
        hint = f" Hint noted: “{texts[-1]}”; I'll apply it from the next step." if texts and outcome else ""
        if self.step >= len(self.plan):
            return {"content": [{"type": "text", "text": f"{outcome}{hint} The review pass is complete."}]}
        reason, name, args = self.plan[self.step]
        self.step += 1
        self.last_call = (name, args)
        expect = _expectation(name, args)
        return self._turn(f"{outcome}{hint} Next I will {reason}; {expect}".strip(), name, args)

    def _outcome(self, blocks: list[dict[str, Any]]) -> str:
        result = next((b for b in blocks if b.get("type") == "tool_result"), None)
        if result is None or self.last_call is None:
            return ""
        text = str(result.get("content", ""))
        name, args = self.last_call
        return _measured(name, args, text, bool(result.get("is_error")))

    def _turn(self, narration: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": narration}, {"type": "tool_use", "name": name, "input": args}]}

    def _note(self) -> dict[str, Any]:
        return {
            "done": [f"reviewed {self.step} planned steps over rhapsody's source [measured: tool results]",
                     "every file byte-compiles [measured: exit 0 each]",
                     "rhapsody.core imports none of textual, anthropic, rich, git [measured: search_text]"],
            "open": ["write up the longest functions found", "check tests cover the strip audit failure path"],
            "went_wrong": ["none so far"],
            "working_directory": "the copied source root, which is the git repository",
            "tool_quirks": ["search_text answers path:line:text; read_file numbers lines from 1"],
            "recipes": ["python -m pytest -q -p no:cacheprovider tests/core/session/test_strip.py 2>&1 | tail -n 3",
                        "wc -l FILE && python -m py_compile FILE && echo compiled"],
        }


def _expectation(name: str, args: dict[str, Any]) -> str:
    return {
        "read_file": "I expect a module docstring and under 300 lines.",
        "search_text": "I expect a handful of matches, each with its line number.",
        "bash": "I expect exit code 0.",
        "find_files": "I expect about forty files.",
        "git": "I expect a clean tree.",
    }.get(name, "I expect a short answer.")


def _measured(name: str, args: dict[str, Any], text: str, is_error: bool) -> str:
    if is_error:
        return f"Measured: {name} failed: {text.splitlines()[0][:120]}."
    if name == "read_file":
        m = re.search(r"lines \d+-\d+ of (\d+)", text)
        doc = "it opens with a docstring" if '"""' in text[:400] else "it has no module docstring"
        return f"Measured: {args['path']} has {m.group(1) if m else '?'} lines and {doc}."
    if name == "search_text":
        hits = [line for line in text.splitlines() if re.match(r"^[^:]+:\d+:", line)]
        names = [re.sub(r".*def (\w+).*", r"\1", h) for h in hits[:5] if "def " in h]
        shown = f" ({', '.join(names)}{', …' if len(hits) > 5 else ''})" if names else ""
        return f"Measured: {len(hits)} matches{shown}."
    if name == "bash":
        code = re.search(r"\[exit code (\d+)\]", text)
        first = text.strip().splitlines()[0][:100] if text.strip() else ""
        return f"Measured: exit {code.group(1) if code else '?'}; first line `{first}`."
    if name == "find_files":
        return f"Measured: {text.splitlines()[0]}."
    return f"Measured: {name} answered {len(text)} characters."


async def record(out: Path) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp()) / "rhapsody-src"
    shutil.copytree(REPO / "src", work / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    subprocess.run(["git", "-c", "user.name=r", "-c", "user.email=r@localhost", "add", "-A"], cwd=work, check=True)
    subprocess.run(["git", "-c", "user.name=r", "-c", "user.email=r@localhost", "commit", "-qm", "source"], cwd=work, check=True)
    files = sorted(str(p.relative_to(work)) for p in (work / "src").rglob("*.py"))
    reviewer = Reviewer(files)
    server = LoopbackServer(reviewer).start()
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="record", max_retries=0)
    wiring = build(work, Settings(permission_mode="yolo"), AnthropicModel(client, retries=2), "claude-sonnet-5-5")
    hints = {40: "keep each finding to one line", 110: "note the longest function of each module"}
    calls = 0
    async with aclosing(wiring.agent.run("Review rhapsody's source for size and isolation; narrate what you measure.")) as events:
        async for event in events:
            if isinstance(event, ToolStarted):
                calls += 1
                if calls in hints:
                    wiring.session.hint(hints[calls])
    wiring.agent.request_handoff()
    seam = None
    async with aclosing(wiring.agent.run()) as events:
        async for event in events:
            if isinstance(event, SeamCommitted):
                seam = event.record
    async with aclosing(wiring.agent.run("Which module was the longest?")) as events:
        async for _ in events:
            pass
    after = next(r for r in reversed(dumped(wiring.session.records)) if r["kind"] == "usage")
    server.stop()
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"review-{wiring.session.id}.jsonl"
    shutil.copy(wiring.session.path, target)
    reported_after = sum(after.get(k, 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    return {"file": str(target.relative_to(REPO)), "tool_calls": calls, "seam": seam, "reported_after": reported_after}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=REPO / "history")
    result = asyncio.run(record(parser.parse_args().out))
    seam = result["seam"]
    b, a = seam["before"], seam["after"]
    print(json.dumps({"file": result["file"], "tool_calls": result["tool_calls"]}))
    print(f"seam: {b['request_bytes']:,} → {a['request_bytes']:,} bytes ({1 - a['request_bytes'] / b['request_bytes']:.1%} less), "
          f"~{b['est_tokens']:,} → ~{a['est_tokens']:,} tokens, tool_use {b['tool_use']} → {a['tool_use']}, "
          f"text blocks {b['text_blocks']} → {a['text_blocks']}, messages {b['messages']} → {a['messages']}")
    print(f"input tokens reported by the loopback server: last request before {seam['reported_input_before']:,}, "
          f"first after {result['reported_after']:,}")


if __name__ == "__main__":
    main()
