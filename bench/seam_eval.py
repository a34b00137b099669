"""The seam evaluation (seed 004's three-arm test): is what a seam strips still reachable?

    python bench/seam_eval.py --loopback        # scripted responder: proves the mechanics, offline
    python bench/seam_eval.py [--model ID]      # the real model (needs ANTHROPIC_API_KEY)
    python bench/seam_eval.py --provider openai --model NAME   # or any provider rhapsody speaks
    python bench/seam_eval.py --record          # re-record the tasks in bench/seam_eval/

Each task in bench/seam_eval/ is a session recorded through the real loop and tools
(bench/seam_eval_tasks.py): an agent reads files and runs commands, narrating intent but
never the values it reads, then writes a field note at a micro-handoff. A follow-up
question asks for one value that lay only in a tool result the seam stripped (recording
checks that the value cannot be found in what the seam kept). Each question is asked in
three arms, each a copy of the recorded session resumed through the real loop:

- full: the history as if no seam had happened;
- seam: the context after the seam, no `recall` tool;
- seam + recall: the context after the seam, with the `recall` tool (nothing else runs).

The answer (the last line of the final reply) is scored by exact match against the value
recorded in the tool output; input tokens are the API-reported input (uncached + cache
writes + cache reads) summed over the arm's requests. With `--loopback`, the "model" is
a responder that answers only from what the request carries: it looks for the value in the
request's text and tool results, and when it is absent and `recall` is offered, it searches
and then fetches by id, so the third arm shows the recall mechanics end to end.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "seam_eval"
sys.path.insert(0, str(REPO / "bench"))

from seam_eval_tasks import TASKS  # noqa: E402

from rhapsody.config import Settings  # noqa: E402
from rhapsody.core.history import read_history  # noqa: E402
from rhapsody.core.loop import Agent  # noqa: E402
from rhapsody.core.figures import USAGE_KEYS  # noqa: E402
from rhapsody.core.session import Session  # noqa: E402
from rhapsody.core.tools import Toolbox  # noqa: E402
from rhapsody.loopback.script import ScriptedResponder, call, say  # noqa: E402
from rhapsody.loopback.server import LoopbackServer  # noqa: E402

ARMS = ("full", "seam", "seam+recall")
MODEL = "claude-sonnet-5-5"
ASK = ("Follow-up question about the work in this session: {question} Answer from what you know of this "
       "session{tools}. Reply with the value alone on the last line, exactly as it appeared, or UNKNOWN.")
NOTE = {
    "done": ["inspected the files the task names [measured]"],
    "open": ["report the findings to the human"],
    "went_wrong": [],
    "working_directory": "the project root, which is the git repository",
}


# -- the loopback "model" -----------------------------------------------------------------

class Reader:
    """Answers only from what a request carries; uses `recall` when the value is not there."""

    def __init__(self) -> None:
        self.pattern = re.compile("$^")
        self.query = ""

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        turn = _current_turn(body["messages"])
        if any("Micro-handoff requested" in t for t in _texts(turn[:1])):
            return {"content": [{"type": "text", "text": "Writing my field note now, facts first as asked."},
                                {"type": "tool_use", "name": "micro_handoff", "input": NOTE}]}
        found = self.pattern.search(_visible(body["messages"]))
        if found:
            return say(found.group(1))
        if "recall" not in {t["name"] for t in body.get("tools", [])}:
            return say("UNKNOWN")
        return self._recall_step(turn)

    def _recall_step(self, turn: list[dict[str, Any]]) -> dict[str, Any]:
        calls = [b for m in turn if m["role"] == "assistant" for b in _blocks(m) if b.get("type") == "tool_use"]
        narration = "The value was in a tool result the seam removed, so I will look it up with recall."
        if not calls:
            return call(narration, "recall", query=self.query)
        listing = _result_of(turn, calls[0]["id"])
        fetched = {c["input"].get("id") for c in calls}
        ids = [line.split()[0] for line in listing.splitlines() if re.match(r"^\S+:\S+ \(", line)]
        remaining = [i for i in ids if i not in fetched]
        return call(narration, "recall", id=remaining[0]) if remaining else say("UNKNOWN")


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    return [b.get("text", "") for m in messages for b in _blocks(m) if b.get("type") == "text"]


def _current_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages since the newest user message that carries text of its own."""
    start = max((i for i, m in enumerate(messages) if m["role"] == "user" and _texts([m])), default=0)
    return messages[start:]


def _result_of(messages: list[dict[str, Any]], tool_use_id: str) -> str:
    for m in messages:
        for b in _blocks(m):
            if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_use_id:
                content = b.get("content")
                return content if isinstance(content, str) else " ".join(c.get("text", "") for c in content or [])
    return ""


