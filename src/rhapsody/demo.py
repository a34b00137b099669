"""`rhapsody --demo`: the whole experience offline, on a sample project, with no key.

The loopback server answers with a small rule-based agent that narrates each step, reads
hints out loud, and writes a field note when asked for a micro-handoff, so hints, the
handoff key and the stripped context can all be tried for real.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rhapsody.core.errors import ConfigError
from rhapsody.core.json_types import JsonObject

if TYPE_CHECKING:  # the app's first frame does not wait for pydantic
    from rhapsody.config.settings import Settings
    from rhapsody.core.model import Model

DEMO_TASK = "The inventory total is wrong: find out why and fix it."
DEMO_ALLOW = ["bash:sleep *", "bash:python -m unittest*"]
HANDOFF_MARKERS = ("Micro-handoff requested", "please call the `micro_handoff` tool")
PAUSE = 5
"""Seconds the demo's first test run sleeps: the window in which the welcome invites a hint."""
TESTS = "python -m unittest -v test_inventory"
"""The test command, unpiped, so the call's exit status is the tests' own (the bash tool
returns stdout and stderr together and caps long output)."""
EDIT = 3
"""The PLAN step that edits; after a denied edit the plan goes back to it when the human writes again."""


def plan(pause: int = PAUSE) -> list[tuple[str, str, JsonObject]]:
    """The scripted steps: narration, tool and arguments (narration that depends on outcomes is in `narrate`)."""
    return [
        ("I'll start by listing the Python files so I know the layout of this project before touching anything; "
         "I expect a module and its tests.", "find_files", {"pattern": "**/*.py"}),
        ("Two files: inventory.py and test_inventory.py. I'll read inventory.py because the task is about the total, "
         "and I expect the bug to be in total_value or in what it sums.", "read_file", {"path": "inventory.py"}),
        ("total_value starts its sum at 1 instead of 0, which looks wrong [inferred], and the reports use it. "
         "I'll run the tests to see the failure myself; "
         f"they sleep {pause} seconds first, so this is a good moment to type a hint. After them I'll ask to edit "
         "inventory.py.", "bash", {"command": f"sleep {pause}; {TESTS}"}),
        ("Measured: the tests fail, which matches a sum that starts at 1. "
         "I'll change the start value to 0 with an exact edit.",
         "edit_file", {"path": "inventory.py", "old": "    total = 1\n", "new": "    total = 0\n"}),
        ("Now I'll rerun the tests to confirm the fix; I expect them all to pass.", "bash", {"command": TESTS}),
        ("I'll check the diff to make sure the change is exactly the one line I meant and nothing else moved.",
         "git", {"action": "diff"}),
    ]


