"""The seam evaluation (seed 004's three-arm test): is what a seam strips still reachable?

    python bench/seam_eval.py --loopback        # scripted responder: proves the mechanics, offline
    python bench/seam_eval.py [--model ID]      # the real model (needs ANTHROPIC_API_KEY)
    python bench/seam_eval.py --provider openai --model NAME   # or any provider rhapsody speaks
    python bench/seam_eval.py --record          # re-record the tasks in bench/seam_eval/

Each task in bench/seam_eval/ is a long session recorded through the real loop and tools
(bench/seam_eval_tasks.py): an agent works through a project for 30 or more tool calls,
narrating its intent but never the values it reads, then writes a field note at a
micro-handoff. Follow-up questions ask for exact values that lay only in tool results the
seam stripped (recording checks that no value can be found in what the seam kept), and a
control question asks for a value that never existed in the session (right answer:
UNKNOWN). Each question is asked in three arms, each a copy of the recorded session
resumed through the real loop:

- full: the history as if no seam had happened;
- seam: the context after the seam, no `recall` tool;
- seam + recall: the context after the seam, with the `recall` tool (nothing else runs).

The answer (the last line of the final reply) is scored by exact match; input tokens are
the API-reported input (uncached + cache writes + cache reads) summed over the arm's
requests. Every reply is also checked for identity: it must speak in the first person and
use none of THIRD_PERSON (the marks of an agent reading someone else's notes). A recorded
task must strip at least MIN_CALLS calls and at least RECALL_RATIO times the tokens of the
largest recall round trip (recall's calls and results) the offline run makes.

With `--loopback`, the "model" is a responder that answers only from what the request
carries: it looks for the value in the request's text and tool results; when it is absent
and `recall` is offered, it searches and fetches hits by id, else it answers UNKNOWN.
A real run stops before the question that would pass `--max-dollars` and writes its table
into docs/performance.md (between the `seam-eval:real` markers).
"""

from __future__ import annotations

from rhapsody.core.session.records import dumped
import argparse
import asyncio
import dataclasses
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "bench" / "seam_eval"
DOCS = REPO / "docs" / "performance.md"
sys.path.insert(0, str(REPO / "bench"))

from seam_eval_record import drain, loopback_model, record_all  # noqa: E402
from seam_eval_reader import Reader  # noqa: E402

from rhapsody.config.settings import Settings  # noqa: E402
from rhapsody.core.session.history import read_history  # noqa: E402
from rhapsody.core.agent.loop import Agent  # noqa: E402
from rhapsody.core.session.session_figures import USAGE_KEYS  # noqa: E402
from rhapsody.core.session.messages import ToolResultBlock, ToolUseBlock  # noqa: E402
from rhapsody.core.pricing import cost, priced  # noqa: E402
from rhapsody.core.session.session import Session  # noqa: E402
from rhapsody.core.session.tokens import estimate_chars  # noqa: E402
from rhapsody.core.toolbox.orchestrator import Toolbox  # noqa: E402
from rhapsody.loopback.server import LoopbackServer  # noqa: E402

ARMS = ("full", "seam", "seam+recall")
MIN_CALLS = 30
RECALL_RATIO = 20
REPLY = 300
"""Output tokens a reply is estimated at, for the dollar cap."""
ASK = ("Follow-up question about the work in this session: {question} Answer from what you know of this "
       "session{tools}. In a sentence, say how you know it; then give the value alone on the last line, "
       "exactly as it appeared, or UNKNOWN if you cannot tell.")
THIRD_PERSON = (
    "the previous session", "a previous session", "the prior session", "the earlier session", "the last session",
    "the previous conversation", "a previous conversation", "the previous agent", "the prior agent",
    "a previous agent", "the previous assistant", "the previous instance", "my predecessor", "the agent before me",
    "according to the summary", "according to the notes", "according to the field note", "according to the handoff",
    "the summary says", "the notes say", "the note says", "the field note says", "the handoff says",
    "as summarized", "as summarised", "based on the summary", "the transcript shows",
)
"""Phrases of an agent that reads its own past as someone else's notes (seed 000's failure)."""
FIRST_PERSON = re.compile(r"\bI\b|\b(?i:my|me|mine|myself)\b")


