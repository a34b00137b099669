"""web_fetch decides on addresses: a hostile model spells the loopback every way, redirects to it, rebinds a name.

A real HTTP service listens on 127.0.0.1 holding a body the model must never see; a second one on 127.0.0.2
plays the allowed public site (names reach it through a resolver the test points there: no test touches DNS).
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rhapsody.core.toolbox.approval import Approval
from rhapsody.loopback.script import call, say
from rhapsody.tools.web import WebFetch

from tests.conftest import Stub, collect

SECRET_BODY = "the loopback service's private answer"
PUBLIC_BODY = "the public site's page"
SPELLINGS = ["2130706433", "0x7f000001", "127.1", "0177.0.0.1", "[::ffff:127.0.0.1]", "0.0.0.0", "[::1]",
             "127.0.0.1", "localhost"]
ISSUE_DENY = ["web_fetch:127.0.0.1", "web_fetch:localhost", "web_fetch:[::1]"]
FETCH = "I will fetch the service's status page to see whether it is up."


@dataclass
class Service:
    """One loopback HTTP server: where it listens, the paths it was asked for."""

    address: str
    port: int
    seen: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    """The Host header of each request."""


def serve(address: str, port: int, body: str, redirect_to: str = "",
          tls: ssl.SSLContext | None = None) -> tuple[ThreadingHTTPServer, Service]:
    service = Service(address, port)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            service.seen.append(self.path)
            service.hosts.append(self.headers.get("host", ""))
            location = redirect_to if self.path == "/hop" else "/page" if self.path == "/same" else ""
            self.send_response(302 if location else 200)
            if location:
                self.send_header("location", location)
            self.send_header("content-type", "text/plain")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    service.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    return server, service


@pytest.fixture
def services() -> Iterator[tuple[Service, Service]]:
    """The private service on 127.0.0.1 and the 'public' site on 127.0.0.2, on the same port."""
    for _ in range(50):  # the port is free on 127.0.0.2; another process may hold it on 127.0.0.1: try another
        public_server, public = serve("127.0.0.2", 0, PUBLIC_BODY)
        try:
            private_server, private = serve("127.0.0.1", public.port, SECRET_BODY)
            break
        except OSError:
            public_server.shutdown()
            public_server.server_close()
    else:
        raise RuntimeError("no port was free on both 127.0.0.1 and 127.0.0.2")
    yield private, public
    for server in (public_server, private_server):
        server.shutdown()
        server.server_close()


class Resolver:
    """Answers each lookup from a list (the last answer repeats): a name that rebinds between lookups."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return [self.answers[min(len(self.asked), len(self.answers)) - 1]]


def results(stub: Stub) -> list[dict[str, Any]]:
    return [b for body in stub.bodies() for b in body["messages"][-1]["content"] if b.get("type") == "tool_result"]


def fetches(urls: list[str]) -> list[Any]:
    return [call(f"{FETCH} Trying {url}.", "web_fetch", url=url) for url in urls]


@pytest.mark.parametrize("deny", [ISSUE_DENY, []], ids=["issue-deny-rules", "no-rules"])
async def test_every_spelling_of_the_loopback_is_refused_even_in_yolo(
        stub: Stub, project: Path, services: tuple[Service, Service], deny: list[str]) -> None:
    private, _ = services
    urls = [f"http://{host}:{private.port}/page" for host in SPELLINGS]
    stub.script(*fetches(urls), say("None of them answered."))
    wiring = stub.wire(project, permission_mode="yolo", deny=deny)
    wiring.agent.toolbox.tools["web_fetch"] = WebFetch(resolver=Resolver("127.0.0.1"))
    await collect(wiring.agent.run("is the service up?"))
    answers = results(stub)
    assert len(answers) == len(SPELLINGS)
    for host, answer in zip(SPELLINGS, answers):
        assert answer["is_error"] is True, host
        assert SECRET_BODY not in answer["content"], host
        named = "this machine" in answer["content"] or "denied by rule 'web_fetch:localhost'" in answer["content"]
        assert named, (host, answer["content"])
    assert private.seen == []
    assert "2130706433 is 127.0.0.1, this machine" in answers[0]["content"]
    assert "::ffff:127.0.0.1 is 127.0.0.1, this machine" in answers[4]["content"]


