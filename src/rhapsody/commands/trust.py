"""`rhapsody trust`: let a project's own config raise permissions, and the first-run question.

Trusting writes the project's resolved path into `trusted_projects` of the user config
(the only place it counts). `offer` asks before an interactive session opens in a project
whose config was cut down or whose MCP servers wait; `untrusted_notice` is the one line headless prints.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

from rhapsody.config.files import MCP_JSON, project_config_path, user_config_path
from rhapsody.core.errors import ConfigError
from rhapsody.core.access.permissions import SandboxSetting

_KEY = re.compile(r"^trusted_projects\s*=\s*\[[^\]]*\]\s*$", re.MULTILINE)


def ignored(root: Path) -> list[str]:
    """What the project's config asks for that does not apply until the project is trusted."""
    from rhapsody.config.settings import is_trusted, project_layer, user_layer

    return project_layer(root, user_layer())[1] if not is_trusted(root) else []


def _settings_ignored(root: Path) -> list[str]:
    # The project's MCP servers get their own line, naming them (mcp/config.py, waiting_line): not twice.
    return [entry for entry in ignored(root) if not entry.startswith("mcp_servers ")]


def start_notices(root: Path, sandbox: SandboxSetting) -> list[str]:
    """What a front end without a screen of its own says as a session starts: an untrusted project config
    cut down, a sandbox that is off (`sandbox`: the setting)."""
    from rhapsody.sandbox.bwrap import bwrap_path, status

    notice = untrusted_notice(root)
    off = sandbox == "off" or bwrap_path() is None
    return [n for n in (notice, f"rhapsody: {status(sandbox)}" if off else None) if n]


def untrusted_notice(root: Path) -> str | None:
    """One line for headless and plain mode, or None when no setting was ignored."""
    cut = _settings_ignored(root)
    if not cut:
        return None
    return (f"rhapsody: {_files(root)} of this project is not trusted; ignored: {', '.join(cut)}. "
            f"Run `rhapsody trust` to accept it.")


def dropped_notices(root: Path) -> list[str]:
    """One line per key of the project's config dropped as invalid (nothing imported without a config)."""
    if not project_config_path(root).exists():
        return []
    from rhapsody.config.settings import project_problems

    return [f"rhapsody: {line}" for line in project_problems(root)]


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


def _files(root: Path) -> str:
    """The project's settings files that ask for something: its own config, Claude Code's, or both."""
    own = project_config_path(root).exists()
    return " and ".join([".rhapsody/config.toml"] * own + [".claude/settings.json"] * _claude_settings(root)) or \
        ".rhapsody/config.toml"


def _claude_settings(root: Path) -> bool:
    from rhapsody.config.claude import PROJECT_FILES

    return any((root / name).is_file() for name in PROJECT_FILES)


def first_run_question(root: Path) -> str | None:
    """What to ask before an interactive session opens: the ignored config and the waiting MCP servers."""
    if not project_config_path(root).exists() and not (root / MCP_JSON).exists() and not _claude_settings(root):
        return None  # nothing a project could ask for: the settings' validation is not even imported
    from rhapsody.mcp.config import plan

    cut = _settings_ignored(root)
    try:
        waiting = plan(root).waiting
    except ConfigError:
        waiting = ()
    if not cut and not waiting:
        return None
    asks = ([f"its {_files(root)} asks for {', '.join(cut)}"] if cut else []) + (
        [f"it would start MCP servers {', '.join(waiting)} (programs named by the project)"] if waiting else [])
    from rhapsody.view.render import visible  # names the project chose: escapes shown, never sent to the terminal

    text = f"rhapsody has not been told to trust {root.resolve()}: {'; '.join(asks)}."
    return visible(text).replace("\n", "\\n").replace("\t", "\\t")


def wrapped(text: str) -> str:
    """Text broken at spaces to the terminal's width (the terminal itself would cut words in two); a word
    longer than a line (a deep project's path) has a line of its own."""
    import shutil
    import textwrap

    width = shutil.get_terminal_size((80, 24)).columns
    return textwrap.fill(text, max(40, width - 1), break_long_words=False, break_on_hyphens=False)


def offer(root: Path, ask: Callable[[str], str]) -> bool:
    """Ask once before the session opens; only a typed `y` or `yes` trusts. Returns whether it did."""
    question = first_run_question(root)
    if question is None:
        return False
    answer = ask(f"{wrapped(question)}\nTrust this project and apply its settings? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        print(wrapped("Not trusted: the project's settings stay lowered. `rhapsody trust` changes that later."))
        return False
    print(wrapped(f"trusted {root.resolve()} (in {trust(root)})"))
    return True
