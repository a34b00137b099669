"""Permission modes and allow/deny rules: what a tool call may do without asking.

Rules are strings `tool` or `tool:pattern`, the pattern a glob over the call's key
argument (the command for bash, the path for file tools). Order of decision:

1. a deny rule that matches → deny (nothing overrides it);
2. a protected read (.env files, private keys, `.rhapsody/`) → deny unless an allow rule
   names it;
3. mode `yolo` → allow; an allow rule that matches → allow;
4. the mode: `read-only` denies writes and bash; `auto-edit` allows file writes and asks
   for bash; `ask` asks for writes and bash. Reads are always allowed. MCP tools count as
   writes (rhapsody cannot know what a server does): they ask in `auto-edit` too, unless a
   rule such as `mcp__time` (every tool of that server) or `mcp__time__get_current_time`
   allows them.

For bash, an allow rule must match every sub-command of a compound command (`&&`, `||`,
`;`, `|`, newlines), so `bash:pytest*` does not allow `pytest && rm -rf ~`.

Imports: stdlib only.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

FILE_WRITERS = ("write_file", "edit_file")
PROTECTED_READS = (".env", ".env.*", "*.pem", "*.key", "id_rsa*", "id_ed25519*", "id_ecdsa*", ".rhapsody", ".rhapsody/*")
_SPLIT = re.compile(r"&&|\|\||;|\||\n")


@dataclass(frozen=True)
class Decision:
    """allow, deny or ask, and why."""

    verdict: str
    reason: str
    rule: str = ""


@dataclass
class Rules:
    """Allow and deny rules; `session_allow` grows when the human allows a prefix."""

    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    session_allow: list[str] = field(default_factory=list)


def subcommands(command: str) -> list[str]:
    """The parts of a compound shell command, stripped."""
    return [part.strip() for part in _SPLIT.split(command) if part.strip()]


def _names(rule_name: str, tool: str) -> bool:
    """A rule's tool name covers `tool`; `mcp__NAME` covers every tool of that MCP server."""
    return rule_name == tool or (rule_name.startswith("mcp__") and rule_name.count("__") == 1
                                 and tool.startswith(rule_name + "__"))


def _matches(rule: str, tool: str, argument: str) -> bool:
    name, _, pattern = rule.partition(":")
    return _names(name, tool) and (not pattern or fnmatch.fnmatchcase(argument, pattern))


def _allowed_by(rules: list[str], tool: str, argument: str) -> str:
    """The allow rule(s) covering the call; for bash, every sub-command needs one."""
    if tool != "bash":
        return next((r for r in rules if _matches(r, tool, argument)), "")
    used = []
    for part in subcommands(argument) or [""]:
        rule = next((r for r in rules if _matches(r, tool, part)), "")
        if not rule:
            return ""
        used.append(rule)
    return ", ".join(dict.fromkeys(used))


def _denied(rule: str, tool: str, argument: str) -> bool:
    name, _, pattern = rule.partition(":")
    if not _names(name, tool):
        return False
    if tool == "bash" and pattern:
        return any(fnmatch.fnmatchcase(part, pattern) for part in subcommands(argument))
    return not pattern or fnmatch.fnmatchcase(argument, pattern)


def protected(path: str) -> bool:
    """Whether reading `path` (relative to the project) exposes secrets or rhapsody's own state."""
    parts = path.replace("\\", "/").split("/")
    return any(fnmatch.fnmatchcase(p, pat) for p in parts for pat in PROTECTED_READS) or path.startswith(".rhapsody")


def decide(mode: str, rules: Rules, tool: str, argument: str, writes: bool, reads_files: bool) -> Decision:
    """The decision for one call; see the module docstring for the order."""
    for rule in rules.deny:
        if _denied(rule, tool, argument):
            return Decision("deny", f"denied by rule {rule!r}", rule)
    allowed = _allowed_by([*rules.allow, *rules.session_allow], tool, argument)
    if reads_files and argument and protected(argument) and not allowed:
        return Decision("deny", f"{argument} may hold secrets or rhapsody's own state; an allow rule "
                                f"'{tool}:{argument}' would permit it")
    if not writes:
        return Decision("allow", "reads are allowed", allowed)
    if mode == "yolo":
        return Decision("allow", "yolo mode allows everything")
    if allowed:
        return Decision("allow", f"allowed by rule {allowed!r}", allowed)
    if mode == "read-only":
        return Decision("deny", "read-only mode: no writes, no bash")
    if mode == "auto-edit" and tool in FILE_WRITERS:
        return Decision("allow", "auto-edit mode allows file writes inside the project")
    return Decision("ask", f"{mode} mode asks before {_what(tool)}")


def _what(tool: str) -> str:
    if tool == "bash":
        return "running commands"
    return "calling MCP tools" if tool.startswith("mcp__") else "writing files"


def suggested_rules(tool: str, argument: str) -> tuple[str, ...]:
    """Session rules that would allow calls like this one.

    For bash, one rule per sub-command's first word (an allow rule must cover every part);
    for file tools, the file's folder.
    """
    if tool == "bash":
        words = [part.split()[0] for part in subcommands(argument) if part.split()]
        return tuple(dict.fromkeys(f"bash:{w} *" for w in words)) or ("bash",)
    if tool.startswith("mcp__"):
        return (tool,)
    folder = argument.rsplit("/", 1)[0] if "/" in argument else ""
    return (f"{tool}:{folder}/*" if folder else f"{tool}:*",)
