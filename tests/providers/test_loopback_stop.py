"""The loopback server stops when asked, whether or not it ever served."""

from __future__ import annotations

import socket
import threading
from urllib.parse import urlsplit

import pytest

from rhapsody.loopback.script import ScriptedResponder
from rhapsody.loopback.server import LoopbackServer


def test_a_stopped_loopback_server_refuses_connections_and_one_that_never_served_stops_too() -> None:
    server = LoopbackServer(ScriptedResponder([])).start()
    url = urlsplit(server.url)
    address = (url.hostname or "", url.port or 0)
    socket.create_connection(address, timeout=2).close()  # serving
    server.stop()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(address, timeout=2)
    never = LoopbackServer(ScriptedResponder([]))
    stopping = threading.Thread(target=never.stop, daemon=True)
    stopping.start()
    stopping.join(5)
    assert not stopping.is_alive()  # a bare shutdown() waits for a serving loop that never ran
