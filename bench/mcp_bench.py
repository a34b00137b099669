"""Benchmark: what MCP servers cost a session: bytes of tool definitions, start and stop time.

    python bench/mcp_bench.py

Starts `mcp-server-time` (stdio, from PyPI) and the test suite's notes server (streamable
HTTP, built with the mcp SDK, on a free loopback port), each alone, three times, through
rhapsody's own MCP adapter. Reports per server: tools, the bytes their definitions add to
every request's compact JSON `tools` array (checked against the array with and without
them), the estimated tokens, and the median time to start and list tools and to stop.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from rhapsody.config.settings import McpServer
from rhapsody.core.session.messages import compact_json
from rhapsody.mcp.config import McpPlan
from rhapsody.mcp.tools import McpTools, definitions_size
from rhapsody.tools import default_toolbox

ROOT = Path(__file__).resolve().parent.parent
RUNS = 3


async def measure(name: str, server: McpServer) -> tuple[int, int, int, int, float, float]:
    """(tools, bytes, checked bytes, tokens, median start s, median stop s) for one server."""
    starts, stops, sizes = [], [], (0, 0, 0, 0)
    for _ in range(RUNS):
        toolbox = default_toolbox()
        before = len(compact_json(toolbox.specs()).encode())
        source = McpTools(McpPlan({name: server}), ROOT)
        toolbox.sources.append(source)
        began = time.perf_counter()
        await toolbox.refresh()
        listed = time.perf_counter()
        await source.close()
        starts.append(listed - began)
        stops.append(time.perf_counter() - listed)
        tools = source.servers[name].tools
        size, tokens = definitions_size(tools)
        sizes = (len(tools), size, len(compact_json(toolbox.specs()).encode()) - before, tokens)
    return (*sizes, statistics.median(starts), statistics.median(stops))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    port = free_port()
    notes = subprocess.Popen([sys.executable, str(ROOT / "tests" / "mcp" / "servers" / "mcp_http_notes.py"), str(port)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        servers = {
            "time": McpServer(command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"]),
            "notes": McpServer(url=f"http://127.0.0.1:{port}/mcp"),
        }
        print(f"{'server':8} {'tools':>5} {'bytes':>7} {'checked':>8} {'~tokens':>8} {'start':>8} {'stop':>7}")
        for name, server in servers.items():
            tools, size, checked, tokens, start, stop = asyncio.run(measure(name, server))
            print(f"{name:8} {tools:>5} {size:>7,} {checked:>8,} {tokens:>8,} {start:>7.2f}s {stop:>6.2f}s")
    finally:
        notes.terminate()
        notes.wait(timeout=10)


if __name__ == "__main__":
    main()
