"""`rhapsody mcp list`: start every MCP server a project may start, list its state and tools, stop it again."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rhapsody.mcp.config import plan


def main(root: Path) -> int:
    """Print each server's state and tools; the exit status is 1 when a server failed to start."""
    servers = plan(root)
    if servers.empty:
        print("no MCP servers configured")
        return 0
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
    return 1 if any(": failed" in line.split("\n")[0] for line in lines) else 0
