"""No unbounded work on untrusted input on the event loop: each parser fed a pathological input, against the clock.

A page from an allowed site, a model's tool arguments, a command's output, a cloned project's `.mcp.json` and
memory files: each is about a megabyte built to make a naive parser take time that grows faster than the input.
The web page goes through the real web_fetch and loop while a concurrent task checks the event loop keeps ticking.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rhapsody.cli import main
from rhapsody.core.events import TurnEnded
from rhapsody.core.session.history import read_history
from rhapsody.core.session.last_failure import failed_tests
from rhapsody.loopback.script import call, say
from rhapsody.mcp.config import plan
from rhapsody.memory.audit import audit
from rhapsody.tools.web import TIMEOUT, WebFetch

from tests.conftest import Stub, collect
from tests.core.toolbox.test_hooks import WRITE, hook, script

UNCLOSED_SCRIPTS = "<html><body><h1>Release notes</h1>" + "<script>" * 125_000  # 1 MB
DEEP = "<html><body>" + "<div>" * 6_000 + "deep" + "</div>" * 6_000  # markdownify's time grows with depth squared
READ = "I will read the release notes page the user linked."


class Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = (UNCLOSED_SCRIPTS if self.path == "/unclosed" else DEEP).encode()
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def converters() -> list[int]:
    """The pids of this process's children converting a page (tools/web_page.py)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if f"\nPPid:\t{os.getpid()}\n" in status and b"web_page.py" in command:
            found.append(int(entry.name))
    return found


class Ticker:
    """Ticks every 20 ms on the event loop: the longest gap says how long the loop was held."""

    def __init__(self) -> None:
        self.longest = 0.0
        self.ticks = 0
        self.saw_converter = False

    async def run(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.02)
            now = time.monotonic()
            self.longest, last, self.ticks = max(self.longest, now - last), now, self.ticks + 1
            self.saw_converter = self.saw_converter or bool(converters())


async def fetched(stub: Stub, project: Path, url: str, tool: WebFetch) -> tuple[dict[str, Any], Ticker, float]:
    stub.script(call(READ, "web_fetch", url=url), say("Read."))
    wiring = stub.wire(project, allow=["web_fetch:127.0.0.1"])
    wiring.agent.toolbox.tools["web_fetch"] = tool
    ticker = Ticker()
    ticking = asyncio.ensure_future(ticker.run())
    started = time.monotonic()
    try:
        await collect(wiring.agent.run("what changed?"))
    finally:
        ticking.cancel()
    [result] = [b for b in stub.bodies()[1]["messages"][-1]["content"] if b.get("type") == "tool_result"]
    return result, ticker, time.monotonic() - started


async def test_a_megabyte_of_unclosed_script_tags_is_read_within_the_limit_while_the_loop_ticks(
        stub: Stub, project: Path, site: str) -> None:
    result, ticker, took = await fetched(stub, project, f"{site}/unclosed", WebFetch())
    assert result.get("is_error") is not True and "# Release notes" in result["content"]
    assert "<script>" not in result["content"]
    assert took < TIMEOUT, f"{took:.1f} s"
    assert ticker.ticks > 0 and ticker.longest < 1.0, f"the loop was held {ticker.longest:.2f} s"


async def test_a_page_slower_to_convert_than_the_limit_is_stopped_at_it_and_its_converter_ended(
        stub: Stub, project: Path, site: str) -> None:
    result, ticker, took = await fetched(stub, project, f"{site}/deep", WebFetch(timeout=1))
    assert result["is_error"] is True and "no complete answer within 1 s" in result["content"]
    assert took < 8, f"{took:.1f} s"
    assert ticker.saw_converter and ticker.longest < 1.0, f"the loop was held {ticker.longest:.2f} s"
    assert converters() == []