def _visible(messages: list[dict[str, Any]]) -> str:
    """Every text and tool result of the request, except recall's search listings (snippets, not values)."""
    searches = {b["id"] for m in messages for b in _blocks(m)
                if b.get("type") == "tool_use" and b.get("name") == "recall" and "query" in b.get("input", {})}
    parts = _texts(messages)
    for m in messages:
        for b in _blocks(m):
            if b.get("type") == "tool_result" and b.get("tool_use_id") not in searches:
                parts.append(_result_of([m], b["tool_use_id"]))
    return "\n".join(parts)


# -- recording ----------------------------------------------------------------------------

def _project(root: Path, task: dict[str, Any]) -> None:
    for name, text in task["files"].items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    env = {**os.environ, "GIT_AUTHOR_NAME": "Eval", "GIT_AUTHOR_EMAIL": "eval@example.com",
           "GIT_COMMITTER_NAME": "Eval", "GIT_COMMITTER_EMAIL": "eval@example.com"}
    run = lambda *a: subprocess.run(["git", *a], cwd=root, env=env, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("add", "-A")
    run("commit", "-qm", "initial")
    for subject in task.get("commits", []):
        run("commit", "-q", "--allow-empty", "-m", subject)


async def _record_one(task: dict[str, Any], out: Path) -> dict[str, Any]:
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
            wiring = build(root, Settings(permission_mode="yolo"), _client(server.url), MODEL)
            await _drain(wiring.agent.run("Look into this task's files and tell me when you have read them."))
            wiring.agent.request_handoff()
            await _drain(wiring.agent.run())
        finally:
            server.stop()
        target = out / f"{task['name']}.jsonl"
        shutil.copyfile(wiring.session.path, target)
    return {"name": task["name"], "history": target.name, "question": task["question"],
            "answer": _check(task, read_history(target).records), "pattern": task["pattern"], "query": task["query"]}


def _check(task: dict[str, Any], records: list[dict[str, Any]]) -> str:
    """The recorded answer; fails unless it lies only in tool output the seam stripped."""
    from rhapsody.core.context import Conversation
    from rhapsody.core.messages import TextBlock, ToolResultBlock
    from rhapsody.core.strip import authored_texts
    from rhapsody.core.traffic import cuts

    [seam] = cuts(records)
    stripped = "\n".join(r.text() for _, r in seam.calls.values() if r is not None)
    found = re.search(task["pattern"], stripped)
    if not found:
        raise SystemExit(f"{task['name']}: the pattern finds nothing in the stripped tool output")
    kept = Conversation.from_records(records).active()
    kept_text = "\n".join(b.text if isinstance(b, TextBlock) else b.text() for m in kept for b in m.content
                           if isinstance(b, (TextBlock, ToolResultBlock)))
    if re.search(task["pattern"], kept_text):
        raise SystemExit(f"{task['name']}: the answer is still in the context after the seam")
    if any(re.search(rf"(?<![\w.]){re.escape(found.group(1))}(?![\w.])", t) for t in authored_texts(kept)):
        raise SystemExit(f"{task['name']}: the answer appears in authored text")
    return found.group(1)


# -- the three arms -----------------------------------------------------------------------

def _client(url: str) -> Any:
    import anthropic

    from rhapsody.anthropic_model import AnthropicModel

    return AnthropicModel(anthropic.AsyncAnthropic(base_url=url, api_key="loopback", max_retries=0), base_delay=0.0)


async def _drain(events: Any) -> None:
    async for _ in events:
        pass


def _arm_session(root: Path, source: Path, arm: str, model: str | None) -> Session:
    records = read_history(source).records
    if arm == "full":  # as if no handoff had happened: no seam, and no handoff state to resume into
        records = [r for r in records if r["kind"] not in ("seam", "unseam", "handoff", "handoff_asked")]
    path = root / ".rhapsody" / "history" / f"{records[0]['session']}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    session = Session.resume(root, path, model=model)
    if arm != "seam+recall":
        session.spec = dataclasses.replace(session.spec, tools=[t for t in session.spec.tools if t["name"] != "recall"])
    return session


async def ask(task: dict[str, Any], arm: str, model: Any, model_id: str | None) -> dict[str, Any]:
    """One question in one arm: the reply's last line, whether it matches, the input tokens."""
    from rhapsody.tools.handoff import Recall
    from rhapsody.wiring import policy

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        session = _arm_session(root, DATA / task["history"], arm, model_id)
        toolbox = Toolbox([Recall()] if arm == "seam+recall" else [], "yolo")
        agent = Agent(session, model, toolbox, policy(Settings()))
        start = len(session.records)
        tools = " (you may search and fetch the stripped tool output with `recall`; nothing else runs)" \
            if arm == "seam+recall" else " (no tools run in this arm)"
        await _drain(agent.run(ASK.format(question=task["question"], tools=tools)))
        new = session.records[start:]
        session.writer.close()
    reply = "\n".join(session.conversation.messages[-1].texts()) if session.conversation.messages[-1].role == "assistant" else ""
    answer = _last_line(reply)
    usage = [r for r in new if r["kind"] == "usage"]
    return {"answer": answer, "correct": answer == task["answer"], "requests": len(usage),
            "input_tokens": sum(int(u.get(k) or 0) for u in usage for k in USAGE_KEYS[:3]),
            "recall_calls": sum(1 for r in new if r["kind"] == "tool_run" and r.get("name") == "recall")}


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip("`'\"*").rstrip(".").strip() if lines else ""


async def evaluate(real: Any, model_id: str | None, only: list[str]) -> list[dict[str, Any]]:
    """Every task in every arm, against `real` (a model provider), or the loopback reader when None."""
    tasks = json.loads((DATA / "tasks.json").read_text(encoding="utf-8"))
    tasks = [t for t in tasks if not only or t["name"] in only]
    reader = Reader()
    server = LoopbackServer(reader).start() if real is None else None
    model = real if server is None else _client(server.url)
    rows = []
    try:
        for task in tasks:
            reader.pattern, reader.query = re.compile(task["pattern"]), task["query"]
            arms = {arm: await ask(task, arm, model, model_id) for arm in ARMS}
            rows.append({"task": task["name"], "expected": task["answer"], "arms": arms})
    finally:
        if server:
            server.stop()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The results as a Markdown table: per task, each arm's answer mark and input tokens."""
    out = ["| task | expected | " + " | ".join(ARMS) + " |", "| --- | --- | " + " | ".join("---" for _ in ARMS) + " |"]
    for row in rows:
        cells = [f"{'✓' if a['correct'] else '✗ ' + (a['answer'][:12] or '—')} ({a['input_tokens']:,} tok)"
                 for a in (row["arms"][arm] for arm in ARMS)]
        out.append(f"| {row['task']} | {row['expected'][:16]} | " + " | ".join(cells) + " |")
    n = len(rows)
    score = [sum(r["arms"][arm]["correct"] for r in rows) for arm in ARMS]
    tokens = [sum(r["arms"][arm]["input_tokens"] for r in rows) for arm in ARMS]
    out.append("| **exact match** | | " + " | ".join(f"**{s}/{n}**" for s in score) + " |")
    out.append("| **input tokens, all questions** | | " + " | ".join(f"{t:,}" for t in tokens) + " |")
    recalls = sum(r["arms"]["seam+recall"]["recall_calls"] for r in rows)
    out.append(f"\nrecall calls in the seam+recall arm: {recalls}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The seed-004 three-arm seam evaluation.")
    parser.add_argument("--loopback", action="store_true", help="use the scripted loopback responder (offline)")
    parser.add_argument("--provider", choices=("anthropic", "bedrock", "vertex", "openai"), default="anthropic",
                        help="provider of the real run (its environment as for rhapsody itself)")
    parser.add_argument("--model", help="model id for the real run (default on anthropic: the newest Sonnet the SDK lists)")
    parser.add_argument("--record", action="store_true", help="re-record the tasks into bench/seam_eval/")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--task", action="append", default=[], help="run only this task (repeatable)")
    ns = parser.parse_args(argv)
    if ns.record:
        DATA.mkdir(exist_ok=True)
        recorded = [asyncio.run(_record_one(t, DATA)) for t in TASKS]
        (DATA / "tasks.json").write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"recorded {len(recorded)} tasks into {DATA}")
        return 0
    real, model_id = None, None
    if not ns.loopback:
        from rhapsody.core.errors import RhapsodyError
        from rhapsody.providers import make_model

        try:
            real = make_model(Settings(provider=ns.provider, model=ns.model))
        except RhapsodyError as exc:
            print(f"seam_eval: {exc}; use --loopback for the offline run", file=sys.stderr)
            return 2
        model_id = ns.model
        if model_id is None:
            from rhapsody.anthropic_model import default_model

            model_id = default_model()
    rows = asyncio.run(evaluate(real, model_id, ns.task))
    if ns.json:
        print(json.dumps(rows, ensure_ascii=False))
    else:
        print(f"{'loopback responder' if ns.loopback else f'{ns.provider} {model_id}'}: {len(rows)} tasks\n")
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
