"""`rhapsody trust`: let a project's own config raise permissions, and the first-run question.

Trusting writes the project's resolved path into `trusted_projects` of the user config
(the only place it counts). `trust_question` is what a front end asks on first run in a
project whose config was cut down; `untrusted_notice` is the one line headless prints.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

from rhapsody.config import _read_toml, is_trusted, project_layer, user_config_path
from rhapsody.core.errors import ConfigError

_KEY = re.compile(r"^trusted_projects\s*=\s*\[[^\]]*\]\s*$", re.MULTILINE)


def ignored(root: Path) -> list[str]:
    """What the project's config asks for that does not apply until the project is trusted."""
    return project_layer(root, _read_toml(user_config_path()))[1] if not is_trusted(root) else []


def untrusted_notice(root: Path) -> str | None:
    """One line for headless and plain mode, or None when nothing was ignored."""
    cut = ignored(root)
    if not cut:
        return None
    return (f"rhapsody: .rhapsody/config.toml of this project is not trusted; ignored: {', '.join(cut)}. "
            f"Run `rhapsody trust` to accept it.")


def trust_question(root: Path) -> str | None:
    """The first-run question for the app, or None when there is nothing to ask."""
    cut = ignored(root)
    if not cut:
        return None
    return (f"This project's .rhapsody/config.toml asks for more than rhapsody gives a new project: "
            f"{', '.join(cut)}. Trust {root.resolve()} and apply it?")


def trust(root: Path) -> Path:
    """Add `root` (resolved) to trusted_projects in the user config; returns the config's path."""
    path = user_config_path()
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    try:
        current = tomllib.loads(text).get("trusted_projects", [])
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if not isinstance(current, list):
        raise ConfigError(f"{path}: trusted_projects must be a list")
    here = str(root.resolve())
    listed = [p for p in current if isinstance(p, str)]
    if here not in listed:
        listed.append(here)
    line = "trusted_projects = [" + ", ".join(json.dumps(p, ensure_ascii=False) for p in listed) + "]"
    if "trusted_projects" in tomllib.loads(text) and _KEY.search(text):
        text = _KEY.sub(lambda _m: line, text, count=1)
    elif "trusted_projects" in tomllib.loads(text):
        raise ConfigError(f"{path}: edit trusted_projects by hand (it spans several lines); add {json.dumps(here)}")
    else:
        text = line + "\n" + text
    try:
        tomllib.loads(text)  # what is written must still read
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: cannot add {here!r}: {exc}") from None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(text, encoding="utf-8")
    return path