class DemoResponder:
    """A scripted agent that follows the plan, acknowledges hints, honours handoff requests, and
    reports only what the tool results say (a denied edit is not claimed as a fix).

    It keeps every call and result it has seen, so what it says after a seam (which strips
    them from the request) still follows what happened; a conversation of one message is a
    new session and starts the plan over.
    """

    def __init__(self, delay: float = 0.02, pause: int = PAUSE) -> None:
        self.delay = delay
        self.pause = pause
        self.plan = plan(pause)
        self.step = 0
        self.seen = Seen()

    def __call__(self, body: JsonObject) -> JsonObject:
        messages = body["messages"]
        if len(messages) == 1:
            self.step, self.seen = 0, Seen()
        self.seen.add(messages)
        last = messages[-1]["content"]
        blocks = last if isinstance(last, list) else [{"type": "text", "text": last}]
        texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
        if any(marker in t for t in texts for marker in HANDOFF_MARKERS):
            return self._turn([self._text("I'll write my field note now, facts first, so I can pick the work up "
                                          "after the strip without re-running anything."), self._handoff_call(messages)])
        if answered_handoff(messages):
            return self._turn([self._text("Field note written; ready to continue from it.")])
        prefix = self._refusal_prefix(blocks, texts) or self._hint_prefix(blocks, texts)
        outcome = self.seen.outcomes()
        asked_again = self.step > len(self.plan) and not outcome.edited and not _has_results(blocks)
        if asked_again:  # the closing report promised to propose the edit again on the next message
            self.step = EDIT
            prefix += ("The edit to inventory.py is still not made, so I'll propose it again: the same one line. "
                       "Answer the question to allow or deny it; if it is allowed I'll rerun the tests. ")
        if self.step < len(self.plan):
            narration, name, args = self.plan[self.step]
            narration = "" if asked_again else self.narrate(self.step, outcome) or narration
            self.step += 1
            return self._turn([self._text((prefix + narration).strip()), {"type": "tool_use", "name": name, "input": args}])
        if self.step == len(self.plan):
            self.step += 1
            return self._turn([self._text(prefix + outcome.final(seamed(messages), self.seen.asks))])
        return self._turn([self._text(prefix + "The demo task is finished. I am a scripted demo agent: try "
                                      "`/handoff`, `/stats`, `/recall unittest` or `/unhandoff`.")])

    def narrate(self, step: int, outcome: Outcomes) -> str:
        """The narration of a step when an earlier outcome changed it; "" for the plan's own."""
        if step == EDIT and not outcome.tests_ran:
            return ("The test run was not allowed, so I have only the code to go on [inferred]: a sum that starts at 1. "
                    "I'll change the start value to 0 with an exact edit.")
        if step == EDIT and outcome.tests_pass:
            return ("Measured: the tests pass already, so `total_value` may be fixed already. I'll still try the exact "
                    "edit from 1 to 0; it fails if there is nothing to replace.")
        if step == EDIT + 1 and not outcome.edited and outcome.tests_pass:
            return "The edit found nothing to replace. I'll rerun the tests to confirm that they pass; I expect them to."
        if step == EDIT and outcome.failed and outcome.assertion:
            return (f"Measured: {outcome.failed} of {outcome.ran} tests fail; one says “{outcome.assertion}”, which "
                    "matches a sum that starts at 1. I'll change the start value to 0 with an exact edit.")
        if step == EDIT + 1 and outcome.edited and outcome.ran:
            return f"Now I'll rerun the tests to confirm the fix; I expect all {outcome.ran} to pass."
        if step == EDIT + 1 and not outcome.edited:
            return ("The edit was not made, so the bug is still there. I'll rerun the tests anyway to "
                    "show the current state; I expect the same failure as before.")
        if step == EDIT + 2 and not outcome.edited:
            return "I'll check the diff to confirm that nothing changed in the working tree; I expect it to be empty."
        return ""

    def _hint_prefix(self, blocks: list[JsonObject], texts: list[str]) -> str:
        if _has_results(blocks) and texts:
            hint = texts[-1].strip()
            self.seen.ask(f"your hint “{hint}” (not followed: a scripted demo agent only acknowledges hints)")
            return (f"Hint received: “{hint}”. I am a scripted demo agent and cannot follow free-form hints, "
                    "so I only acknowledge it and keep it as open in my field note; a real model would act on it "
                    "here. ")
        return ""

    def _refusal_prefix(self, blocks: list[JsonObject], texts: list[str]) -> str:
        for b in blocks:
            if b.get("type") == "tool_result" and _denied(b):
                # the human's words come right after the results, before any hint: the first text
                said = texts[0].strip() if texts and "their reason follows" in _content(b) else ""
                if not said:
                    return "That call was denied, so I'll go on without it. "
                self.seen.ask(f"your reason for denying a call, “{said}” (not acted on: a scripted demo agent "
                              "cannot follow it)")
                return (f"That call was denied (you said: “{said}”). I am a scripted demo agent and cannot act on "
                        "your reason, so I'll go on without the call and keep your words as open in my field note. ")
        return ""

    def _text(self, text: str) -> JsonObject:
        return {"type": "text", "text": text}

    def _turn(self, content: list[JsonObject]) -> JsonObject:
        return {"content": content, "delay": self.delay}

    def _handoff_call(self, messages: list[JsonObject]) -> JsonObject:
        note = field_note(messages, self.seen.outcomes(), self.seen.asks)
        if self.step < len(self.plan):
            _, name, args = self.plan[self.step]
            note["open"].append(f"finish the plan: the next step is `{name} {_digest(args)}`")
        return {"type": "tool_use", "name": "micro_handoff", "input": note}


class Seen:
    """Every call and result the demo agent has seen in this session, in order, by tool_use id."""

    def __init__(self) -> None:
        self.calls: dict[str, str] = {}
        self.results: dict[str, JsonObject] = {}
        self.asks: list[str] = []
        """What the human said (hints, reasons for a denial) that the scripted agent could not act on."""

    def ask(self, item: str) -> None:
        """Keep one thing the human asked for that stays open."""
        if item not in self.asks:
            self.asks.append(item)

    def add(self, messages: list[JsonObject]) -> None:
        """Remember the calls and results of a request (a seam strips them from later ones)."""
        for call, result, _, _ in exchanges(messages):
            self.calls.setdefault(call["id"], call["name"])
            if result is not None:
                self.results[call["id"]] = result

    def outcomes(self) -> Outcomes:
        """What the results seen so far say."""
        return Outcomes([(self.calls[i], r) for i, r in self.results.items()])


