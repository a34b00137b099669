"""`rhapsody --demo`: the whole experience offline, on a sample project, with no key.

The loopback server answers with a small rule-based agent that narrates each step, reads
hints out loud, and writes a field note when asked for a micro-handoff, so hints, the
handoff key and the stripped context can all be tried for real.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rhapsody.config import Settings
from rhapsody.core.model import Model

DEMO_TASK = "The inventory total is wrong: find out why and fix it."
DEMO_ALLOW = ["bash:sleep *", "bash:python -m unittest*", "bash:tail *"]
HANDOFF_MARKERS = ("Micro-handoff requested", "please call the `micro_handoff` tool")

PLAN: list[tuple[str, str, dict[str, Any]]] = [
    ("I'll start by listing the Python files so I know the layout of this project before touching anything; "
     "I expect a module and its tests.", "find_files", {"pattern": "**/*.py"}),
    ("Two files: inventory.py and test_inventory.py. I'll read inventory.py because the task is about the total, "
     "and I expect the bug to be in total_value.", "read_file", {"path": "inventory.py"}),
    ("total_value starts its sum at 1, which looks wrong [inferred]. I'll run the tests to see the failure myself; "
     "they sleep two seconds first, so this is a good moment to type a hint.",
     "bash", {"command": "sleep 2; python -m unittest test_inventory 2>&1 | tail -n 4"}),
    ("Measured: the tests fail, and the total is off by exactly one, which matches a sum that starts at 1. "
     "I'll change the start value to 0 with an exact edit.",
     "edit_file", {"path": "inventory.py", "old": "    total = 1\n", "new": "    total = 0\n"}),
    ("Now I'll rerun the tests to confirm the fix; I expect all three to pass.",
     "bash", {"command": "python -m unittest test_inventory 2>&1 | tail -n 3"}),
    ("I'll check the diff to make sure the change is exactly the one line I meant and nothing else moved.",
     "git", {"action": "diff"}),
]
FINAL = ("Done. [measured] The three tests pass after changing the start value of `total_value` from 1 to 0 in "
         "inventory.py; the diff is that one line.\n\nTry the micro-handoff now: press **ctrl+o** or type `/handoff`. "
         "I'll write a field note, and the tool traffic above leaves my context while every word stays.")


class DemoResponder:
    """A scripted agent that follows PLAN, acknowledges hints and honours handoff requests."""

    def __init__(self, delay: float = 0.02) -> None:
        self.step = 0
        self.delay = delay

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]["content"]
        blocks = last if isinstance(last, list) else [{"type": "text", "text": last}]
        texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
        if any(marker in t for t in texts for marker in HANDOFF_MARKERS):
            return self._turn([self._text("I'll write my field note now, facts first, so I can pick the work up "
                                          "after the strip without re-running anything."), self._handoff_call()])
        if answered_handoff(body["messages"]):
            return self._turn([self._text("Field note written; ready to continue from it.")])
        prefix = self._hint_prefix(blocks, texts)
        if self.step < len(PLAN):
            narration, name, args = PLAN[self.step]
            self.step += 1
            return self._turn([self._text(prefix + narration), {"type": "tool_use", "name": name, "input": args}])
        if self.step == len(PLAN):
            self.step += 1
            return self._turn([self._text(prefix + FINAL)])
        return self._turn([self._text(prefix + "The demo task is finished. I am a scripted demo agent: try "
                                      "`/handoff`, `/stats`, `/recall unittest` or `/unhandoff`.")])

    def _hint_prefix(self, blocks: list[dict[str, Any]], texts: list[str]) -> str:
        has_results = any(b.get("type") == "tool_result" for b in blocks)
        if has_results and texts:
            return f"Hint received: “{texts[-1].strip()}”. I'll take it into account. "
        return ""

    def _text(self, text: str) -> dict[str, Any]:
        return {"type": "text", "text": text}

    def _turn(self, content: list[dict[str, Any]]) -> dict[str, Any]:
        return {"content": content, "delay": self.delay}

    def _handoff_call(self) -> dict[str, Any]:
        done = [f"{PLAN[i][1]} step {i + 1}: {PLAN[i][0].split('.')[0]} [measured]" for i in range(min(self.step, len(PLAN)))]
        note = {
            "done": done or ["nothing yet"],
            "open": ["nothing left of the demo task"] if self.step > len(PLAN) else ["finish the plan"],
            "went_wrong": ["total_value started its sum at 1 [measured: tests failed by exactly 1]"],
            "working_directory": "the demo project root, which is also the git repository",
            "tool_quirks": ["unittest prints to stderr, so the command pipes 2>&1"],
            "recipes": ["python -m unittest test_inventory 2>&1 | tail -n 3"],
        }
        return {"type": "tool_use", "name": "micro_handoff", "input": note}


def answered_handoff(messages: list[dict[str, Any]]) -> bool:
    """Whether the last user message answers a micro_handoff call."""
    if len(messages) < 2 or not isinstance(messages[-2].get("content"), list):
        return False
    ids = {b.get("id") for b in messages[-2]["content"] if b.get("type") == "tool_use" and b.get("name") == "micro_handoff"}
    last = messages[-1]["content"]
    return isinstance(last, list) and any(b.get("tool_use_id") in ids for b in last if b.get("type") == "tool_result")


def prepare_project() -> Path:
    """Copy the sample project to a temporary folder and make it a git repository."""
    from rhapsody.tools.git import init_repository

    root = Path(tempfile.mkdtemp(prefix="rhapsody-demo-")) / "inventory"
    shutil.copytree(Path(__file__).parent / "demo_project", root)
    init_repository(root, ["inventory.py", "test_inventory.py", "README.md"], "sample project",
                    ("rhapsody demo", "demo@localhost"))
    return root


@contextmanager
def demo_setup(ns: argparse.Namespace, settings: Settings) -> Iterator[tuple[Path, Settings, Model]]:
    """Start the loopback server on a fresh sample project; the project, settings and model to launch with.

    The server stops when the block ends.
    """
    from rhapsody.anthropic_model import loopback_model
    from rhapsody.loopback.server import LoopbackServer

    server = LoopbackServer(DemoResponder()).start()
    try:
        root = prepare_project()
        model = loopback_model(server.url, retries=settings.retries, base_delay=settings.retry_base_delay)
        settings = settings.model_copy(update={
            "model": settings.model or "claude-sonnet-5-5",
            "allow": [*settings.allow, *DEMO_ALLOW] if ns.task else settings.allow,
        })
        if ns.task or ns.plain:
            print(f"rhapsody demo: sample project in {root}")
        yield root, settings, model
    finally:
        server.stop()
