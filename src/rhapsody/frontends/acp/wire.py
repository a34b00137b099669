"""The protocol's wire: newline-delimited JSON-RPC on the process's own standard input and output.

Standard output is the protocol, so nothing else may ever reach it: `claim_stdio` moves the two
descriptors to private ones, points descriptor 1 at standard error (a stray `print`, a warning, a
child process that inherits it all land there) and descriptor 0 at /dev/null (no child reads the
client's messages). A line that is not JSON, or JSON that is not a JSON-RPC message, is answered
with the JSON-RPC error the specification names (-32700, -32600) and the connection goes on; the
SDK's own reader would only log it, leaving the client waiting.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
LINE_LIMIT = 50 * 1024 * 1024
"""Bytes one message may hold (an embedded file or image rides in one line)."""


def claim_stdio() -> tuple[int, int]:
    """The client's two descriptors (read, write), taken from 0 and 1, which now lead elsewhere."""
    read_fd, write_fd = os.dup(0), os.dup(1)
    sys.stdout.flush()
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return read_fd, write_fd


def quiet_logging() -> None:
    """The SDK's log lines on standard error, one line each (a traceback only with RHAPSODY_DEBUG)."""

    class OneLine(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            if record.exc_info and not os.environ.get("RHAPSODY_DEBUG"):
                error = record.exc_info[1]
                record.exc_info, record.exc_text = None, None
                return f"rhapsody acp: {record.getMessage()}: {type(error).__name__}: {error}"
            return f"rhapsody acp: {super().format(record)}"

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLine())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)


def error_reply(message_id: Any, code: int, text: str) -> dict[str, Any]:
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": message_id, "error": {"code": code, "message": text}}


def checked(line: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """One line read: (the message, None), or (None, the error to answer it with)."""
    try:
        message = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        return None, error_reply(None, PARSE_ERROR, f"Parse error: not JSON ({exc})")
    if not isinstance(message, dict):
        return None, error_reply(None, INVALID_REQUEST, "Invalid request: a message is a JSON object")
    method, known = message.get("method"), "method" in message or "result" in message or "error" in message
    message_id = message.get("id")
    if (method is not None and not isinstance(method, str)) or not known or not isinstance(message_id, (str, int, type(None))):
        return None, error_reply(message_id if isinstance(message_id, (str, int)) else None, INVALID_REQUEST,
                                 "Invalid request: a JSON-RPC 2.0 message needs a string `method` (or a result)")
    return message, None


class StdioLines:
    """A message transport (the SDK's `Transport`) over two descriptors, one JSON object per line.

    A thread reads, so any descriptor works (a pipe, a file, a terminal); writes are whole lines under a
    lock, so concurrent senders never interleave."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._out = write_fd
        self._lock = asyncio.Lock()
        self._lines: asyncio.Queue[bytes] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._read, args=(read_fd, loop), daemon=True).start()

    def _read(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        with os.fdopen(fd, "rb") as lines:
            for line in iter(lambda: lines.readline(LINE_LIMIT), b""):
                loop.call_soon_threadsafe(self._lines.put_nowait, line)
        loop.call_soon_threadsafe(self._lines.put_nowait, b"")

    async def send(self, message: dict[str, Any]) -> None:
        """Write one message as one line."""
        data = (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        async with self._lock:
            view = memoryview(data)
            while view:
                view = view[os.write(self._out, view):]

    async def receive(self) -> dict[str, Any] | None:
        """The next message (None at the end of input); bad lines are answered here and skipped."""
        while True:
            line = await self._lines.get()
            if not line:
                return None
            if not line.strip():
                continue
            message, error = checked(line)
            if message is not None:
                return message
            if error is not None:
                await self.send(error)

    async def close(self) -> None:
        """Nothing to release: the descriptors go with the process."""