class Outcomes:
    """What the tool results of a session say: was the edit made, did the last test run pass."""

    def __init__(self, results: list[tuple[str, JsonObject]]) -> None:
        by_name: dict[str, list[JsonObject]] = {}
        for name, result in results:
            by_name.setdefault(name, []).append(result)
        edits = by_name.get("edit_file", [])
        self.edit_tried = bool(edits)
        self.edited = bool(edits) and not edits[-1].get("is_error")
        tests = by_name.get("bash", [])
        last = _content(tests[-1]) if tests else ""
        self.tests_ran = bool(tests) and not _denied(tests[-1])
        self.tests_pass = self.tests_ran and not tests[-1].get("is_error") and "OK" in last and "FAILED" not in last
        # the last run's own words: how many tests ran and failed (0 when unknown), and its
        # shortest AssertionError line
        out = last if self.tests_ran else ""
        ran = re.search(r"^Ran (\d+) tests?", out, re.MULTILINE)
        failed = re.search(r"^FAILED \((?:failures|errors)=(\d+)", out, re.MULTILINE)
        self.ran = int(ran.group(1)) if ran else 0
        self.failed = int(failed.group(1)) if failed else 0
        said = [m.strip() for m in re.findall(r"^AssertionError: (.+)$", out, re.MULTILINE)]
        self.assertion = min(said, key=len) if said else ""

    @classmethod
    def of(cls, messages: list[JsonObject]) -> Outcomes:
        """The outcomes of the calls a conversation holds."""
        return cls([(call["name"], result) for call, result, _, _ in exchanges(messages) if result is not None])

    def final(self, seamed: bool = False, asks: list[str] | None = None) -> str:
        """The closing report, claiming only what the results show; the micro-handoff is suggested
        only while no seam has happened, and what the human asked for stays open in it."""
        if self.edited and self.tests_pass:
            head = (f"Done. [measured] {f'All {self.ran} tests pass' if self.ran else 'The tests pass'} after changing "
                    "the start value of `total_value` from 1 to 0 in inventory.py; the diff is that one line.")
        elif self.tests_pass:  # fixed before (a session after /clear): the edit found nothing to replace
            head = (f"Nothing to fix. [measured] {f'All {self.ran} tests pass' if self.ran else 'The tests pass'}: "
                    "`total_value` already starts its sum at 0"
                    + (", so the edit found nothing to replace." if self.edit_tried else "."))
        elif self.edited:
            head = ("I changed the start value of `total_value` from 1 to 0, but I could not confirm the fix: "
                    "the test run " + ("did not pass" if self.tests_ran else "was not allowed") + " [measured].")
        else:
            head = ("Not fixed. [measured] The edit to inventory.py was denied, so `total_value` still starts its "
                    "sum at 1 and the tests still fail" + ("" if self.tests_ran else " (the test run was not allowed either)")
                    + ". Send any message and I'll propose the edit again.")
        if asks:
            head += "\n\nStill open, because I could not act on it: " + "; ".join(asks) + "."
        if seamed:
            return head
        if not self.edited and not self.tests_pass:
            return (head + "\n\nOr hand off first: **ctrl+o** or `/handoff` makes me write a field note that lists "
                    "the fix as open, and the tool traffic above leaves my context while every word stays.")
        return (head + "\n\nTry the micro-handoff now: press **ctrl+o** or type `/handoff`. I'll write a field note, "
                "and the tool traffic above leaves my context while every word stays. The status bar's `seam ~…` "
                "says what a seam would take now; when the note would add more than the strip takes, rhapsody shows "
                "you the figures and asks first.")


def exchanges(messages: list[JsonObject]) -> list[tuple[JsonObject, JsonObject | None, str, str]]:
    """Each tool call of a conversation: the call, its result (None while open), the narration said
    before it (the assistant message's text, whole) and the human's words sent with its result."""
    out = []
    for i, message in enumerate(messages):
        content = message["content"]
        if message["role"] != "assistant" or not isinstance(content, list):
            continue
        narration = " ".join(b["text"].strip() for b in content if b.get("type") == "text" and b["text"].strip())
        answer = messages[i + 1]["content"] if i + 1 < len(messages) else []
        answer = answer if isinstance(answer, list) else []
        results = {b.get("tool_use_id"): b for b in answer if b.get("type") == "tool_result"}
        words = next((b["text"].strip() for b in answer if b.get("type") == "text"), "")
        for b in content:
            if b.get("type") == "tool_use":
                out.append((b, results.get(b["id"]), narration, words))
    return out


