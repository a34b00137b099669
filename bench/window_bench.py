"""A long session driven to and past a context window, through the real loop and adapter.

    .venv/bin/python bench/window_bench.py [--calls 60] [--window 60000] [--chars 16000]

A loopback server enforces a window of `--window` tokens (its own count: one token per four
characters of each part's JSON) and plays an agent that makes `--calls` narrated bash calls of
`--chars` characters of output each, writes a field note whenever it is asked for one, and goes
on. Each run is one turn of the real loop (anthropic SDK, rhapsody's adapter, the sandbox as
configured) in a fresh git repository under a temporary folder.

Runs: the safety net alone (no automatic seam; the API refuses, rhapsody strips), the safety net
on rhapsody's own estimate (`context_window` set to the server's window, so nothing is refused),
and the automatic seam at several shares of the window. For each: requests sent, requests
refused, seams (at the window / ordinary), the largest request the server answered, and the
billed input in base-input tokens with the loopback's prompt cache (cache writes 1.25x, reads
0.1x), plus the first strip at the window's before -> after figures.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

import anthropic

from rhapsody.providers.anthropic import AnthropicModel
from rhapsody.config.settings import Settings
from rhapsody.loopback.server import LoopbackServer
from rhapsody.sandbox.bwrap import bwrap_path
from rhapsody.wiring import build
from rhapsody.core.session.records import dumped  # noqa: E402

ASKS = ("Micro-handoff requested", "The context reached the model's window")
NOTE = {"done": ["printed the blocks so far [measured]"], "open": ["print the remaining blocks"],
        "working_directory": "the project root, which is the git repository"}


class Agent:
    """A scripted agent: narrated calls until `calls` are made; a note whenever asked for one."""

    def __init__(self, calls: int, chars: int) -> None:
        self.calls, self.chars, self.made = calls, chars, 0

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]["content"]
        blocks = last if isinstance(last, list) else [{"type": "text", "text": last}]
        texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if any(ask in t for t in texts for ask in ASKS):
            return {"content": [{"type": "text", "text": "Writing my field note now, facts first, as asked."},
                                {"type": "tool_use", "name": "micro_handoff", "input": NOTE}]}
        if results and "Field note saved" in str(results[-1].get("content")):
            return {"content": [{"type": "text", "text": "Note written."}]}
        if self.made >= self.calls:
            return {"content": [{"type": "text", "text": "All blocks printed."}]}
        self.made += 1
        n = self.made
        return {"content": [{"type": "text", "text": f"Step {n}: I will print block {n} to read what it holds."},
                            {"type": "tool_use", "name": "bash",
                             "input": {"command": f"yes block-{n} | head -c {self.chars}"}}]}


async def run(calls: int, chars: int, window: int, **settings: Any) -> dict[str, Any]:
    """One turn past the window; its figures."""
    server = LoopbackServer(Agent(calls, chars), window=window).start()
    try:
        root = Path(tempfile.mkdtemp()) / "proj"
        root.mkdir()
        import git

        git.Repo.init(root)
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="bench", max_retries=0, timeout=30)
        sandbox = "workspace-write" if bwrap_path() else "off"
        wiring = build(root, Settings(permission_mode="yolo", sandbox=sandbox, seam_policy="threshold", **settings),
                       AnthropicModel(client, retries=0), "claude-sonnet-5-5")
        async for _ in wiring.agent.run("print every block"):
            pass
        return figures(server, dumped(wiring.session.records))
    finally:
        server.stop()


def figures(server: LoopbackServer, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Requests, refusals, seams, peak and billed input of one run."""
    usage = [r for r in records if r["kind"] == "usage"]
    billed = sum(u["input_tokens"] + 1.25 * u["cache_creation_input_tokens"] + 0.1 * u["cache_read_input_tokens"]
                 for u in usage)
    seams = [r for r in records if r["kind"] == "seam"]
    room = [r for r in records if r["kind"] == "prune" and str(r.get("reason", "")).startswith("at the window")]
    at_window = [s for s in seams if s.get("window")] + room  # a strip first, or room made for the note first
    answered = [server.prompt_tokens(r.body) for r in server.requests if r.status == 200]
    first = min(at_window, key=lambda r: r["seq"]) if at_window else None
    return {"requests": len(server.requests), "refused": sum(r.status == 400 for r in server.requests),
            "seams": len(seams), "at_window": len(at_window), "peak": max(answered), "billed": round(billed),
            "calls": sum(r["kind"] == "tool_run" and r["name"] == "bash" for r in records),
            "ended": any(r["kind"] == "message" and "All blocks printed." in str(r["content"]) for r in records),
            "strip": (first["before"]["est_tokens"], first["after"]["est_tokens"]) if first else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--window", type=int, default=60_000)
    parser.add_argument("--chars", type=int, default=16_000)
    ns = parser.parse_args()
    runs = [("net only: the API refuses", {"handoff_at_share": "off"}),
            ("net only: rhapsody's estimate", {"handoff_at_share": "off", "context_window": ns.window})]
    runs += [(f"share {s}", {"handoff_at_share": s, "context_window": ns.window}) for s in (0.4, 0.5, 0.6, 0.7, 0.8)]
    print(f"{ns.calls} calls of {ns.chars:,} characters, window {ns.window:,} tokens (loopback count)")
    print("| run | calls | requests | refused (400) | seams (at the window) | peak request | billed input | "
          "first cut at the window (est. tokens) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, settings in runs:
        f = asyncio.run(run(ns.calls, ns.chars, ns.window, **settings))
        strip = f"~{f['strip'][0]:,} → ~{f['strip'][1]:,}" if f["strip"] else "—"
        done = "" if f["ended"] else " (turn did not finish)"
        print(f"| {name}{done} | {f['calls']} | {f['requests']} | {f['refused']} | {f['seams']} ({f['at_window']}) | "
              f"{f['peak']:,} | {f['billed']:,} | {strip} |")


if __name__ == "__main__":
    main()