def identity_problem(reply: str) -> str:
    """Why a reply fails the identity check ('' when it passes): no first person, or a third-person phrase."""
    lowered = reply.lower()
    said = [p for p in THIRD_PERSON if p in lowered]
    if said:
        return f"speaks of its past in the third person: {said[0]!r}"
    return "" if FIRST_PERSON.search(reply) else "no first-person word"


# -- the three arms -----------------------------------------------------------------------

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


async def ask(history: str, question: dict[str, Any], arm: str, model: Any, model_id: str | None) -> dict[str, Any]:
    """One question in one arm: the reply's last line, whether it matches, identity, tokens."""
    from rhapsody.tools.handoff import Recall
    from rhapsody.wiring import policy

    with tempfile.TemporaryDirectory() as tmp:
        session = _arm_session(Path(tmp), DATA / history, arm, model_id)
        # each arm answers over the context it was given: no automatic seam at the question
        agent = Agent(session, model, Toolbox([Recall()] if arm == "seam+recall" else [], "yolo"),
                      policy(Settings(seam_policy="threshold")))
        start, first = len(session.records), len(session.conversation.messages)
        tools = " (you may search and fetch the stripped tool output with `recall`; nothing else runs)" \
            if arm == "seam+recall" else " (no tools run in this arm)"
        await drain(agent.run(ASK.format(question=question["question"], tools=tools)))
        session.writer.close()
    return _scored(session, start, first, question["answer"])


def _scored(session: Session, start: int, first: int, expected: str) -> dict[str, Any]:
    """What one arm's turn (records from `start`, messages from `first`) answered, said and cost."""
    failed = [r["message"] for r in dumped(session.records[start:]) if r["kind"] == "error"]
    if failed:
        raise ModelFailed(failed[0])
    turn = session.conversation.messages[first:]
    said = "\n".join(t for m in turn if m.role == "assistant" for t in m.texts())
    answer = _last_line("\n".join(turn[-1].texts()) if turn and turn[-1].role == "assistant" else "")
    usage = [r for r in dumped(session.records[start:]) if r["kind"] == "usage"]
    calls = {b.id: b for m in turn for b in m.content if isinstance(b, ToolUseBlock) and b.name == "recall"}
    recalled = [len(json.dumps(calls[b.tool_use_id].input)) + len(b.text())
                for m in turn for b in m.content if isinstance(b, ToolResultBlock) and b.tool_use_id in calls]
    return {"answer": answer, "correct": answer == expected, "identity": identity_problem(said),
            "requests": len(usage), "input_tokens": sum(int(u.get(k) or 0) for u in usage for k in USAGE_KEYS[:3]),
            "usage": {k: sum(int(u.get(k) or 0) for u in usage) for k in USAGE_KEYS},
            "recall_calls": len(calls), "recall_tokens": estimate_chars(sum(recalled))}


class ModelFailed(Exception):
    """The model answered an error (after the loop's retries): the run stops there."""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip("`'\"*").rstrip(".").strip() if lines else ""


@dataclasses.dataclass
class Budget:
    """The dollar cap of a real run: spent so far, and whether a question was left out for it (None: unpriced, no cap)."""

    model: str | None
    cap: float
    spent: float = 0.0
    stopped: bool = False

    def allows(self, task: dict[str, Any], dearest: float) -> bool:
        """Whether the next question of `task` still fits under the cap.

        Its cost is estimated as the larger of the dearest question so far and all its requests
        priced as cache writes: the full context once, the kept context four times (the seam
        arm, then search, fetch and answer with recall), and a short reply each.
        """
        if self.model is None:
            return True
        sent = task["context_tokens"] + 4 * task["kept_tokens"]
        estimate = max(dearest, cost(self.model, {"cache_creation_input_tokens": sent, "output_tokens": 5 * REPLY}))
        self.stopped = self.stopped or self.spent + estimate > self.cap
        return not self.stopped

    def charge(self, arms: dict[str, dict[str, Any]]) -> float:
        """Add what one question's arms cost; returns that cost."""
        spent = sum(cost(self.model, a["usage"]) for a in arms.values()) if self.model else 0.0
        self.spent += spent
        return spent


