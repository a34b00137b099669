"""A client for a plain-HTTP endpoint loads no CA bundle (providers/plain_http.py), and the context it gets
instead trusts nothing: a TLS handshake through it fails, against a real TLS server in this process."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Any

import openai
import pytest

from rhapsody.core.events import ModelResponse
from rhapsody.loopback.script import say
from rhapsody.providers.anthropic import AnthropicModel
from rhapsody.providers.openai import OpenAIModel
from rhapsody.providers.plain_http import plain_http, untrusting

from tests.conftest import MODEL, Stub


def loads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Each CA bundle a TLS context loads from now on (the real loading still happens)."""
    loaded: list[Any] = []
    real = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loaded.append(args or kwargs)
        real(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    return loaded


async def test_the_anthropic_client_of_an_http_endpoint_answers_without_loading_a_ca_bundle(
        stub: Stub, monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = loads(monkeypatch)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.server.url)
    stub.script(say("Over plain HTTP."))
    model = AnthropicModel(retries=0)
    events = [e async for e in model.stream({"model": MODEL, "max_tokens": 64,
                                             "messages": [{"role": "user", "content": "hello"}]})]
    assert isinstance(events[-1], ModelResponse) and "Over plain HTTP." in str(events[-1].message.content)
    assert loaded == []
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "https://api.anthropic.com")
    AnthropicModel(retries=0)
    assert loaded, "the https endpoint's client loads the CA bundle as the SDK always did"


def test_the_openai_client_of_a_local_server_loads_no_ca_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = loads(monkeypatch)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    assert isinstance(OpenAIModel(retries=0).client, openai.AsyncOpenAI) and loaded == []
    monkeypatch.setenv("OPENAI_BASE_URL", "https://api.openai.com/v1")
    OpenAIModel(retries=0)
    assert loaded


def test_only_an_http_address_counts_as_plain() -> None:
    assert plain_http("http://127.0.0.1:8080") and plain_http(" HTTP://localhost/v1")
    assert not any(plain_http(u) for u in (None, "", "https://api.anthropic.com", "httpx://x", "unix:///tmp/s"))


def test_the_context_that_replaces_the_bundle_refuses_every_certificate(tmp_path: Path) -> None:
    """A redirect from a plain-HTTP endpoint to an https address fails its handshake rather than going
    unverified: the same server's certificate is accepted by a context that trusts it."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
                   check=True, capture_output=True)
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve(times: int) -> None:
        for _ in range(times):
            conn, _ = listener.accept()
            try:
                with served.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"hello")
            except (ssl.SSLError, OSError):
                pass

    server = threading.Thread(target=serve, args=(2,), daemon=True)
    server.start()
    trusting = ssl.create_default_context(cafile=str(cert))
    with socket.create_connection(("127.0.0.1", port)) as raw, trusting.wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.recv(5) == b"hello"
    with socket.create_connection(("127.0.0.1", port)) as raw, pytest.raises(ssl.SSLCertVerificationError):
        untrusting().wrap_socket(raw, server_hostname="localhost")
    server.join(10)
    listener.close()
