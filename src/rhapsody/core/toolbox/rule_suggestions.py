"""The session rules an approval offers ("allow for this session"): only rules that work.

The candidates come from the same parse the rule matcher uses (`Rules.parse`), one rule
per simple command (`bash:pytest *`; `bash:ls` and `bash:ls *` for a bare `ls`), the
file's folder for file tools, the tool itself for MCP tools, the host for web_fetch. They are offered only when
the permission decision, with them added, allows this very call; otherwise nothing is
offered (an opaque command such as a `for` loop, a command leaving the sandbox, a call
that a deny rule or the mode refuses whatever the rules).

Imports: stdlib and rhapsody.core only.
"""

from __future__ import annotations

import dataclasses

from rhapsody.core.access.permissions import Call, Mode, Rules, decide_call, fetch_host


def session_rules(mode: Mode, rules: Rules, call: Call) -> tuple[str, ...]:
    """Rules that, allowed for the session, let this call (and calls like it) run; () when none can."""
    candidates = _candidates(rules, call)
    if not candidates:
        return ()
    trial = dataclasses.replace(rules, session_allow=[*rules.session_allow, *candidates])
    return candidates if decide_call(mode, trial, call).verdict == "allow" else ()


def _candidates(rules: Rules, call: Call) -> tuple[str, ...]:
    if call.tool == "bash":
        return () if call.leave_sandbox else _shell_candidates(rules, call.argument)
    if call.tool.startswith("mcp__"):
        return (call.tool,)
    if call.tool == "web_fetch":
        host = fetch_host(call.argument)
        return (f"web_fetch:{host}",) if host else ()
    key = call.keys[0] if call.keys else call.argument
    folder = key.rsplit("/", 1)[0] if "/" in key else ""
    return (f"{call.tool}:{folder}/*" if folder else f"{call.tool}:*",)


def _shell_candidates(rules: Rules, command: str) -> tuple[str, ...]:
    shell = rules.parse(command)
    if shell.opaque:
        return ()
    out: list[str] = []
    for words in (w for w in shell.commands if w):
        out += [f"bash:{words[0]} *"] if len(words) > 1 else [f"bash:{words[0]}", f"bash:{words[0]} *"]
    return tuple(dict.fromkeys(out))