async def evaluate(model: Any, model_id: str | None, only: list[str], cap: float = 0.0,
                   reader: Reader | None = None) -> dict[str, Any]:
    """Every question of every task in every arm; `reader`, when given, is the loopback responder to aim."""
    tasks = json.loads((DATA / "tasks.json").read_text(encoding="utf-8"))
    tasks = [t for t in tasks if not only or t["name"] in only]
    budget, dearest = Budget(model_id if model_id and priced(model_id) else None, cap), 0.0
    rows: list[dict[str, Any]] = []
    result: dict[str, Any] = {"rows": rows, "questions": sum(len(t["questions"]) for t in tasks), "error": ""}
    try:
        for task, question in ((t, q) for t in tasks for q in t["questions"]):
            if not budget.allows(task, dearest):
                break
            if reader:
                reader.aim(question["pattern"], question["query"])
            arms = {arm: await ask(task["history"], question, arm, model, model_id) for arm in ARMS}
            dearest = max(dearest, budget.charge(arms))
            rows.append({"task": task["name"], "question": question["id"], "expected": question["answer"],
                         "control": question["answer"] == "UNKNOWN", "stripped_calls": task["stripped_calls"],
                         "stripped_tokens": task["stripped_tokens"], "arms": arms})
    except ModelFailed as exc:
        result["error"] = str(exc)
    return result | {"dollars": round(budget.spent, 4), "stopped_at_cap": budget.stopped}


def loopback_run(only: list[str]) -> dict[str, Any]:
    """The offline run: every arm against the loopback reader."""
    reader = Reader()
    server = LoopbackServer(reader).start()
    try:
        return asyncio.run(evaluate(loopback_model(server.url), None, only, reader=reader))
    finally:
        server.stop()


def too_short(rows: list[dict[str, Any]]) -> list[str]:
    """Questions whose task strips too little to dwarf the recall round trip the run made."""
    return [f"{r['task']}/{r['question']}: strips {r['stripped_calls']} calls, ~{r['stripped_tokens']:,} tokens, "
            f"against a recall round trip of ~{r['arms']['seam+recall']['recall_tokens']:,}"
            for r in rows if r["stripped_calls"] < MIN_CALLS
            or r["stripped_tokens"] < RECALL_RATIO * r["arms"]["seam+recall"]["recall_tokens"]]


# -- the table ----------------------------------------------------------------------------

def _cell(arm: dict[str, Any]) -> str:
    mark = "✓" if arm["correct"] else f"✗ {arm['answer'][:14] or '—'}"
    return f"{mark}{'' if not arm['identity'] else ' (identity ✗)'} ({arm['input_tokens']:,} tok)"


def table(result: dict[str, Any]) -> str:
    """The results as Markdown: per question each arm's mark and input tokens, then the totals."""
    rows = result["rows"]
    out = ["| task / question | expected | " + " | ".join(ARMS) + " |", "| --- | --- | " + " | ".join("---" for _ in ARMS) + " |"]
    for row in rows:
        out.append(f"| {row['task']} / {row['question']} | {row['expected'][:16]} | "
                   + " | ".join(_cell(row["arms"][arm]) for arm in ARMS) + " |")
    values, controls = [r for r in rows if not r["control"]], [r for r in rows if r["control"]]

    def total(label: str, cell: Any) -> None:
        out.append(f"| **{label}** | | " + " | ".join(f"**{cell(arm)}**" for arm in ARMS) + " |")

    total("exact value", lambda a: f"{sum(r['arms'][a]['correct'] for r in values)}/{len(values)}")
    total("control: UNKNOWN", lambda a: f"{sum(r['arms'][a]['correct'] for r in controls)}/{len(controls)}")
    total("identity", lambda a: f"{sum(not r['arms'][a]['identity'] for r in rows)}/{len(rows)}")
    total("input tokens", lambda a: f"{sum(r['arms'][a]['input_tokens'] for r in rows):,}")
    total("requests", lambda a: f"{sum(r['arms'][a]['requests'] for r in rows)}")
    out.append("")
    for name in dict.fromkeys(r["task"] for r in rows):
        mine = [r for r in rows if r["task"] == name]
        biggest = max(r["arms"]["seam+recall"]["recall_tokens"] for r in mine)
        out.append(f"- {name}: the seam strips {mine[0]['stripped_calls']} calls, ~{mine[0]['stripped_tokens']:,} tokens; "
                   f"the largest recall round trip is ~{biggest:,} tokens "
                   f"({mine[0]['stripped_tokens'] / max(biggest, 1):.0f}×)")
    problems = [f"{r['task']}/{r['question']} {arm}: {r['arms'][arm]['identity']}" for r in rows for arm in ARMS
                if r["arms"][arm]["identity"]]
    out += [f"- identity failures: {'; '.join(problems) if problems else 'none'}",
            f"- recall calls in the seam+recall arm: {sum(r['arms']['seam+recall']['recall_calls'] for r in rows)}"]
    if result["stopped_at_cap"]:
        out.append(f"- stopped at the dollar cap after {len(rows)} of {result['questions']} questions")
    return "\n".join(out)


