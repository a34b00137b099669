"""MCP servers as tools, through the official `mcp` SDK (stdio and streamable HTTP).

The only module that imports `mcp`. Each server runs in its own asyncio task that holds
the SDK client open until `close()`; servers start together in the background and have
`startup_timeout_sec` to connect and list their tools. A server that fails to start or
dies is a state, a notice and an `is_error` result for its calls, never an exception.

Tools are offered as `mcp__SERVER__TOOL` with the server's own description and input
schema, servers in name order and each server's tools in name order, so the tools part
of the request stays byte-identical from turn to turn. A server's tools, once listed,
stay offered even if it dies: dropping them would change the cached prefix.

Results map to tool_result content in mcp/results.py.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import re
import shlex
import shutil
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from mcp.types import Tool as McpToolInfo
from pydantic import BaseModel, ConfigDict

from rhapsody.config.settings import McpServer
from rhapsody.core.session.messages import compact_json
from rhapsody.core.session.tokens import estimate_chars
from rhapsody.core.toolbox.protocol import Tool, ToolContext, ToolOutcome
from rhapsody.core.counts import counted
from rhapsody.mcp.config import McpPlan, waiting_line
from rhapsody.mcp.results import outcome
from rhapsody.view.render import visible
from rhapsody.sandbox import lifeline
from rhapsody.core.json_types import JsonObject

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

# The SDK logs a server's protocol noise (a stray line on stdout) with tracebacks; they would
# land on the terminal under the app. What matters reaches the human as a state and a notice.
logging.getLogger("mcp").addHandler(logging.NullHandler())
logging.getLogger("mcp").propagate = False
MAX_NAME = 64  # the shorter of the Anthropic (128) and OpenAI (64) limits on tool names


class _Args(BaseModel):
    """Whatever the model sends; the server validates against its own schema."""

    model_config = ConfigDict(extra="allow")


class McpTool(Tool):
    """One tool of one MCP server; `McpTools.tools()` makes a subclass per tool."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    input_schema: ClassVar[JsonObject] = {}
    Input: ClassVar[type[BaseModel]] = _Args
    writes: ClassVar[bool] = True  # what a server does is unknown: it asks like bash does
    reads_files: ClassVar[bool] = False
    server: ClassVar[str] = ""
    tool: ClassVar[str] = ""
    source: ClassVar[McpTools]

    def schema(self) -> JsonObject:
        """The server's own schema, as it sent it."""
        return self.input_schema

    def argument_of(self, args: BaseModel) -> str:
        """The arguments as compact JSON: what approval shows and rules match."""
        return json.dumps(args.model_dump(), ensure_ascii=False, separators=(",", ":"))

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolOutcome:
        """Call the tool on its server."""
        return await self.source.call(self.server, self.tool, args.model_dump(), ctx.output_cap)


def definitions_size(tools: list[Tool]) -> tuple[int, int]:
    """Bytes the tools add to each request's compact JSON `tools` array, and the estimated tokens."""
    text = ",".join(compact_json({"name": t.name, "description": t.description, "input_schema": t.input_schema})
                    for t in tools if isinstance(t, McpTool))
    return len(text.encode("utf-8")) + (1 if tools else 0), estimate_chars(len(text))


def tool_name(server: str, tool: str) -> str:
    """The name the model sees: `mcp__SERVER__TOOL`, unsafe characters replaced, at most 64 characters."""
    return _UNSAFE.sub("_", f"mcp__{server}__{tool}")[:MAX_NAME]


@dataclass
class _Server:
    name: str
    config: McpServer
    state: str = "starting"
    detail: str = ""
    listed: list[McpToolInfo] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)
    client: Client | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    errlog: IO[str] | None = None

    def where(self) -> str:
        """The command line or URL, for status lines."""
        if self.config.url:
            return self.config.url
        return shlex.join([self.config.command or "", *self.config.args])


