"""web_fetch: GET one web page in rhapsody's own process and hand the model its text.

The sandbox has no network, rightly; this tool is the one door, and it is narrow: http and
https only, a GET with no cookies or credentials, a time limit for the whole fetch, a byte
limit on what is read, text content types only (HTML becomes Markdown through markdownify, in
a worker process the time limit ends: tools/web_page.py),
and redirects followed only within the same host. A redirect to another host ends the call
with the new address, so fetching it goes through the permission check again (which asks per
host unless a `web_fetch:HOST` rule allows it; core.access.permissions). Secrets in the page are
masked by the toolbox like every tool result.

Addresses, not text: the host is resolved once per call (a literal in any spelling is read,
never looked up), every address is decided (`decide_addresses`: off the public internet only
when a rule names it), and the connection goes to the address that was decided, the URL's host
kept in the Host header and the TLS server name, so a second lookup cannot swap it. Every
redirect hop is decided again.

The only importer of httpx2 outside the model adapters (pyproject's contracts).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import urljoin, urlsplit, urlunsplit

from pydantic import BaseModel, Field

from rhapsody.core.access.addresses import IP, literal
from rhapsody.core.access.permissions import Rules, decide_addresses, fetch_refusal
from rhapsody.core.toolbox.protocol import Tool, ToolContext, ToolFailure, ToolOutcome
from rhapsody.prompts import load
from rhapsody.sandbox import procs
from rhapsody.tools import web_page
from rhapsody.core.session import records as rec

if TYPE_CHECKING:  # imported where a fetch runs: the toolbox is built before the first request, on every start
    import httpx2

MAX_BYTES = 2_000_000
"""Bytes of a response body read; the rest is not downloaded."""
TIMEOUT = 20.0
"""Seconds for the whole fetch, redirects included."""
MAX_REDIRECTS = 5
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml", "application/javascript",
              "application/x-yaml", "application/yaml", "application/toml")
USER_AGENT = "rhapsody-web-fetch (+https://github.com/rhapsody)"
Resolver = Callable[[str, int], Awaitable[list[str]]]
"""Resolves a host name and port to its addresses (text); the system's resolver unless a test points it elsewhere."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the system's resolver gives for `host`."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class FetchInput(BaseModel):
    url: str = Field(description="The http or https address to fetch.")


class WebFetch(Tool):
    """GET a URL and return its text (HTML as Markdown), bounded in time and size."""

    name: ClassVar[str] = "web_fetch"
    description: ClassVar[str] = load("tools/web_fetch")
    Input: ClassVar[type[BaseModel]] = FetchInput
    writes: ClassVar[bool] = False
    reads_files: ClassVar[bool] = False

    def __init__(self, max_bytes: int = MAX_BYTES, timeout: float = TIMEOUT,
                 resolver: Resolver = system_resolver, verify: ssl.SSLContext | bool = True) -> None:
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.resolver = resolver
        self.verify = verify
        """How https certificates are checked: the system's trust store unless given a context (a local CA)."""

    def argument_of(self, args: FetchInput) -> str:
        """The URL: permissions read its host."""
        return args.url

    async def run(self, args: FetchInput, ctx: ToolContext) -> ToolOutcome:
        """Fetch, convert, cap."""
        import httpx2

        checked(args.url)
        try:
            return await asyncio.wait_for(self._fetch(args.url, ctx), self.timeout)
        except TimeoutError:
            raise ToolFailure(f"{args.url}: no complete answer within {self.timeout:g} s") from None
        except httpx2.HTTPError as exc:
            raise ToolFailure(f"{args.url}: {type(exc).__name__}: {exc or 'request failed'}") from None

    async def _fetch(self, url: str, ctx: ToolContext) -> ToolOutcome:
        import httpx2

        async with httpx2.AsyncClient(follow_redirects=False, timeout=self.timeout, trust_env=False,
                                      headers={"user-agent": USER_AGENT}, verify=self.verify) as client:
            pinned: dict[str, tuple[IP, ...]] = {}
            for _ in range(MAX_REDIRECTS + 1):
                parts = urlsplit(url)
                name = _wire_name(parts.hostname or "")
                addresses = await self._decided(name, parts.port or _PORTS[parts.scheme], ctx.rules, pinned)
                response = await _send(client, url, name, addresses)
                try:
                    target = _redirect(url, response)
                    if target is None:
                        return await self._answer(url, response, ctx.output_cap)
                finally:
                    await response.aclose()
                if urlsplit(target).hostname != parts.hostname:
                    return _elsewhere(url, target, ctx.rules)
                url = checked(target)
        raise ToolFailure(f"{url}: more than {MAX_REDIRECTS} redirects")

    async def _decided(self, host: str, port: int, rules: Rules,
                       pinned: dict[str, tuple[IP, ...]]) -> tuple[IP, ...]:
        """The addresses to connect to: the host resolved once per call, every address decided on every hop."""
        if host not in pinned:
            pinned[host] = await self._addresses(host, port)
        decision = decide_addresses(rules, host, pinned[host])
        if decision.verdict == "deny":
            raise ToolFailure(f"Not fetched: {decision.reason}")
        return pinned[host]

    async def _addresses(self, host: str, port: int) -> tuple[IP, ...]:
        address = literal(host)
        if address is not None:
            return (address,)
        try:
            found = await self.resolver(host, port)
        except (OSError, UnicodeError) as exc:
            raise ToolFailure(f"{host}: the name does not resolve ({exc})") from None
        addresses = tuple(dict.fromkeys(a for a in map(literal, found) if a is not None))
        if not addresses:
            raise ToolFailure(f"{host}: the name resolves to no address")
        return addresses

    async def _answer(self, url: str, response: httpx2.Response, cap: int) -> ToolOutcome:
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind and not kind.startswith(TEXT_TYPES) and not kind.endswith(("+json", "+xml")):
            size = response.headers.get("content-length", "unknown")
            raise ToolFailure(f"{url} is not text ({kind}, {size} bytes): web_fetch reads text pages only")
        body, whole = await _read(response, self.max_bytes)
        text = body.decode(response.encoding or "utf-8", errors="replace")
        page = await to_markdown(text) if kind in ("text/html", "application/xhtml+xml") or (not kind and "<html" in text[:500].lower()) else text
        notes = [] if whole else [f"[download stopped at {self.max_bytes:,} bytes]"]
        if len(page) > cap:
            notes.append(f"[page cut at {cap:,} of {len(page):,} characters]")
            page = page[:cap]
        head = f"{url} ({response.status_code}, {kind or 'no content type'})\n\n"
        outcome = head + page + ("\n" + "\n".join(notes) if notes else "")
        return ToolOutcome(outcome, is_error=response.status_code >= 400, facts=rec.WebFacts(url=url, status=response.status_code, content_type=kind, chars=len(page)))


