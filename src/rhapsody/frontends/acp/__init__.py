"""`rhapsody acp`: rhapsody as an Agent Client Protocol agent over stdio, for editors (Zed, Neovim, Emacs).

The only importer of the `acp` SDK. A front end like the others: the CLI passes an opener that builds
the agent the way the app's is built, and this package drives it (server.py), maps its events to the
protocol's updates (updates.py) and keeps standard output for the protocol alone (wire.py).
"""

from __future__ import annotations

import asyncio

from rhapsody.frontends.acp.server import Opener, RhapsodyAcp
from rhapsody.frontends.acp.wire import StdioLines, claim_stdio, quiet_logging


def run_acp(opener: Opener) -> int:
    """Serve the protocol on standard input and output until the client closes it; returns the exit status."""
    read_fd, write_fd = claim_stdio()
    quiet_logging()
    return asyncio.run(_serve(opener, read_fd, write_fd))


async def _serve(opener: Opener, read_fd: int, write_fd: int) -> int:
    from acp import run_agent

    agent = RhapsodyAcp(opener)
    try:
        await run_agent(agent, StdioLines(read_fd, write_fd))  # type: ignore[arg-type]
    finally:
        await agent.close()
    return 0