class McpTools:
    """The tool source for every configured MCP server."""

    def __init__(self, plan: McpPlan, root: Path) -> None:
        self.root = root
        self.waiting = plan.waiting
        self.servers = {name: _Server(name, config) for name, config in plan.servers.items()}
        self._notices: list[str] = [*plan.problems, *([waiting_line(plan.waiting)] if plan.waiting else [])]
        self._started_at: float | None = None

    def start(self) -> None:
        """Start every server in the background; repeated calls do nothing."""
        if self._started_at is not None:
            return
        self._started_at = time.monotonic()
        for server in self.servers.values():
            server.task = asyncio.get_running_loop().create_task(self._serve(server), name=f"mcp:{server.name}")

    async def tools(self) -> list[Tool]:
        """The tools of every server that started, waiting (bounded) for those still starting."""
        self.start()
        await asyncio.gather(*(self._wait(s) for s in self.servers.values()))
        return [tool for server in self.servers.values() for tool in server.tools]

    def notices(self) -> list[str]:
        """Status lines not yet shown."""
        taken, self._notices = self._notices, []
        return taken

    def status(self) -> list[str]:
        """Each server with its state and tools, for `/mcp` and `rhapsody mcp list`."""
        lines = []
        for s in self.servers.values():
            head = f"{s.name}: {s.state}{' (' + s.detail + ')' if s.detail else ''} · {s.where()}"
            names = ", ".join(t.name for t in s.tools)
            size, tokens = definitions_size(s.tools)
            lines.append(head + (f"\n  {counted(len(s.tools), 'tool')}, {size:,} bytes of definitions (~{tokens:,} tokens): {names}"
                                 if s.tools else ""))
        lines += [f"{name}: waiting for trust (from this project)" for name in self.waiting]
        return [visible(line) for line in lines] or ["no MCP servers configured"]  # names a project or server chose

    async def close(self) -> None:
        """Stop every server and wait for its process or connection to end."""
        for server in self.servers.values():
            server.stop.set()
        tasks = [s.task for s in self.servers.values() if s.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=10.0)
        for server in self.servers.values():
            if server.state in ("starting", "ready"):
                server.state = "stopped"

    async def call(self, server_name: str, tool: str, arguments: JsonObject, cap: int) -> ToolOutcome:
        """Call one tool; every failure is an is_error outcome."""
        server = self.servers[server_name]
        if server.client is None or server.state != "ready":
            return ToolOutcome(f"MCP server {server_name} is not running ({server.state}"
                               f"{': ' + server.detail if server.detail else ''}).", is_error=True)
        try:
            result = await server.client.call_tool(tool, arguments, read_timeout_seconds=server.config.tool_timeout_sec)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                return self._died(server, exc)
            if exc.code == REQUEST_TIMEOUT:
                return ToolOutcome(f"{tool} did not answer within {server.config.tool_timeout_sec:g} s", is_error=True)
            return ToolOutcome(f"MCP server {server_name} refused {tool}: {exc.error.message}", is_error=True)
        except Exception as exc:  # noqa: BLE001 - a broken connection must not end the session
            return self._died(server, exc)
        return outcome(result, cap)

    def _died(self, server: _Server, exc: BaseException) -> ToolOutcome:
        server.state, server.detail = "exited", _reason(exc, server)
        self._notices.append(f"MCP server {server.name} stopped answering: {server.detail}")
        return ToolOutcome(f"MCP server {server.name} stopped answering: {server.detail}", is_error=True)

    async def _wait(self, server: _Server) -> None:
        assert self._started_at is not None
        if server.ready.is_set():  # ready or failed already: the deadline no longer matters
            return
        left = self._started_at + server.config.startup_timeout_sec - time.monotonic()
        try:
            await asyncio.wait_for(server.ready.wait(), max(left, 0.0))
        except (TimeoutError, asyncio.TimeoutError):
            server.stop.set()
            if server.task is not None:
                server.task.cancel()
                await asyncio.wait([server.task], timeout=10.0)
            self._fail(server, f"did not start within {server.config.startup_timeout_sec:g} s")

    async def _serve(self, server: _Server) -> None:
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(Client(await self._transport(server, stack)))
                server.listed = await _list_tools(client)
                server.tools = self._tool_classes(server)
                server.client, server.state = client, "ready"
                server.ready.set()
                await server.stop.wait()
        except Exception as exc:  # noqa: BLE001 - a server that fails is a state, not a crash
            if server.state == "starting":
                self._fail(server, _reason(exc, server))
            elif server.state == "ready" and not server.stop.is_set():
                self._died(server, exc)
        finally:
            server.client = None
            server.ready.set()

    async def _transport(self, server: _Server, stack: AsyncExitStack) -> Any:
        config = server.config
        if config.url:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers=config.headers, timeout=httpx2.Timeout(30.0, read=300.0)))
            return streamable_http_client(config.url, http_client=http)
        server.errlog = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))
        cwd = Path(config.cwd).expanduser() if config.cwd else self.root
        cwd = cwd if cwd.is_absolute() else self.root / cwd
        command, *args = lifeline.supervised([_program(config.command or "", cwd, config.env), *config.args])
        params = StdioServerParameters(command=command, args=args, env=config.env or None, cwd=cwd)
        return stdio_client(params, errlog=server.errlog)

    def _tool_classes(self, server: _Server) -> list[Tool]:
        wanted = server.config.enabled_tools
        listed = [t for t in server.listed if (wanted is None or t.name in wanted)
                  and t.name not in server.config.disabled_tools]
        made: list[Tool] = []
        for info in sorted(listed, key=lambda t: t.name):
            name = tool_name(server.name, info.name)
            if any(t.name == name for t in made):
                self._notices.append(f"MCP server {server.name}: tool {info.name!r} skipped, its name clashes as {name}")
                continue
            attrs = {"name": name, "description": info.description or info.title or info.name,
                     "input_schema": info.input_schema, "server": server.name, "tool": info.name, "source": self}
            made.append(type(f"McpTool_{name}", (McpTool,), attrs)())
        return made

    def _fail(self, server: _Server, detail: str) -> None:
        server.state, server.detail = "failed", detail
        self._notices.append(f"MCP server {server.name} failed to start: {detail}")


