"""web_fetch end to end: the real loop and toolbox against a local HTTP server in a thread (no network)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rhapsody.core.events import ToolFinished
from rhapsody.core.session.history import read_history
from rhapsody.core.toolbox.approval import Approval
from rhapsody.loopback.script import call, say
from rhapsody.tools.handoff import recall_text
from rhapsody.tools.web import WebFetch

from tests.conftest import Stub, collect
from tests.core.session.test_handoff_e2e import handoff_turn

FETCH = "I will fetch the documentation page to read how the option is spelled."
SECRET = "sk-ant-api03-" + "Q" * 40
PAGE = (f"<html><head><title>Docs</title><script>var token = 1;</script><style>p {{}}</style></head>"
        f"<body><h1>Options</h1><p>Use <code>--fast</code> for speed.</p><p>key {SECRET}</p></body></html>")


HELD = threading.Event()
"""Set as each test's site closes: the slow page's answer waits for it."""


class Pages(BaseHTTPRequestHandler):
    """The local site: a page, redirects, a big page, a slow page, an image."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        port = self.server.server_address[1]
        routes: dict[str, tuple[int, str, bytes, dict[str, str]]] = {
            "/page": (200, "text/html; charset=utf-8", PAGE.encode(), {}),
            "/same": (302, "text/plain", b"", {"location": "/page"}),
            "/other": (302, "text/plain", b"", {"location": f"http://mirror.example:{port}/page"}),
            "/big": (200, "text/plain", b"x" * 3_000_000, {}),
            "/image": (200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\0" * 100, {}),
        }
        if self.path == "/slow":
            HELD.wait(10)  # answers only once the test is over
        status, kind, body, headers = routes.get(self.path, (404, "text/plain", b"not here", {}))
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()  # shutdown waits one poll
    HELD.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    HELD.set()
    server.shutdown()
    server.server_close()


async def to_loopback(host: str, port: int) -> list[str]:
    """A resolver that puts every name on the test's site (127.0.0.1): no test reaches real DNS."""
    return ["127.0.0.1"]


def results(stub: Stub) -> list[dict[str, Any]]:
    return [b for body in stub.bodies() for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


async def test_a_page_arrives_as_markdown_without_scripts_and_with_secrets_masked(
        stub: Stub, project: Path, site: str) -> None:
    stub.script(call(FETCH, "web_fetch", url=f"{site}/same"), say("The option is --fast."))
    wiring = stub.wire(project, permission_mode="auto-edit", allow=["web_fetch:127.0.0.1"])
    await collect(wiring.agent.run("how do I make it fast?"))
    [result] = results(stub)
    assert "# Options" in result["content"] and "Use `--fast` for speed." in result["content"]
    assert "var token" not in result["content"] and SECRET not in result["content"]
    assert "[masked secret]" in result["content"]
    assert SECRET not in wiring.session.path.read_text()


async def test_each_site_is_asked_for_and_a_redirect_to_another_site_asks_again(
        stub: Stub, project: Path, site: str) -> None:
    asked: list[tuple[str, tuple[str, ...]]] = []

    async def allow_for_session(tool: str, argument: str, why: str, args: object = None,
                                rules: tuple[str, ...] = ()) -> Approval:
        asked.append((why, rules))
        return Approval(True, remember=rules)

    port = site.rsplit(":", 1)[1]
    stub.script(call(FETCH, "web_fetch", url=f"http://docs.example:{port}/other"),
                call("The page moved to mirror.example; I will fetch it there as the result says.", "web_fetch",
                     url=f"http://mirror.example:{port}/page"),
                call("I will fetch the same site once more, which the session rule now allows.", "web_fetch",
                     url=f"http://mirror.example:{port}/page"),
                say("Read it."))
    wiring = stub.wire(project, permission_mode="ask", allow=["web_fetch:127.0.0.1"])  # the address, not the names
    wiring.agent.toolbox.tools["web_fetch"] = WebFetch(resolver=to_loopback)
    wiring.agent.toolbox.approver = allow_for_session
    await collect(wiring.agent.run("read the docs"))
    assert asked == [("ask mode asks before fetching from docs.example", ("web_fetch:docs.example",)),
                     ("ask mode asks before fetching from mirror.example", ("web_fetch:mirror.example",))]
    first, second, third = results(stub)
    assert f"redirects to another site: http://mirror.example:{port}/page" in first["content"]
    assert "# Options" not in first["content"] and "# Options" in second["content"] and "# Options" in third["content"]


async def test_headless_refuses_a_site_no_rule_allows_and_names_the_rule(stub: Stub, project: Path, site: str) -> None:
    stub.script(call(FETCH, "web_fetch", url=f"{site}/page"), say("Not allowed."))
    wiring = stub.wire(project, permission_mode="auto-edit", allow=["web_fetch:docs.python.org"])
    await collect(wiring.agent.run("read"))
    [result] = results(stub)
    assert result["is_error"] is True and 'allow = ["web_fetch:127.0.0.1"]' in result["content"]


async def test_an_oversized_page_is_cut_and_a_non_text_page_refused(stub: Stub, project: Path, site: str) -> None:
    stub.script(call(FETCH, "web_fetch", url=f"{site}/big"),
                call("That was long; now I will look at the diagram the page links to.", "web_fetch",
                     url=f"{site}/image"),
                call("Neither helped; I will try a file address, which should be refused.", "web_fetch",
                     url="file:///etc/passwd"),
                say("Done."))
    wiring = stub.wire(project, allow=["web_fetch:127.0.0.1"], output_cap=5000)
    await collect(wiring.agent.run("read"))
    big, image, local = results(stub)
    assert "[download stopped at 2,000,000 bytes]" in big["content"]
    assert "[page cut at 5,000 of 2,000,000 characters]" in big["content"] and len(big["content"]) < 6000
    assert image["is_error"] is True and "is not text (image/png, 108 bytes)" in image["content"]
    assert local["is_error"] is True and "not an http or https address" in local["content"]


async def test_a_page_slower_than_the_limit_is_an_error_in_time(stub: Stub, project: Path, site: str) -> None:
    stub.script(call(FETCH, "web_fetch", url=f"{site}/slow"), say("Too slow."))
    wiring = stub.wire(project, allow=["web_fetch:127.0.0.1"])
    wiring.agent.toolbox.tools["web_fetch"] = WebFetch(timeout=0.1)
    started = time.monotonic()
    events = await collect(wiring.agent.run("read"))
    assert time.monotonic() - started < 2.5
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.is_error and "no complete answer within 0.1 s" in finished.output


async def test_fetched_pages_leave_at_a_seam_and_stay_recallable(stub: Stub, project: Path, site: str) -> None:
    stub.script(call(FETCH, "web_fetch", url=f"{site}/page"), say("Read."), handoff_turn(), say("Noted."),
                say("Later."))
    wiring = stub.wire(project, allow=["web_fetch:127.0.0.1"])
    await collect(wiring.agent.run("read"))
    wiring.agent.request_handoff()
    await collect(wiring.agent.run())
    await collect(wiring.agent.run("go on"))
    last = stub.bodies()[-1]
    assert "Use `--fast`" not in str(last["messages"])
    assert any(r["kind"] == "tool_run" and r["name"] == "web_fetch" for r in read_history(wiring.session.path).records)
    assert "--fast" in recall_text(project, wiring.session, "fast", all_sessions=False, for_human=True)
