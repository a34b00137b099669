"""`rhapsody mcp list`: start every MCP server a project may start, list its state and tools, stop it again.

A configuration file that cannot be used (a malformed `.mcp.json`) is one line on stderr naming the file and
what is wrong, and the exit status is 2, as every command answers a bad file; the servers that could be
read are still listed."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from rhapsody.mcp.config import plan

BAD_FILE = 2
"""Exit status when a configuration file could not be used."""


def main(root: Path) -> int:
    """Print each server's state and tools; the exit status is 2 for a bad file, 1 when a server failed to start."""
    servers = plan(root)
    for problem in servers.problems:
        print(f"rhapsody: {problem}", file=sys.stderr)
    if not servers.servers and not servers.waiting:
        if not servers.problems:
            print("no MCP servers configured")
        return BAD_FILE if servers.problems else 0
    from rhapsody.mcp.tools import McpTools

    async def listing() -> list[str]:
        source = McpTools(servers, root)
        try:
            await source.tools()
            return source.status()
        finally:
            await source.close()

    lines = asyncio.run(listing())
    print("\n".join(lines))
    if servers.problems:
        return BAD_FILE
    return 1 if any(": failed" in line.split("\n")[0] for line in lines) else 0
