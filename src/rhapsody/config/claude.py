"""Claude Code's `.claude/settings.json`: its permission rules and hooks in rhapsody's own terms.

Read from the user's `~/.claude/settings.json` (added to the user's layer) and the project's
`.claude/settings.json` and `.claude/settings.local.json` (added to the project's layer, so an
untrusted project's allow rules and hooks are dropped exactly as its `.rhapsody/config.toml`'s are,
while its deny rules, which only narrow, apply). Each Claude Code rule maps onto rhapsody's grammar
(`tool` or `tool:glob`, core/access/permissions.py); a form with no mapping is skipped and named,
never guessed:

    Bash / Bash(*)          bash
    Bash(npm test:*)        bash:npm test, bash:npm test *   (the prefix, alone or with arguments)
    Bash(git diff)          bash:git diff
    Read(./secrets/**)      read_file:secrets/**   (a deny rule also search_text:secrets/**)
    Read(~/x) / Read(//x)   read_file:/home/you/x / read_file:/x
    Edit(src/**)            edit_file:src/**, write_file:src/**
    Write(p)                write_file:p
    Grep(p) / Glob(p)       search_text:p / find_files:p
    WebFetch(domain:x)      web_fetch:x
    mcp__server[__tool]     the same

Hooks have the same shape in both (`{"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command",
"command": "..."}]}]}`, matchers see Claude Code's tool names too); an event rhapsody has no point for
(SessionStart, PreCompact, ...) or a hook that is not a command is skipped and named.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rhapsody.core.errors import ConfigError
from rhapsody.core.toolbox.hooks import EVENTS

PROJECT_FILES = (".claude/settings.json", ".claude/settings.local.json")
"""The project's Claude Code settings, relative to its root (the local one is the user's, uncommitted)."""
_FORM = re.compile(r"^([A-Za-z]+)(?:\((.*)\))?$", re.DOTALL)
_TOOLS = {"Bash": ("bash",), "Read": ("read_file",), "Edit": ("edit_file", "write_file"), "Write": ("write_file",),
          "MultiEdit": ("edit_file",), "Grep": ("search_text",), "Glob": ("find_files",), "WebFetch": ("web_fetch",)}
_PATH_TOOLS = ("Read", "Edit", "Write", "MultiEdit", "Grep", "Glob")


def user_path() -> Path:
    """The user's Claude Code settings file."""
    return Path.home() / ".claude" / "settings.json"


@dataclass
class Imported:
    """What the Claude Code files add: a settings layer, where each rule came from, and what was skipped."""

    layer: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def read_user() -> Imported:
    """The user's `~/.claude/settings.json` as a layer."""
    return _read([user_path()], "~/.claude/settings.json")


def read_project(root: Path) -> Imported:
    """The project's `.claude/settings.json` and `.claude/settings.local.json` as one layer."""
    return _read([root / name for name in PROJECT_FILES], "")


def _read(paths: list[Path], shown: str) -> Imported:
    out = Imported()
    for path in paths:
        data = _load(path)
        if data:
            _add(out, data, shown or os.path.join(path.parent.name, path.name))
    return out


def _load(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ConfigError(f"{path}: not readable JSON: {exc}".replace(str(Path.home()), "~", 1)) from None
    return data if isinstance(data, dict) else {}


def _add(out: Imported, data: dict[str, Any], source: str) -> None:
    perms = data.get("permissions")
    if isinstance(perms, dict):
        for kind in ("allow", "deny"):
            for form in perms.get(kind) or []:
                rules = rules_for(str(form), deny=kind == "deny")
                if not rules:
                    out.skipped.append(f"{kind} {form} ({source})")
                for rule in rules:
                    out.layer.setdefault(kind, []).append(rule)
                    out.origin[rule] = source
        out.skipped += [f"permissions.{k} ({source})" for k in perms if k not in ("allow", "deny")]
    hooks = data.get("hooks")
    if isinstance(hooks, dict):
        _add_hooks(out, hooks, source)


def _add_hooks(out: Imported, hooks: dict[str, Any], source: str) -> None:
    for event, matchers in hooks.items():
        if event not in EVENTS or not isinstance(matchers, list):
            out.skipped.append(f"hooks.{event} (no such point in rhapsody; {source})")
            continue
        for entry in matchers:
            if not isinstance(entry, dict):
                continue
            commands = [{k: v for k, v in h.items() if k in ("type", "command", "timeout")}
                        for h in entry.get("hooks") or [] if isinstance(h, dict) and h.get("type", "command") == "command"]
            if len(commands) < len(entry.get("hooks") or []):
                out.skipped.append(f"hooks.{event}: a hook that is not a command ({source})")
            if commands:
                out.layer.setdefault("hooks", {}).setdefault(event, []).append(
                    {"matcher": str(entry.get("matcher") or ""), "hooks": commands})


def rules_for(form: str, deny: bool = False) -> list[str]:
    """rhapsody's rules for one Claude Code rule; [] when it has no mapping."""
    if form.startswith("mcp__") and "(" not in form:
        return [form]
    match = _FORM.match(form.strip())
    if not match or match.group(1) not in _TOOLS:
        return []
    tool, arg = match.group(1), match.group(2)
    names = _TOOLS[tool] + (("search_text",) if tool == "Read" and deny else ())
    if arg is None or arg in ("", "*", "**"):
        return list(names)
    if tool == "Bash":
        return _bash(arg)
    if tool == "WebFetch":
        return [f"web_fetch:{arg[7:]}"] if arg.startswith("domain:") and arg[7:] else []
    pattern = _path(arg)
    return [f"{name}:{pattern}" for name in names] if pattern else []


def _bash(arg: str) -> list[str]:
    if arg.endswith(":*"):
        prefix = arg[:-2].rstrip()
        return [f"bash:{prefix}", f"bash:{prefix} *"] if prefix else ["bash"]
    return [f"bash:{arg}"]


def _path(arg: str) -> str:
    """A Claude Code path pattern as a rhapsody one ('' when its anchoring has no equivalent)."""
    if arg.startswith("//"):
        return arg[1:]
    if arg.startswith("~/"):
        return str(Path.home()) + arg[1:]
    if arg.startswith("/"):
        return ""  # relative to the settings file in Claude Code: no rhapsody rule means that
    return arg[2:] if arg.startswith("./") else arg
