"""Where the settings files are, and reading one: no validation here, so asking costs no import.

`config/settings.py` validates what these files say; the first-run trust question and the app's first
frame need only to know whether a project brings a config or an `.mcp.json` at all.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from rhapsody.core.errors import ConfigError

MCP_JSON = ".mcp.json"
"""The project's MCP server list, in the format other agents share."""


def user_config_path() -> Path:
    """The user's config file."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "rhapsody" / "config.toml"


def project_config_path(root: Path) -> Path:
    """The project's own settings file."""
    return root / ".rhapsody" / "config.toml"


def read_config(path: Path) -> dict[str, Any]:
    """One settings file as a dict ({} when it does not exist); raises ConfigError when malformed."""
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    except RecursionError:  # arrays or tables nested deeper than the parser goes (a cloned project's file)
        raise ConfigError(f"{path}: nested deeper than the TOML parser goes") from None
    return data
