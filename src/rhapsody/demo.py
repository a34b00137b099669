"""`rhapsody --demo`: the whole experience offline, on a sample project, with no key.

The loopback server answers with a small rule-based agent that narrates each step, reads
hints out loud, and writes a field note when asked for a micro-handoff, so hints, the
handoff key and the stripped context can all be tried for real.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rhapsody.core.errors import ConfigError

if TYPE_CHECKING:  # the app's first frame does not wait for pydantic
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


class DemoResponder:
    """A scripted agent that follows PLAN, acknowledges hints, honours handoff requests, and
    reports only what the tool results say (a denied edit is not claimed as a fix)."""

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
        prefix = self._refusal_prefix(blocks, texts) or self._hint_prefix(blocks, texts)
        outcome = Outcomes(body["messages"])
        if self.step < len(PLAN):
            narration, name, args = PLAN[self.step]
            self.step += 1
            if self.step == 5 and not outcome.edited:
                narration = ("The edit was not made, so the bug is still there. I'll rerun the tests anyway to "
                             "show the current state; I expect the same failure as before.")
            return self._turn([self._text(prefix + narration), {"type": "tool_use", "name": name, "input": args}])
        if self.step == len(PLAN):
            self.step += 1
            return self._turn([self._text(prefix + outcome.final())])
        return self._turn([self._text(prefix + "The demo task is finished. I am a scripted demo agent: try "
                                      "`/handoff`, `/stats`, `/recall unittest` or `/unhandoff`.")])

    def _hint_prefix(self, blocks: list[dict[str, Any]], texts: list[str]) -> str:
        has_results = any(b.get("type") == "tool_result" for b in blocks)
        if has_results and texts:
            return f"Hint received: “{texts[-1].strip()}”. I'll take it into account. "
        return ""

    def _refusal_prefix(self, blocks: list[dict[str, Any]], texts: list[str]) -> str:
        for b in blocks:
            content = b.get("content")
            if b.get("type") == "tool_result" and b.get("is_error") and isinstance(content, str) and "permission denied" in content:
                # the human's words come right after the results, before any hint: the first text
                said = texts[0].strip() if texts and "their reason follows" in content else ""
                return f"That call was denied{f' (you said: “{said}”)' if said else ''}, so I'll go on without it. "
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


class Outcomes:
    """What the tool results of a conversation say: was the edit made, did the last test run pass."""

    def __init__(self, messages: list[dict[str, Any]]) -> None:
        calls: dict[str, str] = {}
        results: dict[str, dict[str, Any]] = {}
        for message in messages:
            for b in message["content"] if isinstance(message["content"], list) else []:
                if b.get("type") == "tool_use":
                    calls[b["id"]] = b["name"]
                elif b.get("type") == "tool_result":
                    results[b["tool_use_id"]] = b
        by_name: dict[str, list[dict[str, Any]]] = {}
        for call_id, name in calls.items():
            if call_id in results:
                by_name.setdefault(name, []).append(results[call_id])
        edits = by_name.get("edit_file", [])
        self.edited = bool(edits) and not edits[-1].get("is_error")
        tests = by_name.get("bash", [])
        last = str(tests[-1].get("content", "")) if tests else ""
        self.tests_ran = bool(tests) and not tests[-1].get("is_error")
        self.tests_pass = self.tests_ran and "OK" in last and "FAILED" not in last

    def final(self) -> str:
        """The closing report, claiming only what the results show."""
        if self.edited and self.tests_pass:
            head = ("Done. [measured] The three tests pass after changing the start value of `total_value` from 1 "
                    "to 0 in inventory.py; the diff is that one line.")
        elif self.edited:
            head = ("I changed the start value of `total_value` from 1 to 0, but I could not confirm the fix: "
                    "the test run " + ("did not pass" if self.tests_ran else "was not allowed") + " [measured].")
        else:
            head = ("Not fixed. [measured] The edit to inventory.py was denied, so `total_value` still starts its "
                    "sum at 1 and the tests still fail" + ("" if self.tests_ran else " (the test run was not allowed either)")
                    + ". Ask again, or allow the edit, and I'll make it.")
        return (head + "\n\nTry the micro-handoff now: press **ctrl+o** or type `/handoff`. I'll write a field note, "
                "and the tool traffic above leaves my context while every word stays.")


def answered_handoff(messages: list[dict[str, Any]]) -> bool:
    """Whether the last user message answers a micro_handoff call."""
    if len(messages) < 2 or not isinstance(messages[-2].get("content"), list):
        return False
    ids = {b.get("id") for b in messages[-2]["content"] if b.get("type") == "tool_use" and b.get("name") == "micro_handoff"}
    last = messages[-1]["content"]
    return isinstance(last, list) and any(b.get("tool_use_id") in ids for b in last if b.get("type") == "tool_result")


DEMO_FOLDER = "rhapsody-demo"
WELCOME = ("Demo: a scripted agent on a sample project, no key. Enter sends the task.\n"
           "While the tests run (2 s), type a hint + Enter: it lands after the result.\n"
           "Before the edit, one question shows its diff. When it is done: ctrl+o.")


def demo_root() -> Path:
    """The one folder every demo project lives under (in the temporary directory)."""
    return Path(tempfile.gettempdir()) / DEMO_FOLDER


def project_path(base: Path | None = None) -> Path:
    """Where this process's sample project is (made by `prepare_project`)."""
    return (base or demo_root()) / str(os.getpid()) / "inventory"


def clean_demos(base: Path) -> None:
    """Remove demo projects whose rhapsody is no longer running."""
    if not base.is_dir():
        return
    for child in base.iterdir():
        if child.name.isdigit() and not _alive(int(child.name)):
            shutil.rmtree(child, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prepare_project(base: Path | None = None) -> Path:
    """Copy the sample project under the demo folder and make it a git repository."""
    from rhapsody.tools.git import init_repository

    base = base or demo_root()
    clean_demos(base)
    root = project_path(base)
    shutil.rmtree(root.parent, ignore_errors=True)
    shutil.copytree(Path(__file__).parent / "demo_project", root)
    init_repository(root, ["inventory.py", "test_inventory.py", "README.md"], "sample project",
                    ("rhapsody demo", "demo@localhost"))
    return root


@contextmanager
def demo_setup(ns: argparse.Namespace, settings: Settings) -> Iterator[tuple[Path, Settings, Model]]:
    """Start the loopback server on a fresh sample project; the project, settings and model to launch with.

    The server stops and the project is removed when the block ends. `--demo -p` is refused:
    the demo plays its own scripted task.
    """
    if ns.task:
        raise ConfigError("--demo plays its own scripted task and cannot take -p; run `rhapsody --demo` "
                          "(or `--demo --plain`), or `rhapsody -p TASK` with a key")
    from rhapsody.lazy_model import LazyModel
    from rhapsody.loopback.server import LoopbackServer

    server = LoopbackServer(DemoResponder()).start()
    root = prepare_project()
    try:
        def adapter() -> Model:
            from rhapsody.anthropic_model import loopback_model

            return loopback_model(server.url, retries=settings.retries, base_delay=settings.retry_base_delay)

        settings = settings.model_copy(update={
            "model": settings.model or "claude-sonnet-5-5",
            "allow": [*settings.allow, *DEMO_ALLOW],
        })
        if ns.plain:
            print(f"rhapsody demo: sample project in {root}")
        yield root, settings, LazyModel(adapter)
    finally:
        server.stop()
        shutil.rmtree(root.parent, ignore_errors=True)