async def _list_tools(client: Client) -> list[McpToolInfo]:
    listed: list[McpToolInfo] = []
    cursor: str | None = None
    for _ in range(100):  # a server whose pages never end cannot hang start-up
        page = await client.list_tools(cursor=cursor)
        listed += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return listed


def _program(command: str, cwd: Path, env: dict[str, str] | None) -> str:
    """The server's program as a path, found as the spawn would find it (FileNotFoundError if it would not):
    the supervisor that makes it die with rhapsody (`sandbox/lifeline.py`) runs it."""
    if "/" in command:
        found = str(cwd / command) if os.access(cwd / command, os.X_OK) and (cwd / command).is_file() else None
    else:
        found = shutil.which(command, path=(env or {}).get("PATH", os.environ.get("PATH")))
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
    return found


def _reason(exc: BaseException, server: _Server) -> str:
    """One line for a failure: the innermost error, and the server's last stderr line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    if isinstance(exc, MCPError):
        text = exc.error.message
    elif isinstance(exc, OSError):
        text = f"{type(exc).__name__}: {exc}"
    tail = _stderr_tail(server)
    return " ".join(f"{text}{' · stderr: ' + tail if tail else ''}".split())[:300]


def _stderr_tail(server: _Server) -> str:
    if server.errlog is None or server.errlog.closed:
        return ""
    try:
        server.errlog.seek(0)
        lines = [line.strip() for line in server.errlog.read()[-4000:].splitlines() if line.strip()]
    except (OSError, ValueError):
        return ""
    return lines[-1] if lines else ""