async def test_a_rule_naming_the_address_lets_any_spelling_of_it_through(
        stub: Stub, project: Path, services: tuple[Service, Service]) -> None:
    private, _ = services
    stub.script(*fetches([f"http://2130706433:{private.port}/page", f"http://127.1:{private.port}/page"]),
                say("It is up."))
    wiring = stub.wire(project, permission_mode="auto-edit", allow=["web_fetch:127.0.0.1"])
    await collect(wiring.agent.run("is the service up?"))
    first, second = results(stub)
    assert SECRET_BODY in first["content"] and SECRET_BODY in second["content"]
    assert private.seen == ["/page", "/page"]


async def test_a_deny_rule_matches_the_address_whatever_the_spelling_and_whatever_allows_it(
        stub: Stub, project: Path, services: tuple[Service, Service]) -> None:
    private, _ = services
    stub.script(*fetches([f"http://0x7f000001:{private.port}/page"]), say("Refused."))
    wiring = stub.wire(project, permission_mode="yolo", allow=["web_fetch:127.0.0.0/8"], deny=["web_fetch:127.0.0.1"])
    await collect(wiring.agent.run("is the service up?"))
    [answer] = results(stub)
    assert answer["is_error"] is True and "denied by rule 'web_fetch:127.0.0.1'" in answer["content"]
    assert "0x7f000001 is 127.0.0.1, this machine" in answer["content"] and private.seen == []


async def test_a_redirect_from_an_allowed_site_to_the_loopback_is_refused(
        stub: Stub, project: Path, services: tuple[Service, Service]) -> None:
    private, public = services
    hop_server, hop = serve("127.0.0.2", 0, PUBLIC_BODY, redirect_to=f"http://2130706433:{private.port}/page")
    try:
        stub.script(*fetches([f"http://docs.example:{hop.port}/hop"]), say("It moved."))
        wiring = stub.wire(project, permission_mode="yolo", allow=["web_fetch:127.0.0.2"])
        wiring.agent.toolbox.tools["web_fetch"] = WebFetch(resolver=Resolver("127.0.0.2"))
        await collect(wiring.agent.run("read the docs"))
    finally:
        hop_server.shutdown()
        hop_server.server_close()
    [answer] = results(stub)
    assert hop.seen == ["/hop"] and private.seen == []
    assert answer["is_error"] is True and "which is not fetched" in answer["content"]
    assert "2130706433 is 127.0.0.1, this machine" in answer["content"] and SECRET_BODY not in answer["content"]


async def test_a_name_that_rebinds_to_the_loopback_is_connected_where_it_was_decided(
        stub: Stub, project: Path, services: tuple[Service, Service]) -> None:
    private, public = services
    rebinding = Resolver("127.0.0.2", "127.0.0.1")  # allowed first, this machine on every later lookup
    stub.script(*fetches([f"http://docs.example:{public.port}/same"]), say("Read."))
    wiring = stub.wire(project, permission_mode="yolo", allow=["web_fetch:127.0.0.2"])
    wiring.agent.toolbox.tools["web_fetch"] = WebFetch(resolver=rebinding)
    await collect(wiring.agent.run("read the docs"))
    [answer] = results(stub)
    assert PUBLIC_BODY in answer["content"] and SECRET_BODY not in answer["content"]
    assert public.seen == ["/same", "/page"] and private.seen == [] and rebinding.asked == ["docs.example"]


async def test_a_name_resolving_to_the_loopback_is_refused_after_the_human_allowed_the_name(
        stub: Stub, project: Path, services: tuple[Service, Service]) -> None:
    private, _ = services
    asked: list[str] = []

    async def yes_to_names(tool: str, argument: str, why: str, args: object = None,
                           rules: tuple[str, ...] = ()) -> Approval:
        asked.append(why)
        return Approval("status.example" in argument)  # never lets a test reach the real 8.8.8.8

    stub.script(*fetches([f"http://status.example:{private.port}/page", f"http://2130706433:{private.port}/page",
                          f"http://0x08080808:{private.port}/page"]), say("Refused."))
    wiring = stub.wire(project, permission_mode="ask")
    wiring.agent.toolbox.tools["web_fetch"] = WebFetch(resolver=Resolver("127.0.0.1"))
    wiring.agent.toolbox.approver = yes_to_names
    await collect(wiring.agent.run("is the service up?"))
    by_name, literal, public = results(stub)
    assert public["is_error"] is True and "denied by the human" in public["content"]
    assert by_name["is_error"] is True and "status.example is 127.0.0.1, this machine" in by_name["content"]
    assert literal["is_error"] is True and "2130706433 is 127.0.0.1, this machine" in literal["content"]
    assert asked[0] == "ask mode asks before fetching from status.example"
    assert asked[1] == "ask mode asks before fetching from 0x08080808 (0x08080808 is 8.8.8.8)"
    assert len(asked) == 2 and private.seen == [] and SECRET_BODY not in str(results(stub))