def field_note(messages: list[JsonObject], outcome: Outcomes, asks: list[str] | None = None) -> JsonObject:
    """The demo agent's field note, built from the calls this request still holds (those since the
    last seam) and their results: what ran under Done, what was denied or failed under What went
    wrong, the narration quoted whole; Open from everything the agent has seen, and the human's
    words (hints, reasons for a denial) it could not act on."""
    done, wrong = [], []
    for call, result, narration, words in exchanges(messages):
        if call["name"] == "micro_handoff" or result is None:
            continue
        said = f" Narration before it: “{narration}”" if narration else ""
        if _denied(result):
            reason = f" (the human said: “{words}”)" if words and "their reason follows" in _content(result) else ""
            wrong.append(f"`{call['name']} {_digest(call['input'])}` was denied by the human{reason} [measured].{said}")
        elif result.get("is_error"):
            wrong.append(f"`{call['name']} {_digest(call['input'])}` → {_last_line(result)} [measured].{said}")
        else:
            done.append(f"`{call['name']} {_digest(call['input'])}` → ok{_tail(result)} [measured].{said}")
    return {
        "done": done,
        "open": _open(outcome) + list(asks or []),
        "went_wrong": wrong,
        "working_directory": "the demo project root, which is also the git repository",
        "tool_quirks": ["the bash tool returns stdout and stderr together, so unittest's report needs no 2>&1"],
        "recipes": [TESTS],
    }


def _open(outcome: Outcomes) -> list[str]:
    if outcome.tests_pass:
        return []
    if not outcome.edited and outcome.edit_tried:
        return ["fix inventory.py: `total_value` still starts its sum at 1, because the edit to 0 was denied; "
                "my next reply proposes it again"]
    if not outcome.edited:
        return ["fix inventory.py: `total_value` starts its sum at 1 [inferred]"]
    if not outcome.tests_pass:
        return ["confirm the fix: the last test run did not pass"]
    return []


def _digest(args: JsonObject) -> str:
    """The argument that says what a call did (command, path, pattern or action)."""
    for key in ("command", "path", "pattern", "action"):
        if args.get(key):
            return str(args[key])
    return ""


def _content(result: JsonObject) -> str:
    content = result.get("content", "")
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return str(content)


def _denied(result: JsonObject) -> bool:
    return bool(result.get("is_error")) and "permission denied" in _content(result)


def _has_results(blocks: list[JsonObject]) -> bool:
    return any(b.get("type") == "tool_result" for b in blocks)


def _last_line(result: JsonObject) -> str:
    """A failed result in its own words: the exit status and the last line before it."""
    lines = [line.strip() for line in _content(result).splitlines() if line.strip()]
    status = next((line.strip("[]") for line in reversed(lines) if line.startswith("[exit code")), "")
    said = [line for line in lines if not line.startswith("[")]
    return ", ".join(x for x in (status, f"“{said[-1]}”" if said else "") if x) or "error"


def _tail(result: JsonObject) -> str:
    """For a command that succeeded, its last line of output."""
    lines = [line.strip() for line in _content(result).splitlines() if line.strip() and not line.startswith("[")]
    return f" (“{lines[-1]}”)" if lines and "[exit code" in _content(result) else ""


def seamed(messages: list[JsonObject]) -> bool:
    """Whether a micro-handoff has happened in this conversation (its calls stay in context after a seam)."""
    return any(b.get("type") == "tool_use" and b.get("name") == "micro_handoff"
               for m in messages[:-1] if isinstance(m["content"], list) for b in m["content"])


def answered_handoff(messages: list[JsonObject]) -> bool:
    """Whether the last user message answers a micro_handoff call."""
    if len(messages) < 2 or not isinstance(messages[-2].get("content"), list):
        return False
    ids = {b.get("id") for b in messages[-2]["content"] if b.get("type") == "tool_use" and b.get("name") == "micro_handoff"}
    last = messages[-1]["content"]
    return isinstance(last, list) and any(b.get("tool_use_id") in ids for b in last if b.get("type") == "tool_result")


DEMO_FOLDER = "rhapsody-demo"
SAMPLE = Path(__file__).parent / "demo_project"
"""The sample project's source, copied for each demo."""
WELCOME = ("Demo: a scripted agent on a sample project, no key. Enter sends the task.\n"
           f"While the tests run ({PAUSE} s), type a hint and Enter: it lands after them.\n"
           "At the edit's diff, Enter allows; n or your words deny. Then ctrl+o.")
"""Three lines of at most 74 columns: with the welcome's own, they fit an 80x24 terminal whole."""


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
    # bytecode a run of the tests left next to the source must not reach the sample's first commit
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
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
    from rhapsody.providers.lazy import LazyModel
    from rhapsody.loopback.server import LoopbackServer

    server = LoopbackServer(DemoResponder()).start()
    root = prepare_project()
    try:
        def adapter() -> Model:
            from rhapsody.providers.anthropic import loopback_model

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