def checked(url: str) -> str:
    """The URL when rhapsody may fetch it (http or https with a host); else a refusal."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolFailure(f"{url!r} is not an http or https address with a host")
    try:
        parts.port
    except ValueError:
        raise ToolFailure(f"{url!r} names a port that is not a number from 0 to 65535") from None
    if parts.username or parts.password:
        raise ToolFailure("addresses with a user name or password are refused (nothing secret leaves)")
    return url


_PORTS = {"http": 80, "https": 443}


async def _send(client: httpx2.AsyncClient, url: str, name: str, addresses: tuple[IP, ...]) -> httpx2.Response:
    """GET `url` from the first decided address that accepts a connection, the name in the Host header."""
    import httpx2

    parts = urlsplit(url)
    host = (f"[{name}]" if ":" in name else name) + (f":{parts.port}" if parts.port is not None else "")
    for n, address in enumerate(addresses):
        request = client.build_request("GET", _at(url, address), headers={"host": host}, extensions=_server_name(name))
        try:
            return await client.send(request, stream=True)
        except httpx2.ConnectError:
            if n == len(addresses) - 1:
                raise
    raise ToolFailure(f"{name}: no address to connect to")


def _at(url: str, address: IP) -> str:
    """The URL with its host replaced by the decided address, so the connection goes nowhere else."""
    parts = urlsplit(url)
    host = f"[{address}]" if address.version == 6 else str(address)
    return urlunsplit((parts.scheme, f"{host}:{parts.port or _PORTS[parts.scheme]}", parts.path or "/",
                       parts.query, ""))


def _wire_name(host: str) -> str:
    """The host as it goes on the wire and to the resolver: IDNA for a name that is not ASCII."""
    import httpx2

    if host.isascii():
        return host
    try:
        return httpx2.URL(f"http://{host}/").raw_host.decode("ascii")
    except (httpx2.InvalidURL, UnicodeError):
        raise ToolFailure(f"{host!r} is not a valid host name") from None


def _server_name(host: str) -> dict[str, object]:
    """The TLS server name (and the name certificates are checked against): the URL's host, when a name."""
    return {} if literal(host) is not None else {"sni_hostname": host}


def _elsewhere(url: str, target: str, rules: Rules) -> ToolOutcome:
    """A redirect to another host: its address goes back to the model, or the refusal when rules refuse it."""
    refused = fetch_refusal(rules, target)
    if refused is not None:
        return ToolOutcome(f"{url} redirects to {target}, which is not fetched: {refused.reason}", is_error=True,
                           facts=rec.WebFacts(url=url, redirect=target))
    return ToolOutcome(f"{url} redirects to another site: {target}\nFetch that address if you "
                       "still need it (the human is asked again for the new site).",
                       facts=rec.WebFacts(url=url, redirect=target))


def _redirect(url: str, response: httpx2.Response) -> str | None:
    location = response.headers.get("location")
    if response.status_code not in (301, 302, 303, 307, 308) or not location:
        return None
    return urljoin(url, location)


async def _read(response: httpx2.Response, limit: int) -> tuple[bytes, bool]:
    """At most `limit` bytes of the body, and whether that was all of it."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            return bytes(body[:limit]), False
    return bytes(body), True


async def to_markdown(html: str) -> str:
    """HTML as Markdown, converted in a worker process (tools/web_page.py) that ends with the fetch's time.

    Cancelling the caller (web_fetch's time limit) kills the worker: no parse outlives the call."""
    status, page, why = await procs.piped([sys.executable, "-I", str(Path(web_page.__file__))],
                                          html.encode("utf-8", errors="replace"), env={})
    if status != 0:
        reason = why.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {status}"]
        raise ToolFailure(f"the page could not be converted to Markdown: {reason[0]}")
    return page.decode("utf-8", errors="replace")
