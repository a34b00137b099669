"""A loopback HTTP server that speaks the Messages API, for tests and `rhapsody --demo`.

It also answers OpenAI's `POST /v1/chat/completions` (chat.py), Vertex AI's
`:streamRawPredict` and Bedrock's `invoke-with-response-stream` (bedrock.py) from the same
script.

It streams SSE exactly as the SDK reads it, plays turns from a responder, records every
request body, enforces the API's validation rules (see validate.py) and injects faults on
demand: an HTTP error status with retry-after, an `error` event mid-stream, a connection
torn mid-body, a stream that ends cleanly before `message_stop`, a slow answer, a data line
that is not JSON, an event of the wrong shape, or an HTML page served as a 200.
Usage is reported with a simple prompt-cache model so cache figures mean something.

With `window=N` it enforces a context window as each API does: a request whose input
counts more than N tokens is refused with the API's 400 (`prompt is too long: X tokens > N
maximum`; chat.py answers `context_length_exceeded`). The count is the one its usage
figures report (one token per four characters of each part's JSON, `prompt_tokens`), so a
refusal's figure and the usage of the requests before it tell one story.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from rhapsody.loopback import bedrock, chat
from rhapsody.loopback.dialect import Fault as Fault, Recorded as Recorded, Turn as Turn  # where the dialects read them
from rhapsody.loopback.validate import InvalidRequest, _plain, signature, validate
from rhapsody.core.json_types import JsonObject

HOLD_LIMIT = 30.0
"""Seconds a turn's `hold` keeps its stream waiting at most, so a test that fails first never holds it for good."""
_VERTEX = re.compile(r"/publishers/anthropic/models/([^/:]+):streamRawPredict$")
Responder = Callable[[JsonObject], Turn]


class LoopbackServer:
    """Serve the Messages API on 127.0.0.1 from a thread."""

    def __init__(self, responder: Responder, models: tuple[str, ...] = ("claude-",), port: int = 0,
                 window: int | None = None) -> None:
        self.responder = responder
        self.models = models
        self.window = window
        """Refuse requests whose input counts more tokens than this (None: no limit)."""
        self.requests: list[Recorded] = []
        self.faults: list[Fault] = []
        self._cache: set[str] = set()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        """Base URL for the SDK."""
        return f"http://127.0.0.1:{self._httpd.server_port}"

    def start(self) -> LoopbackServer:
        """Start serving in a daemon thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, at once: the serving loop, asked to stop, is woken by a connection of its own rather than
        left to notice at its next poll (up to 50 ms; the test suite stops a server after most of its tests)."""
        if not self._thread.is_alive():
            self._httpd.server_close()
            return
        stopping = threading.Thread(target=self._httpd.shutdown, daemon=True)
        stopping.start()
        while stopping.is_alive():
            try:
                socket.create_connection(("127.0.0.1", self._httpd.server_port), timeout=1.0).close()
            except OSError:
                pass
            stopping.join(0.005)
        self._httpd.server_close()

    def inject(self, *faults: Fault) -> None:
        """Queue faults for the next requests, one each."""
        with self._lock:
            self.faults.extend(faults)

    def bodies(self) -> list[JsonObject]:
        """The bodies of the requests that were answered 200."""
        return [r.body for r in self.requests if r.status == 200 and r.path.endswith(("/messages", ":streamRawPredict", "/invoke-with-response-stream"))]

    def next_id(self, prefix: str) -> str:
        """A fresh id for a message or tool_use."""
        return f"{prefix}_{next(self._ids):06d}"

    def take_fault(self) -> Fault | None:
        """The next injected fault, if any."""
        with self._lock:
            return self.faults.pop(0) if self.faults else None

    def usage(self, body: JsonObject, write: bool = True) -> dict[str, int]:
        """Input token figures with a prefix cache at every cache_control breakpoint."""
        parts = [body.get("tools", []), body.get("system")] + list(body.get("messages", []))
        total, read, write_upto, running = 0, 0, 0, ""
        for part in parts:
            plain = json.dumps(_plain(part), sort_keys=True, ensure_ascii=False)
            running = _digest(running + plain)
            total += _tokens(plain)
            with self._lock:
                if running in self._cache:
                    read = total
                if write and '"cache_control"' in json.dumps(part):
                    self._cache.add(running)
                    write_upto = total
        created = max(0, write_upto - read)
        return {"input_tokens": max(1, total - read - created), "cache_creation_input_tokens": created,
                "cache_read_input_tokens": read}


    def prompt_tokens(self, body: JsonObject) -> int:
        """The request's input tokens as the usage figures count them (cache or not)."""
        return sum(self.usage(body, write=False).values())

    def too_long(self, tokens: int) -> str | None:
        """Why a request of `tokens` input tokens is refused, in the API's words; None when it fits."""
        if self.window is None or tokens <= self.window:
            return None
        return f"prompt is too long: {tokens} tokens > {self.window} maximum"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


