"""`python -m rhapsody.loopback SCRIPT.json [--port N]`: serve a scripted Messages API locally.

Point rhapsody at it with `ANTHROPIC_BASE_URL=http://127.0.0.1:N ANTHROPIC_API_KEY=any`.
Every request body is validated as the API would; Ctrl+C stops the server.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rhapsody.core.errors import RhapsodyError
from rhapsody.loopback.script import ScriptedResponder
from rhapsody.loopback.server import LoopbackServer


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m rhapsody.loopback", description=__doc__.splitlines()[0])
    parser.add_argument("script", type=Path, help='JSON: {"turns": [...]} or a list of turns')
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free port)")
    parser.add_argument("--window", type=int, metavar="N", help="refuse requests of more than N input tokens, as the API does")
    ns = parser.parse_args(argv)
    try:
        responder = ScriptedResponder.from_file(ns.script)
    except RhapsodyError as exc:
        print(f"loopback: {exc}", file=sys.stderr)
        return 2
    server = LoopbackServer(responder, port=ns.port, window=ns.window).start()
    print(f"serving the Messages API at {server.url} ({len(responder.turns)} scripted turns)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