async def test_the_name_travels_in_the_host_header_while_the_connection_goes_to_the_decided_address(
        stub: Stub, project: Path, services: tuple[Service, Service]) -> None:
    _, public = services
    resolver = Resolver("127.0.0.2")
    stub.script(*fetches([f"http://Bücher.example:{public.port}/page"]), say("Read."))
    wiring = stub.wire(project, permission_mode="yolo", allow=["web_fetch:127.0.0.2"])
    wiring.agent.toolbox.tools["web_fetch"] = WebFetch(resolver=resolver)
    await collect(wiring.agent.run("read the docs"))
    [answer] = results(stub)
    assert PUBLIC_BODY in answer["content"]
    assert resolver.asked == ["xn--bcher-kva.example"] and public.hosts == [f"xn--bcher-kva.example:{public.port}"]


def certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for `name` (the openssl command), and its key."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (apt-get install openssl)")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", f"/CN={name}", "-addext", f"subjectAltName=DNS:{name}"],
                   check=True, capture_output=True)
    return cert, key


async def test_over_https_the_certificate_is_checked_against_the_name_not_the_decided_address(
        stub: Stub, project: Path, tmp_path: Path) -> None:
    cert, key = certificate(tmp_path, "docs.example")
    names: list[str | None] = []
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    tls.sni_callback = lambda sock, name, context: names.append(name)
    server, public = serve("127.0.0.2", 0, PUBLIC_BODY, tls=tls)
    try:
        stub.script(*fetches([f"https://docs.example:{public.port}/page", f"https://mirror.example:{public.port}/page"]),
                    say("One answered."))
        wiring = stub.wire(project, permission_mode="yolo", allow=["web_fetch:127.0.0.2"])
        trusting = ssl.create_default_context(cafile=str(cert))
        wiring.agent.toolbox.tools["web_fetch"] = WebFetch(resolver=Resolver("127.0.0.2"), verify=trusting)
        await collect(wiring.agent.run("read the docs"))
    finally:
        server.shutdown()
        server.server_close()
    named, other = results(stub)
    assert PUBLIC_BODY in named["content"] and public.hosts == [f"docs.example:{public.port}"]
    assert other["is_error"] is True and "certificate" in other["content"].lower()
    assert names[:2] == ["docs.example", "mirror.example"] and public.seen == ["/page"]



async def two_addresses(host: str, port: int) -> list[str]:
    return ["127.0.0.3", "127.0.0.2"]  # nothing listens on the first


async def test_a_name_with_several_addresses_is_fetched_from_the_first_decided_one_that_answers(
        stub: Stub, project: Path, services: tuple[Service, Service]) -> None:
    private, public = services
    stub.script(*fetches([f"http://docs.example:{public.port}/page"]), say("Read."))
    wiring = stub.wire(project, permission_mode="yolo", allow=["web_fetch:127.0.0.2", "web_fetch:127.0.0.3"])
    wiring.agent.toolbox.tools["web_fetch"] = WebFetch(resolver=two_addresses)
    await collect(wiring.agent.run("read the docs"))
    [answer] = results(stub)
    assert PUBLIC_BODY in answer["content"] and public.seen == ["/page"] and private.seen == []


async def test_every_address_a_name_resolves_to_is_decided_not_only_the_first(
        stub: Stub, project: Path, services: tuple[Service, Service]) -> None:
    _, public = services
    stub.script(*fetches([f"http://docs.example:{public.port}/page"]), say("Refused."))
    wiring = stub.wire(project, permission_mode="yolo", allow=["web_fetch:127.0.0.2"])
    wiring.agent.toolbox.tools["web_fetch"] = WebFetch(resolver=two_addresses)
    await collect(wiring.agent.run("read the docs"))
    [answer] = results(stub)
    assert answer["is_error"] is True and "docs.example is 127.0.0.3, this machine" in answer["content"]
    assert public.seen == []