def _handler(server: LoopbackServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        loopback = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    loopback: LoopbackServer
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            return self._error(400, "invalid_request_error", "request body is not valid JSON", raw, None)
        if self.path.endswith(chat.PATH):
            return chat.serve(self, raw, body)
        if self.path.endswith("/count_tokens"):
            return self._json(200, {"input_tokens": sum(self.loopback.usage(body, write=False).values())}, raw, body)
        bedrock_model = bedrock.model_of(self.path)
        if bedrock_model and isinstance(body, dict):  # Bedrock names the model in the path and frames events
            return self._messages(raw, {**body, "model": bedrock_model}, framed=True)
        vertex = _VERTEX.search(self.path)
        if vertex and isinstance(body, dict):  # Vertex AI names the model in the path, not the body
            return self._messages(raw, {**body, "model": unquote(vertex.group(1))})
        if not self.path.endswith("/v1/messages"):
            return self._error(404, "not_found_error", f"no route {self.path}", raw, body)
        self._messages(raw, body)

    def _messages(self, raw: bytes, body: Any, framed: bool = False) -> None:
        lb = self.loopback
        try:
            validate(body)
        except InvalidRequest as exc:
            return self._error(400, "invalid_request_error", str(exc), raw, body)
        if not any(bedrock.claude_form(str(body["model"])).startswith(m) for m in lb.models):
            return self._error(404, "not_found_error", f"model: {body['model']}", raw, body)
        refusal = lb.too_long(lb.prompt_tokens(body)) if lb.window else None
        if refusal:
            return self._error(400, "invalid_request_error", refusal, raw, body)
        fault = lb.take_fault()
        if fault and fault.kind == "status":
            return self._status_fault(fault, raw, body)
        if fault and fault.kind == "html":
            return self._html_fault(raw, body)
        if fault and fault.kind == "slow":
            time.sleep(fault.seconds)
        turn = (fault.partial or _partial_turn()) if fault else lb.responder(body)
        self._record(200, raw, body)
        try:
            if framed:
                return bedrock.stream(self, list(_events(lb, body, turn)))
            self._stream(body, turn, fault)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _record(self, status: int, raw: bytes, body: Any) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.loopback.requests.append(Recorded(body, status, len(raw), self.path, headers, raw))

    def _json(self, status: int, payload: Any, raw: bytes, body: Any, headers: dict[str, str] | None = None) -> None:
        self._record(status, raw, body)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, kind: str, message: str, raw: bytes, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = {"type": "error", "error": {"type": kind, "message": message}}
        self._json(status, payload, raw, body, headers)

    def _status_fault(self, fault: Fault, raw: bytes, body: Any) -> None:
        kinds = {429: "rate_limit_error", 529: "overloaded_error", 500: "api_error"}
        self._error(fault.status, kinds.get(fault.status, "api_error"), "injected fault", raw, body, fault.headers())

    def _stream(self, body: JsonObject, turn: Turn, fault: Fault | None) -> None:
        events = list(_events(self.loopback, body, turn))
        self._open_event_stream(fault)
        for n, (name, data) in enumerate(events):
            if fault and n == fault.after_events:
                return self._finish_fault(fault)
            chunk = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            self.wfile.write(chunk)
            self.wfile.flush()
            delay = turn.get("delay", 0)
            if delay:
                time.sleep(delay)
            hold = turn.get("hold")
            if hold is not None and n + 1 == hold[0]:
                hold[1].wait(HOLD_LIMIT)

    def _open_event_stream(self, fault: Fault | None) -> None:
        """Send the 200 and the SSE headers; a `drop` fault promises a body it never sends."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        if fault and fault.kind == "drop":
            self.send_header("content-length", "1000000")
        self.end_headers()

    def _finish_fault(self, fault: Fault) -> None:
        if fault.kind == "sse_error":
            data = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            self.wfile.write(f"event: error\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.write(fault.payload if fault.kind == "garbage" and fault.payload is not None
                         else _malformed_event(fault.kind))
        self.wfile.flush()
        self.close_connection = True

    def _html_fault(self, raw: bytes, body: Any) -> None:
        """A 200 whose body is an HTML page, as a captive portal or a misrouted proxy sends."""
        self._record(200, raw, body)
        page = b"<!doctype html><html><head><title>Sign in</title></head><body>Please sign in.</body></html>\n"
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)
        self.close_connection = True


def _malformed_event(kind: str) -> bytes:
    """The bytes a malformed-stream fault sends where the next event was due (none for others)."""
    if kind == "garbage":
        return b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "delta": {"ty\n\n'
    if kind == "bad_shape":
        return b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 7, "delta": 5}\n\n'
    return b""


def _partial_turn() -> Turn:
    return {"content": [{"type": "text", "text": "This partial answer is lost to an injected fault and must not be kept."}]}


def _events(lb: LoopbackServer, body: JsonObject, turn: Turn) -> Any:
    """The SSE events of one response, thinking signatures and usage included."""
    blocks = [_materialise(lb, b) for b in turn.get("content", [])]
    usage = lb.usage(body)
    message = {
        "id": lb.next_id("msg"), "type": "message", "role": "assistant", "model": body["model"],
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1},
    }
    yield "message_start", {"type": "message_start", "message": message}
    emitted: list[JsonObject] = []
    for index, block in enumerate(blocks):
        if block["type"] == "thinking":
            block["signature"] = signature(body, body["messages"], emitted, block["thinking"])
        yield from _block_events(index, block)
        emitted.append(block)
    output = sum(_tokens(json.dumps(b)) for b in blocks)
    stop = turn.get("stop_reason") or ("tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn")
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": output}}
    yield "message_stop", {"type": "message_stop"}


def _materialise(lb: LoopbackServer, block: JsonObject) -> JsonObject:
    block = dict(block)
    if block["type"] == "tool_use":
        block.setdefault("id", lb.next_id("toolu"))
        block.setdefault("input", {})
    return block


def _block_events(index: int, block: JsonObject) -> Any:
    kind = block["type"]
    if kind == "text":
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
        text = block["text"]
        for start in range(0, len(text), 40):
            delta = {"type": "text_delta", "text": text[start : start + 40]}
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    elif kind == "thinking":
        yield "content_block_start", {"type": "content_block_start", "index": index,
                                      "content_block": {"type": "thinking", "thinking": "", "signature": ""}}
        yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                      "delta": {"type": "thinking_delta", "thinking": block["thinking"]}}
        yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                      "delta": {"type": "signature_delta", "signature": block["signature"]}}
    elif kind == "tool_use":
        opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}
        raw = block.get("raw_input")
        payload = raw if raw is not None else json.dumps(block["input"])
        for cut in range(0, len(payload), 50):
            delta = {"type": "input_json_delta", "partial_json": payload[cut : cut + 50]}
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    else:
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}
