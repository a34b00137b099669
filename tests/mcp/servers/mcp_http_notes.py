"""A streamable-HTTP MCP server built with the mcp SDK, for the tests: `python mcp_http_notes.py FD`, FD a
listening loopback socket the caller bound and passed on (a port picked free and bound later could be
taken by another process of a parallel run in between)."""

from __future__ import annotations

import base64
import socket
import sys

import anyio

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import EmbeddedResource, ImageContent, TextContent, TextResourceContents

# A 1x1 transparent PNG.
PIXEL = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082")).decode()

server = MCPServer("notes")
NOTES: list[str] = []


@server.tool()
def add_note(text: str) -> str:
    """Store a note and say how many there are."""
    NOTES.append(text)
    return f"stored note {len(NOTES)}: {text}"


@server.tool()
def snapshot() -> list[TextContent | ImageContent | EmbeddedResource]:
    """A picture of the notes board, with its text as a resource."""
    return [
        TextContent(type="text", text=f"{len(NOTES)} notes on the board"),
        ImageContent(type="image", data=PIXEL, mime_type="image/png"),
        EmbeddedResource(type="resource", resource=TextResourceContents(uri="notes://board", text="\n".join(NOTES))),
    ]


@server.tool()
async def wait(seconds: float) -> str:
    """Take a while before answering."""
    await anyio.sleep(seconds)
    return f"waited {seconds} s"


@server.tool()
def explode() -> str:
    """Always fails."""
    raise ToolError("the board is on fire")


if __name__ == "__main__":
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    uvicorn_server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    anyio.run(lambda: uvicorn_server.serve(sockets=[socket.socket(fileno=int(sys.argv[1]))]))
