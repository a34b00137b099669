"""Recording the seam evaluation's tasks (`bench/seam_eval.py --record`) and checking them.

Each task's project is built in a temporary git repository, its steps are played through the
real loop and tools by a scripted responder, a micro-handoff is asked for and committed, and
the history is copied into bench/seam_eval/. `check` then proves what the evaluation relies
on: the seam stripped enough calls, every value answer lies only in stripped tool output
(not in the kept context, not in any authored text, one value wherever the pattern matches),
and no control answer exists anywhere in the session.
"""

from __future__ import annotations

from rhapsody.core.session.records import parse
import asyncio
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from seam_eval_tasks import TASKS

from rhapsody.config.settings import Settings
from rhapsody.core.session.history import read_history
from rhapsody.loopback.script import ScriptedResponder, call, say
from rhapsody.loopback.server import LoopbackServer

MODEL = "claude-sonnet-5-5"
UNKNOWN = "UNKNOWN"
NOTE = {
    "done": ["worked through the task's files, logs and configuration [measured]"],
    "open": ["report the findings to the human"],
    "went_wrong": [],
    "working_directory": "the project root, which is the git repository",
}
GIT_ENV = {"GIT_AUTHOR_NAME": "Eval", "GIT_AUTHOR_EMAIL": "eval@example.com",
           "GIT_COMMITTER_NAME": "Eval", "GIT_COMMITTER_EMAIL": "eval@example.com"}


def _project(root: Path, task: dict[str, Any]) -> None:
    for name, text in task["files"].items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    env = {**os.environ, **GIT_ENV}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "initial")
    for subject, name, appended in task.get("commits", []):  # each touches a file: `git log -- .` hides empty ones
        with (root / name).open("a", encoding="utf-8") as file:
            file.write(appended)
        git("commit", "-qam", subject)


def loopback_model(url: str) -> Any:
    """The real model adapter on the loopback server at `url`, no retries, no backoff."""
    import anthropic

    from rhapsody.providers.anthropic import AnthropicModel

    return AnthropicModel(anthropic.AsyncAnthropic(base_url=url, api_key="loopback", max_retries=0), base_delay=0.0)


async def drain(events: Any) -> None:
    """Run a turn to its end, its events unread."""
    async for _ in events:
        pass


async def _record_one(task: dict[str, Any], out: Path) -> Path:
    from rhapsody.wiring import build

    turns = [call(s["narration"], s["tool"], **s["input"]) for s in task["steps"]]
    turns += [say("I have what I need for this task; the details are in the results above."),
              {"content": [{"type": "text", "text": "Writing my field note now, facts first as asked."},
                           {"type": "tool_use", "name": "micro_handoff", "input": NOTE}]},
              say("Noted.")]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / task["name"]
        root.mkdir()
        _project(root, task)
        server = LoopbackServer(ScriptedResponder(turns)).start()
        try:
            wiring = build(root, Settings(permission_mode="yolo", seam_policy="threshold"), loopback_model(server.url), MODEL)
            await drain(wiring.agent.run("Look into this task's files and tell me when you have read them."))
            wiring.agent.request_handoff()
            await drain(wiring.agent.run())
        finally:
            server.stop()
        target = out / f"{task['name']}.jsonl"
        shutil.copyfile(wiring.session.path, target)
    return target


def check(task: dict[str, Any], records: list[dict[str, Any]], min_calls: int) -> dict[str, Any]:
    """The task's entry in tasks.json; raises SystemExit where the recording does not prove the test."""
    from rhapsody.core.session.traffic_digest import cuts

    [seam] = cuts([parse(r) for r in records])
    stripped = [(u, r) for u, r in seam.calls.values()]
    if len(stripped) < min_calls:
        raise SystemExit(f"{task['name']}: the seam strips {len(stripped)} calls, fewer than {min_calls}")
    [mark] = [r for r in records if r["kind"] == "seam"]
    questions = [{k: q[k] for k in ("id", "question", "pattern", "query")} | {"answer": _answer(task, q, records)}
                 for q in task["questions"]]
    return {"name": task["name"], "history": f"{task['name']}.jsonl", "stripped_calls": len(stripped),
            "stripped_tokens": mark["before"]["est_tokens"] - mark["after"]["est_tokens"],
            "context_tokens": mark["before"]["est_tokens"], "kept_tokens": mark["after"]["est_tokens"], "questions": questions}


def _answer(task: dict[str, Any], question: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """The recorded answer: UNKNOWN for a control, else the one value the stripped output holds."""
    from rhapsody.core.session.context import Conversation
    from rhapsody.core.session.strip import authored_texts
    from rhapsody.core.session.traffic_digest import cuts

    name, pattern = f"{task['name']}/{question['id']}", question["pattern"]
    conversation = Conversation.from_records(records)
    if question.get("control"):
        if re.search(pattern, _text(conversation.messages)):
            raise SystemExit(f"{name}: the control's value exists in the session")
        return UNKNOWN
    [seam] = cuts([parse(r) for r in records])
    stripped = "\n".join(r.text() for _, r in seam.calls.values() if r is not None)
    values = {m.group(1) for m in re.finditer(pattern, stripped)}
    if len(values) != 1:
        raise SystemExit(f"{name}: the pattern finds {len(values)} values in the stripped tool output, not one")
    kept = conversation.active()
    if re.search(pattern, _text(kept)):
        raise SystemExit(f"{name}: the answer is still in the context after the seam")
    [value] = values
    if any(re.search(rf"(?<![\w.]){re.escape(value)}(?![\w.])", t) for t in authored_texts(kept)):
        raise SystemExit(f"{name}: the answer appears in authored text")
    return value


def _text(messages: list[Any]) -> str:
    """Every text block and tool result of `messages`, one after another."""
    from rhapsody.core.session.messages import TextBlock, ToolResultBlock

    return "\n".join(b.text if isinstance(b, TextBlock) else b.text() for m in messages for b in m.content
                     if isinstance(b, (TextBlock, ToolResultBlock)))


def record_all(out: Path, min_calls: int) -> str:
    """Record every task into `out` with its tasks.json; returns one line saying so."""
    out.mkdir(exist_ok=True)
    entries = []
    for task in TASKS:
        path = asyncio.run(_record_one(task, out))
        entries.append(check(task, read_history(path).records, min_calls))
    (out / "tasks.json").write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return f"recorded {len(entries)} tasks into {out}: " + ", ".join(
        f"{e['name']} ({e['stripped_calls']} calls, ~{e['stripped_tokens']:,} tokens stripped)" for e in entries)
