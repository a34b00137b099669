"""No CA bundle for an endpoint spoken to in plain HTTP.

Each SDK client loads the system's CA bundle as it is made (its transport builds a TLS context at once):
about 35 ms of CPU on the development machine, on the path of every `rhapsody -p` and of the demo. An
endpoint whose URL is `http://` (the loopback server, a local model server, a local proxy) never needs it.
Its client gets a context that trusts no certificate instead: made in microseconds, and a redirect to an
`https://` address fails its handshake rather than going unverified.

Stdlib only; each provider passes the context to its own SDK's client.
"""

from __future__ import annotations

import ssl


def plain_http(url: str | None) -> bool:
    """Whether requests to `url` go without TLS (an `http://` address)."""
    return url is not None and url.strip().lower().startswith("http://")


def untrusting() -> ssl.SSLContext:
    """A client TLS context with no trusted certificate: every handshake it attempts fails verification."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname, the client defaults
