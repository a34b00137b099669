"""The MCP servers an editor passes with `session/new` and `session/load`, as rhapsody's own server entries.

The client's list is the user's editor configuration (Zed's `context_servers`, for one): servers the
person chose, so they start as the user config's do, with no trust step. A stdio entry becomes a
command; an HTTP one a streamable-HTTP url with its headers. SSE is a transport rhapsody does not
speak (the initialize answer says so): such an entry is named in a notice and not started.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from rhapsody.config.settings import McpServer


def client_servers(entries: Iterable[Any] | None) -> tuple[dict[str, McpServer], list[str]]:
    """The entries as servers by name (a later one of the same name wins), and a line for each left out."""
    servers: dict[str, McpServer] = {}
    problems: list[str] = []
    for entry in entries or ():
        name = str(getattr(entry, "name", "") or "")
        kind = getattr(entry, "type", None)
        if not name:
            problems.append("an MCP server the editor passed has no name; not started")
        elif kind == "sse":
            problems.append(f"MCP server {name} not started: it speaks SSE, and rhapsody speaks stdio and "
                            "streamable HTTP")
        else:
            try:
                servers[name] = _server(entry, kind)
            except ValidationError as exc:
                problems.append(f"MCP server {name} not started: {exc.errors()[0]['msg']}")
    return servers, problems


def _server(entry: Any, kind: str | None) -> McpServer:
    if kind == "http":
        headers = {h.name: h.value for h in getattr(entry, "headers", None) or ()}
        return McpServer.model_validate({"url": entry.url, "headers": headers})
    env = {v.name: v.value for v in getattr(entry, "env", None) or ()}
    return McpServer.model_validate({"command": entry.command, "args": list(getattr(entry, "args", None) or ()),
                                     "env": env})
