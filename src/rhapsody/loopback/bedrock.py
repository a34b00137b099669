"""The loopback server's Amazon Bedrock endpoint: `POST /model/{id}/invoke-with-response-stream`.

Bedrock streams the Messages API's events inside AWS event-stream frames: each frame's
payload is `{"bytes": base64(event JSON)}` with `:event-type: chunk` headers. The same
scripted turns, validation and status faults as the Messages API endpoint apply; the
model comes from the path, as on Bedrock.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote
from rhapsody.core.json_types import JsonObject

ROUTE = re.compile(r"/model/([^/]+)/invoke-with-response-stream$")
CHUNK_HEADERS = {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}


def model_of(path: str) -> str | None:
    """The model id a Bedrock streaming path names, or None when the path is not one."""
    match = ROUTE.search(path)
    return unquote(match.group(1)) if match else None


def claude_form(model: str) -> str:
    """`us.anthropic.claude-x-v1:0` as `claude-x-v1:0`, for the server's model check."""
    return re.sub(r"^(?:[a-z]{2,4}\.)?anthropic\.", "", model)


def frame(payload: bytes, headers: dict[str, str]) -> bytes:
    """One AWS event-stream message: prelude with its CRC, string headers, payload, message CRC."""
    encoded = b"".join(len(k).to_bytes(1, "big") + k.encode() + b"\x07" + len(v).to_bytes(2, "big") + v.encode()
                       for k, v in headers.items())
    prelude = (16 + len(encoded) + len(payload)).to_bytes(4, "big") + len(encoded).to_bytes(4, "big")
    prelude += zlib.crc32(prelude).to_bytes(4, "big")
    message = prelude + encoded + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


def chunk(event: JsonObject) -> bytes:
    """A Messages API stream event as a Bedrock `chunk` frame."""
    data = base64.b64encode(json.dumps(event).encode()).decode()
    return frame(json.dumps({"bytes": data}).encode(), CHUNK_HEADERS)


def stream(handler: BaseHTTPRequestHandler, events: list[tuple[str, dict[str, Any]]]) -> None:
    """Send a whole answer as event-stream frames."""
    handler.send_response(200)
    handler.send_header("content-type", "application/vnd.amazon.eventstream")
    handler.end_headers()
    for _name, data in events:
        handler.wfile.write(chunk(data))
        handler.wfile.flush()
