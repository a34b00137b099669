"""A hand-written MCP server of the handshake era (protocol 2025-06-18), stdlib only, over stdio.

It knows `initialize`, `tools/list` and `tools/call`, answers every other method with
-32601 (as the SDKs of that era do), and so exercises the client's fallback from
`server/discover` to the `initialize` handshake.
"""

from __future__ import annotations

import json
import sys

TOOLS = [{"name": "shout", "description": "Upper-case a word.",
          "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}]


def answer(request: dict) -> dict | None:
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:
        return None  # a notification
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "legacy", "version": "1.0"}}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and params.get("name") == "shout":
        result = {"content": [{"type": "text", "text": str(params["arguments"]["word"]).upper()}], "isError": False}
    else:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": f"Method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


for line in sys.stdin:
    if line.strip():
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