async def test_tool_arguments_nested_without_end_are_an_invalid_call_not_a_crash(stub: Stub, project: Path) -> None:
    deep = '{"path": ' + "[" * 500_000 + "]" * 500_000 + "}"
    stub.script({"content": [{"type": "text", "text": "I will read the file the user named."},
                             {"type": "tool_use", "name": "read_file", "raw_input": deep}]},
                say("That call was malformed."))
    wiring = stub.wire(project)
    started = time.monotonic()
    await collect(wiring.agent.run("read it"))
    assert time.monotonic() - started < 10
    [result] = [b for b in stub.bodies()[1]["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert result["is_error"] is True and "nested deeper than 64 levels" in result["content"]
    assert read_history(wiring.session.path).records


def test_test_runner_output_built_to_backtrack_is_read_in_linear_time() -> None:
    output = "\n" * 300_000 + " \n" * 150_000 + ":" * 200_000 + "\n" + "\t" * 200_000 + "\n"
    output += "FAILED tests/test_x.py::test_y - AssertionError\n   ✕ renders the page (3 ms)\n--- FAIL: TestZ\n"
    started = time.thread_time()  # the parsing's own CPU: waiting behind a busy machine's other work is no backtracking
    names = failed_tests(output)
    assert time.thread_time() - started < 2
    assert names == ["tests/test_x.py::test_y", "renders the page", "TestZ"]


def test_a_cloned_projects_mcp_json_built_to_backtrack_or_nest_is_read_in_time(project: Path) -> None:
    servers = {"docs": {"command": "docs-server", "args": ["${UNSET_VAR:-" * 200_000 + "${UNSET_VAR:-kept}"]}}
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    started = time.thread_time()  # as above
    assert plan(project).waiting == ("docs",)
    (project / ".mcp.json").write_text('{"mcpServers": {"docs": {"command": "x", "args": ' + "[" * 900
                                       + "]" * 900 + "}}}")
    deep = plan(project)
    assert time.thread_time() - started < 2
    assert deep.problems and "nested deeper than 64 levels" in deep.problems[0]


def test_a_memory_file_built_to_backtrack_is_audited_in_linear_time(project: Path) -> None:
    memory = project / "memory"
    memory.mkdir()
    (memory / "notes.md").write_text("<!--" * 150_000 + "[a](" * 150_000 + "[b](b#" * 50_000
                                     + " see [the plan](gone.md)\n")
    started = time.thread_time()  # as above
    findings = audit(project, "memory")
    assert time.thread_time() - started < 2
    assert [f.message for f in findings] == ["link to gone.md that no longer exists"]


def test_a_history_line_nested_without_end_is_a_skipped_line_not_an_internal_error(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [{"v": 1, "seq": 0, "ts": 1.0, "kind": "session", "session": "s1", "model": "claude-sonnet-4-5",
                "system": ""},
               {"v": 1, "seq": 1, "ts": 1.0, "kind": "message", "role": "user",
                "content": [{"type": "text", "text": "go"}]}]
    deep = '{"kind": "notice", "text": ' + "[" * 200_000 + "]" * 200_000 + "}"
    history = tmp_path / "deep.jsonl"
    history.write_text("\n".join([json.dumps(records[0]), deep, json.dumps(records[1])]) + "\n")
    started = time.monotonic()
    assert read_history(history).skipped == 1
    assert main(["stats", str(history), "--cwd", str(project)]) == 0
    assert time.monotonic() - started < 5
    out, err = capsys.readouterr()
    assert "internal error" not in out + err and "cost $0.00" in out


async def test_a_hook_answering_json_nested_without_end_is_plain_output_and_the_call_runs(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    deep = script(tmp_path, "deep.py", "#!/usr/bin/env python3\n"
                  "print('{\"hookSpecificOutput\": ' + '[' * 200000 + ']' * 200000 + '}')\n")
    stub.script(call(WRITE, "write_file", path="notes.txt", content="hi"), say("Written."))
    wiring = stub.wire(project, hooks=hook("PreToolUse", deep))
    events = await collect(wiring.agent.run("write notes"))
    assert (project / "notes.txt").read_text() == "hi" and isinstance(events[-1], TurnEnded)