def write_docs(path: Path, marker: str, text: str) -> None:
    """Put `text` between the `seam-eval:<marker>` comments of `path` (appended when they are missing)."""
    begin, end = f"<!-- seam-eval:{marker} -->", f"<!-- /seam-eval:{marker} -->"
    doc = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{begin}\n{text}\n{end}"
    if begin in doc and end in doc:
        doc = doc[:doc.index(begin)] + block + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(doc, encoding="utf-8")


# -- the command --------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="The seed-004 three-arm seam evaluation.")
    parser.add_argument("--loopback", action="store_true", help="use the scripted loopback responder (offline)")
    parser.add_argument("--provider", choices=("anthropic", "bedrock", "vertex", "openai"), default="anthropic",
                        help="provider of the real run (its environment as for rhapsody itself)")
    parser.add_argument("--model", help="model id for the real run (default on anthropic: the newest Sonnet the SDK lists)")
    parser.add_argument("--max-dollars", type=float, default=5.0,
                        help="real runs stop before a question that would pass this spend (default 5)")
    parser.add_argument("--docs", type=Path, help="write the table into this file (a real run's default: docs/performance.md)")
    parser.add_argument("--record", action="store_true", help="re-record the tasks into bench/seam_eval/")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--task", action="append", default=[], help="run only this task (repeatable)")
    return parser


def _real_model(ns: argparse.Namespace) -> tuple[Any, str]:
    from rhapsody.core.errors import RhapsodyError
    from rhapsody.providers.pick import make_model

    try:
        real = make_model(Settings(provider=ns.provider, model=ns.model))
    except RhapsodyError as exc:
        raise SystemExit(f"seam_eval: {exc}; use --loopback for the offline run") from None
    if ns.model:
        return real, ns.model
    from rhapsody.providers.anthropic import default_model

    return real, default_model()


def _report(ns: argparse.Namespace, model_id: str | None, result: dict[str, Any]) -> str:
    who = "loopback responder" if ns.loopback else f"{ns.provider} {model_id}"
    spent = "" if ns.loopback else f", ${result['dollars']:.2f} of a ${ns.max_dollars:.2f} cap" \
        if priced(model_id or "") else ", an unpriced model (no dollar cap)"
    day = time.strftime("%Y-%m-%d", time.gmtime())
    return f"{who}, {day}: {len(result['rows'])} questions{spent}\n\n{table(result)}"


def main(argv: list[str] | None = None) -> int:
    ns = _parser().parse_args(argv)
    if ns.record:
        print(record_all(DATA, MIN_CALLS))
        return 0
    names = {t["name"] for t in json.loads((DATA / "tasks.json").read_text(encoding="utf-8"))}
    unknown = [t for t in ns.task if t not in names]
    if unknown:
        print(f"seam_eval: no task named {unknown[0]!r} (there are: {', '.join(sorted(names))})", file=sys.stderr)
        return 2
    model_id = None
    if ns.loopback:
        result = loopback_run(ns.task)
    else:
        try:
            real, model_id = _real_model(ns)
        except SystemExit as exc:
            print(exc, file=sys.stderr)
            return 2
        result = asyncio.run(evaluate(real, model_id, ns.task, ns.max_dollars))
    report = _report(ns, model_id, result)
    print(json.dumps(result, ensure_ascii=False) if ns.json else report)
    return finish(result, report, ns.docs or (None if ns.loopback else DOCS), "loopback" if ns.loopback else "real")


def finish(result: dict[str, Any], report: str, docs: Path | None, marker: str) -> int:
    """Write the table into `docs` unless the run failed; the exit status (1: failed, or a task too short)."""
    if result["error"]:
        print(f"seam_eval: the model failed after {len(result['rows'])} questions ({result['error']}); "
              "no table was written", file=sys.stderr)
        return 1
    if docs:
        write_docs(docs, marker, report)
    short = too_short(result["rows"]) if marker == "loopback" else []
    for line in short:
        print(f"seam_eval: task too short: {line}", file=sys.stderr)
    return 1 if short else 0


if __name__ == "__main__":
    sys.exit(main())
