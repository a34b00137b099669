"""Which MCP servers a session starts: the user's, and a trusted project's.

Servers come from three places, later ones winning for the same name: the user config
(`[mcp_servers.NAME]`), the project's `.mcp.json` (`{"mcpServers": {...}}`, Claude Code's
format, `${VAR}` and `${VAR:-default}` expanded from the environment) and the project's
`.rhapsody/config.toml`. A project's servers start only once the project is trusted
(`config/settings.py`'s `is_trusted`, the list `rhapsody trust` writes): a cloned repository must not start
programs by being opened. Until then they are listed as waiting for trust.

Does not import `mcp` (that is `rhapsody.mcp.tools`), so reading the plan stays cheap.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rhapsody.config.settings import McpServer, is_trusted
from rhapsody.config.files import MCP_JSON, project_config_path, read_config, user_config_path
from rhapsody.core.errors import ConfigError
from rhapsody.core.session.messages import MAX_NESTING, nested_within
from rhapsody.core.json_types import JsonObject

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-((?:[^}$]|\$(?!\{))*))?\}")
"""`${NAME}` or `${NAME:-default}`; a default stops at the next `${`, so a value of unclosed ones is linear time."""


@dataclass(frozen=True)
class McpPlan:
    """The servers to start, by name, and the project's servers still waiting for trust."""

    servers: dict[str, McpServer] = field(default_factory=dict)
    waiting: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()
    """Lines about a project's .mcp.json that could not be used (another tool's file: not fatal)."""

    @property
    def empty(self) -> bool:
        """Nothing to start and nothing to report."""
        return not self.servers and not self.waiting and not self.problems


def plan(root: Path) -> McpPlan:
    """The servers this project starts now, and those waiting for the user to trust it."""
    user = _parse(read_config(user_config_path()).get("mcp_servers", {}), str(user_config_path()))
    problems: tuple[str, ...] = ()
    try:
        claude = _parse(_mcp_json(root / MCP_JSON), str(root / MCP_JSON))
    except ConfigError as exc:
        claude, problems = {}, (f"ignored {exc}",)
    try:  # the project's own file fails closed: a bad server is left out and named, never fatal
        own = _parse(read_config(project_config_path(root)).get("mcp_servers", {}), str(project_config_path(root)))
    except ConfigError as exc:
        own, problems = {}, (*problems, f"ignored {exc}")
    project = {**claude, **own}
    if project and not is_trusted(root):
        return McpPlan(_enabled(user), tuple(sorted(project)), problems)
    return McpPlan(_enabled({**user, **project}), problems=problems)


def with_servers(planned: McpPlan, servers: dict[str, McpServer]) -> McpPlan:
    """`planned` with `servers` added, theirs winning for the same name (servers the person chose in an editor)."""
    if not servers:
        return planned
    return McpPlan(_enabled({**planned.servers, **servers}), planned.waiting, planned.problems)


def waiting_line(names: tuple[str, ...]) -> str:
    """The one line that says which project servers wait for trust."""
    return (f"MCP server{'s' if len(names) > 1 else ''} {', '.join(names)} from this project "
            f"{'wait' if len(names) > 1 else 'waits'} for trust: not started (trust the project to start "
            f"{'them' if len(names) > 1 else 'it'})")


def _enabled(servers: dict[str, McpServer]) -> dict[str, McpServer]:
    return {name: servers[name] for name in sorted(servers) if servers[name].enabled}


def _parse(table: Any, where: str) -> dict[str, McpServer]:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: mcp_servers must be a table of servers")
    out: dict[str, McpServer] = {}
    for name, entry in table.items():
        try:
            out[str(name)] = McpServer.model_validate(entry)
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(p) for p in err.get("loc", ()))
            raise ConfigError(f"{where}: MCP server {name!r}{' ' + key if key else ''}: {err['msg']}") from None
    return out


def _mcp_json(path: Path) -> JsonObject:
    """The `mcpServers` of a Claude Code `.mcp.json`, in rhapsody's shape."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except RecursionError:  # deeper than the parser goes
        raise ConfigError(f"{path}: nested deeper than {MAX_NESTING} levels") from None
    if not nested_within(data):
        raise ConfigError(f"{path}: nested deeper than {MAX_NESTING} levels")
    servers = data.get("mcpServers", {}) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: expected {{\"mcpServers\": {{...}}}}")
    return {name: _from_claude(name, entry, path) for name, entry in servers.items()}


def _from_claude(name: str, entry: Any, path: Path) -> JsonObject:
    if not isinstance(entry, dict):
        raise ConfigError(f"{path}: MCP server {name!r} must be an object")
    kind = entry.get("type", "http" if "url" in entry else "stdio")
    if kind not in ("stdio", "http", "sse"):  # Claude Code's three; anything else would be read as http unseen
        raise ConfigError(f"{path}: MCP server {name!r}: 'type' is {json.dumps(kind)[:40]}, not stdio or http")
    if kind == "sse":
        raise ConfigError(f"{path}: MCP server {name!r}: the SSE transport is not supported; use streamable HTTP")
    keys = ("command", "args", "env", "cwd") if kind == "stdio" else ("url", "headers")
    return {key: _expand(entry[key]) for key in keys if key in entry}


def _expand(value: Any) -> Any:
    """`${VAR}` and `${VAR:-default}` replaced from the environment, as Claude Code does."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: os.environ.get(m.group(1), m.group(2) or ""), value)
    if isinstance(value, list):
        return [_expand(v) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v) for k, v in value.items()}
    return value
