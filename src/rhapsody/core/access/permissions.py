"""Permission modes and allow/deny rules: what a tool call may do without asking.

Rules are strings `tool` or `tool:pattern`, the pattern a glob over the call's key: for
file tools the path *resolved* and made relative to the project root (`./x`, `/abs/x`,
`a/../x` and symlinks all become `x`); for bash each simple command of a real parse of
the command line (words unquoted, joined by one space). Order of decision:

1. a deny rule that matches → deny. For bash this is a convenience: the sandbox is the
   boundary (docs/security.md); a command rules cannot see through (outside the grammar
   of `tools/shell.py`, or `eval`, `bash -c`, ...) asks when bash deny rules exist, in
   every mode;
2. a protected read (secret-looking files, case-insensitive, the link's target too, and
   `.rhapsody/`) → deny unless an allow rule names it;
3. a `read_file` outside the project (the path as given or its resolved target) → deny in
   `read-only`, allow by an allow rule, else ask, in every other mode, `yolo` too (the tool still
   refuses credential locations, `core/access/credentials.py`);
4. reads → allow;
5. bash: a command that asks to leave the sandbox always asks (refused in `read-only`),
   unless an `unsandboxed:pattern` rule from the user's own config allows it; a
   sandboxed command runs in `read-only` (read-only sandbox), `auto-edit` and `yolo`, and
   in `ask` by an allow rule, or unasked when it is a read-only command (`read_only_command`:
   every simple command a program of `READ_ONLY_PROGRAMS`, `git` only as `git status|log|diff|show`,
   nothing opaque) that the toolbox runs in the read-only sandbox; with no sandbox, `read-only` refuses, `yolo` allows
   only when `sandbox = "off"` was chosen, and otherwise an allow rule or the human;
6. other writes: `yolo` → allow; `read-only` and `plan` → deny (no rule raises it); an allow rule →
   allow; `auto-edit` allows file writes; else ask. MCP tools count as writes (rhapsody
   cannot know what a server does): they ask in `auto-edit` too, unless a rule such as
   `mcp__time` (every tool of that server) or `mcp__time__get_current_time` allows them.

`web_fetch` (rhapsody's own process, not the sandbox) is matched on the URL's host and on
the address it is (core.access.addresses: every spelling canonical): `web_fetch:docs.python.org`,
`web_fetch:*.python.org`, `web_fetch:127.0.0.1`, `web_fetch:10.0.0.0/8`. An address off the
public internet (this machine, private, link-local, ...) is refused in every mode unless a
rule names that address; a deny rule refuses; an allow rule (or `yolo`) allows; otherwise
it asks, in every mode, once per host when the human allows it for the session. A name's
addresses are decided once it is resolved (`decide_addresses`), after the name was allowed,
so no lookup sends out a name the rules or the human did not let through.

An allow rule runs a bash command only when every simple command matches and the
command is not opaque (see `ParsedCommand`).

Imports: stdlib and rhapsody.core.access.addresses only.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args
from urllib.parse import urlsplit

from rhapsody.core.access.addresses import IP, kind, literal, names, spoken

Mode = Literal["read-only", "plan", "ask", "auto-edit", "yolo"]
"""The permission modes, most restrictive first; `plan` enforces what `read-only` does (see `writes_nothing`)
and ends with a plan the human approves (tools/plan.py)."""
MODES: tuple[Mode, ...] = get_args(Mode)
READ_ONLY_MODES: tuple[Mode, ...] = ("read-only", "plan")
"""The modes in which nothing writes: reads, searches and commands in the read-only sandbox only."""


def writes_nothing(mode: Mode) -> bool:
    """Whether `mode` refuses every write (read-only and plan mode)."""
    return mode in READ_ONLY_MODES
Verdict = Literal["allow", "deny", "ask"]
"""A decision on one call: it runs, it is refused, or a human is asked."""
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
DecidedBy = Literal["rules", "hook", "human", "mode"]
"""Who decided a call: the rules and mode, a PreToolUse hook, the human, or the mode where no human can answer."""
SandboxSetting = Literal["workspace-write", "read-only", "off"]
"""The `sandbox` setting: where bash runs unless the mode narrows it (see sandbox.bwrap.effective_level)."""
Confinement = Literal["", "workspace-write", "read-only", "off", "unavailable"]
"""Where a tool's process runs: a sandbox level, 'off' (sandbox = "off"), 'unavailable' (no bubblewrap);
'' for a tool that runs inside rhapsody's own process."""

FILE_WRITERS = ("write_file", "edit_file")
PLAN_HINT = "; read and search, then propose your plan with exit_plan"
"""What a refusal in plan mode adds: the way out of the mode."""
PROTECTED_READS = (".env", ".env.*", ".env-*", ".env_*", "*.env", ".envrc", "*.pem", "*.key", "*.p12", "*.pfx",
                   "id_rsa*", "id_ed25519*", "id_ecdsa*", "id_dsa*", ".netrc", ".git-credentials", ".pgpass", ".npmrc",
                   ".pypirc", "credentials.json", "*.keystore", "*.jks", "*.tfvars", "*.tfstate", "*.tfstate.*",
                   "secrets.yml", "secrets.yaml", "secrets.json", "secrets.toml", ".secrets", ".htpasswd", "*.ppk", "*.kdbx",
                   ".vault-token", "kubeconfig", ".dockercfg", ".s3cfg", ".boto", "service-account*.json",
                   "client_secret*.json", "*.ovpn")
"""Secret-looking file names, matched case-insensitively against every part of the path. The one list:
read_file refuses them, search and git leave them out, the sandbox binds an empty file over them."""
SANDBOXED: tuple[Confinement, ...] = ("workspace-write", "read-only")
READ_ONLY_PROGRAMS = frozenset({"ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "find", "pwd",
                                "stat", "du", "diff", "cut", "sort", "basename", "dirname", "realpath", "echo"})
"""Programs that read and print: in `ask` mode a command made only of these runs unasked, in the read-only
sandbox. Their options that run another program or write a file (`find -exec`/`-delete`/`-fprint`,
`sort -o`, `rg --pre`) make the parse opaque (tools/shell.py), and opaque never qualifies; programs whose
plain operands can name an output file (`uniq IN OUT`, `tree -o`, `file -C`, `tee`) are not listed."""
READ_ONLY_GIT = frozenset({"status", "log", "diff", "show"})
"""The git subcommands of a read-only command, written right after `git` (no global option such as `-c`)."""


def mode_named(text: object) -> Mode | None:
    """The permission mode `text` names (a setting, a command's argument); None when it names none."""
    return next((m for m in MODES if m == text), None)


def verdict_named(text: object) -> Verdict | None:
    """The verdict `text` names (a hook's JSON answer); None when it names none."""
    return next((v for v in VERDICTS if v == text), None)
_SPLIT = re.compile(r"&&|\|\||;|\||\n")


@dataclass(frozen=True)
class ParsedCommand:
    """A parsed command line: its simple commands as words, and why rules cannot judge it ('' if they can)."""

    commands: tuple[tuple[str, ...], ...]
    opaque: str = ""

    def texts(self) -> list[str]:
        """Each simple command as one string, words joined by a space."""
        return [" ".join(words) for words in self.commands]


def _no_parser(command: str) -> ParsedCommand:
    return ParsedCommand((), "no shell parser is available")


@dataclass(frozen=True)
class Decision:
    """allow, deny or ask, and why."""

    verdict: Verdict
    reason: str
    rule: str = ""


@dataclass
class Rules:
    """Allow and deny rules; `session_allow` grows when the human allows a prefix."""

    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    session_allow: list[str] = field(default_factory=list)
    parse: Callable[[str], ParsedCommand] = _no_parser
    """Parses a bash command line; without a real parser no bash command runs by rule."""

    def read_denied(self) -> tuple[str, ...]:
        """Patterns of `read_file` and `search_text` deny rules, which search, listing and diffs leave out
        (a bare `read_file` denies everything: `**`; a bare `search_text` denies the tool itself)."""
        out = []
        for rule in self.deny:
            name, _, pattern = rule.partition(":")
            if name == "read_file":
                out.append(pattern or "*")
            elif name == "search_text" and pattern:
                out.append(pattern)
        return tuple(out)


def subcommands(command: str) -> list[str]:
    """The parts of a compound shell command split on operators (for suggestions only)."""
    return [part.strip() for part in _SPLIT.split(command) if part.strip()]


def relative_keys(root: Path, given: str) -> tuple[str, ...]:
    """The path rules see: resolved (symlinks followed) and lexically normalised, relative to the root."""
    base = root.resolve()
    raw = Path(given) if os.path.isabs(given) else base / given
    keys = []
    for candidate in (raw.resolve(), Path(os.path.normpath(raw))):
        try:
            keys.append(candidate.relative_to(base).as_posix() or ".")
        except ValueError:
            keys.append(candidate.as_posix())
    return tuple(dict.fromkeys(keys))


def _glob(pattern: str, value: str, fold: bool = False) -> bool:
    pattern = pattern[2:] if pattern.startswith("./") else pattern
    if fold:
        return fnmatch.fnmatchcase(value.lower(), pattern.lower())
    return fnmatch.fnmatchcase(value, pattern)


def _names(rule_name: str, tool: str) -> bool:
    """A rule's tool name covers `tool`; `mcp__NAME` covers every tool of that MCP server."""
    return rule_name == tool or (rule_name.startswith("mcp__") and rule_name.count("__") == 1
                                 and tool.startswith(rule_name + "__"))


def _matches(rule: str, tool: str, keys: tuple[str, ...]) -> bool:
    name, _, pattern = rule.partition(":")
    return _names(name, tool) and (not pattern or any(_glob(pattern, k) for k in keys))


def _file_allowed(rules: list[str], tool: str, keys: tuple[str, ...]) -> str:
    """An allow rule matching the resolved path (the first key)."""
    return next((r for r in rules if _matches(r, tool, keys[:1])), "")


def _shell_allowed(rules: list[str], name: str, shell: ParsedCommand) -> str:
    """The rules covering every simple command, or '' (always '' for an opaque command)."""
    if shell.opaque or not shell.commands:
        return ""
    used = []
    for words, text in zip(shell.commands, shell.texts()):
        rule = next((r for r in rules if _matches(r, name, (text,)) and _program_allowed(r, words[0])), "")
        if not rule:
            return ""
        used.append(rule)
    return ", ".join(dict.fromkeys(used))


def _program_allowed(rule: str, program: str) -> bool:
    """The rule's first word names `program`, with `*` and `?` never matching '/': `bash:pytest*` allows
    `pytest -x` and `pytest-watch`, not `pytest/../run.sh` (a path through a folder of that name)."""
    pattern = rule.partition(":")[2]
    if not pattern:
        return True
    first = pattern.split()[0] if pattern.split() else pattern
    regex = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in first)
    return re.fullmatch(regex, program) is not None


def _shell_denied(rules: list[str], command: str, shell: ParsedCommand) -> str:
    """A deny rule matching the raw line, a split part, or a parsed command (by the program's base name,
    and by its flags in any order or grouping: `rm -rf*` also denies `rm -fr x` and `rm -r -f x`)."""
    programs = [_program_words(w) for w in shell.commands if w]
    forms = [command, *subcommands(command), *shell.texts(), *(" ".join(w) for w in programs)]
    forms += [" ".join(f.split()) for f in list(forms)]
    for rule in rules:
        name, _, pattern = rule.partition(":")
        if name != "bash":
            continue
        if not pattern or any(_glob(pattern, f) for f in forms) or any(_flags_match(pattern, w) for w in programs):
            return rule
    return ""


_WRAPPERS = ("busybox", "toybox")
_LONG_FLAGS = {"recursive": "r", "force": "f", "delete": "d", "all": "a"}


def _program_words(words: tuple[str, ...]) -> tuple[str, ...]:
    """The words with the program as its base name, `busybox rm` as `rm`."""
    out = [words[0].rsplit("/", 1)[-1].lstrip("\\"), *words[1:]]
    while len(out) > 1 and out[0] in _WRAPPERS:
        out = [out[1].rsplit("/", 1)[-1], *out[2:]]
    return tuple(out)


def _flag_letters(words: tuple[str, ...] | list[str]) -> set[str]:
    letters: set[str] = set()
    for word in words:
        if word.startswith("--") and word[2:].split("=")[0] in _LONG_FLAGS:
            letters.add(_LONG_FLAGS[word[2:].split("=")[0]])
        elif word.startswith("-") and not word.startswith("--"):
            letters.update(word[1:].lower())
    return letters


def _flags_match(pattern: str, words: tuple[str, ...]) -> bool:
    """The pattern's program matches and every flag letter it names is set, however the flags are written."""
    parts = pattern.replace("*", " ").split()
    flags = [p for p in parts[1:] if p.startswith("-")]
    if not parts or not flags or not fnmatch.fnmatchcase(words[0], parts[0]):
        return False
    others = [p for p in parts[1:] if not p.startswith("-")]
    return _flag_letters(flags) <= _flag_letters(words[1:]) and all(o in words[1:] for o in others)


def read_only_command(shell: ParsedCommand) -> bool:
    """Whether a parsed command line only reads, and only the project: not opaque (no redirection to a file,
    no substitution, no option that runs a program or writes), every simple command a bare name from
    READ_ONLY_PROGRAMS (a path such as `./ls` is the project's own program) or `git` with a READ_ONLY_GIT
    subcommand, and no word a path outside the project (`/etc/hosts`, `~/x`, `../x`)."""
    if shell.opaque or not shell.commands:
        return False
    return all(_reads_only(words) for words in shell.commands)


_OUTSIDE_WORD = re.compile(r"(^|[=:,]|^-[A-Za-z]*)[/~]|(^|/)\.\.(/|$)")
"""A word that names a path outside the project: absolute, from the home folder or through `..`, also as an
option's value (`--file=/etc/x`, `-f/etc/x`)."""


def _reads_only(words: tuple[str, ...]) -> bool:
    if not words or "/" in words[0] or "\\" in words[0]:
        return False
    if any(_OUTSIDE_WORD.search(word) for word in words[1:]):  # outside reads ask, as read_file's do
        return False
    if words[0] == "git":
        return len(words) > 1 and words[1] in READ_ONLY_GIT
    return words[0] in READ_ONLY_PROGRAMS


def outside(keys: tuple[str, ...]) -> str:
    """The first key that lies outside the project ('' for none): relative_keys leaves those absolute."""
    return next((k for k in keys if k.startswith("/")), "")


def protected(path: str) -> bool:
    """Whether reading `path` (relative to the project) exposes secrets or rhapsody's own state."""
    parts = [p for p in path.replace("\\", "/").lower().split("/") if p not in ("", ".")]
    if parts[:1] == [".rhapsody"] or path.startswith("/") and ".rhapsody" in parts:  # another project's too
        return True
    return any(fnmatch.fnmatchcase(p, pat) for p in parts for pat in PROTECTED_READS)


@dataclass(frozen=True)
class Call:
    """What decide_call needs to know about one call."""

    tool: str
    argument: str
    writes: bool
    reads_files: bool
    keys: tuple[str, ...] = ()
    """For file tools: the resolved and normalised relative paths (see relative_keys); empty: the argument."""
    confinement: Confinement = ""
    """For bash: 'workspace-write'/'read-only' (sandboxed), 'off' (sandbox = "off"), 'unavailable'."""
    leave_sandbox: bool = False
    """The model asked to run outside the sandbox (with a justification)."""
    justification: str = ""
    """Why the model says the command must leave the sandbox (shown to the human)."""

    def __post_init__(self) -> None:
        if not self.keys:
            object.__setattr__(self, "keys", (self.argument,))


def decide_call(mode: Mode, rules: Rules, call: Call) -> Decision:
    """The decision for one described call."""
    if call.tool == "bash":
        return _decide_bash(mode, rules, call)
    if call.tool == "web_fetch":
        return _decide_fetch(mode, rules, call)
    for rule in rules.deny:
        if _matches(rule, call.tool, call.keys) or (call.reads_files and _matches(rule, "read_file", call.keys)):
            return Decision("deny", f"denied by rule {rule!r}", rule)
    allowed = _file_allowed([*rules.allow, *rules.session_allow], call.tool, call.keys)
    if call.reads_files and call.argument and any(protected(k) for k in call.keys) and not allowed:
        return Decision("deny", f"{call.argument} may hold secrets or rhapsody's own state; an allow rule "
                                f"'{call.tool}:{call.keys[0]}' would permit it")
    if call.reads_files and call.tool == "read_file" and outside(call.keys):
        return _decide_outside(mode, call, allowed)
    if not call.writes:
        return Decision("allow", "reads are allowed", allowed)
    if mode == "yolo":
        return Decision("allow", "yolo mode allows everything")
    if writes_nothing(mode):
        return Decision("deny", f"{mode} mode: no writes" + (PLAN_HINT if mode == "plan" else ""))
    if allowed:
        return Decision("allow", f"allowed by rule {allowed!r}", allowed)
    if mode == "auto-edit" and call.tool in FILE_WRITERS:
        return Decision("allow", "auto-edit mode allows file writes inside the project")
    return Decision("ask", f"{mode} mode asks before {_what(call.tool)}")


def _decide_outside(mode: Mode, call: Call, allowed: str) -> Decision:
    """A read outside the project: asked for unless a rule allows it; never in read-only."""
    where = outside(call.keys)
    if mode == "read-only":
        return Decision("deny", f"read-only mode reads only inside the project; {call.argument} is {where}")
    if allowed:
        return Decision("allow", f"allowed by rule {allowed!r} (outside the project)", allowed)
    shown = call.argument if call.argument == where else f"{call.argument}, which resolves to {where}"
    return Decision("ask", f"reading outside the project root asks first, in every mode: {shown}")


def fetch_host(url: str) -> str:
    """The host a web_fetch rule is matched on ('' when the URL has none)."""
    try:
        return (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""


def _decide_fetch(mode: Mode, rules: Rules, call: Call) -> Decision:
    refused = fetch_refusal(rules, call.argument)
    if refused:
        return refused
    host = fetch_host(call.argument)
    address = literal(host)
    keys = (host, str(address)) if address else (host,)
    allowed = next((r for r in [*rules.allow, *rules.session_allow] if _fetch_rule_covers(r, keys, address)), "")
    if allowed and host:
        return Decision("allow", f"allowed by rule {allowed!r}", allowed)
    if mode == "yolo":
        return Decision("allow", "yolo mode allows everything")
    shown = f" ({spoken(host, address)})" if address and host != str(address) else ""
    return Decision("ask", f"{mode} mode asks before fetching from {host or 'an address without a host'}{shown}")


def fetch_refusal(rules: Rules, url: str) -> Decision | None:
    """The refusal of a URL before any lookup, in every mode: a deny rule on its host, or the address its host
    spells refused (`decide_addresses`); None when nothing refuses it yet."""
    host = fetch_host(url)
    address = literal(host)
    refused = decide_addresses(rules, host, (address,) if address else ())
    if refused.verdict == "deny":
        return refused
    rule = next((r for r in rules.deny if _matches(r, "web_fetch", (host,))), "")
    return Decision("deny", f"denied by rule {rule!r}", rule) if rule else None


def _fetch_rule_covers(rule: str, keys: tuple[str, ...], address: IP | None) -> bool:
    """A web_fetch rule matches the host, the canonical address (as a glob), or names the address."""
    name, _, pattern = rule.partition(":")
    if name != "web_fetch":
        return False
    return _matches(rule, "web_fetch", keys) or (address is not None and bool(pattern) and names(pattern, address))


def decide_addresses(rules: Rules, host: str, addresses: tuple[IP, ...]) -> Decision:
    """The decision on the addresses a host is (its literal, or every address it resolved to): a deny rule
    matching one refuses; an address off the public internet is refused, in every mode, unless an allow
    rule names that address or its network (`web_fetch:127.0.0.1`, `web_fetch:10.0.0.0/8`)."""
    for address in addresses:
        for rule in rules.deny:
            if _fetch_rule_covers(rule, (str(address),), address):
                return Decision("deny", f"denied by rule {rule!r}: {spoken(host, address)}", rule)
    allow = [*rules.allow, *rules.session_allow]
    for address in addresses:
        if not kind(address):
            continue
        named = next((r for r in allow if r.startswith("web_fetch:") and names(r.partition(":")[2], address)), "")
        if not named:
            rule = f"web_fetch:[{address}]" if address.version == 6 else f"web_fetch:{address}"
            return Decision("deny", f"{spoken(host, address)}: web_fetch refuses addresses off the public "
                                    f"internet unless a rule names the address, such as allow = [\"{rule}\"]")
    return Decision("allow", "every address is allowed")


def _what(tool: str) -> str:
    if tool.startswith("mcp__"):
        return "calling MCP tools"
    return "writing files" if tool in FILE_WRITERS else "this call"


def _decide_bash(mode: Mode, rules: Rules, call: Call) -> Decision:
    shell = rules.parse(call.argument)
    denied = _shell_denied(rules.deny, call.argument, shell)
    if denied:
        return Decision("deny", f"denied by rule {denied!r}", denied)
    allow = [*rules.allow, *rules.session_allow]
    if call.leave_sandbox:
        return _outside(mode, allow, shell)
    ruled = _shell_allowed(allow, "bash", shell)
    if shell.opaque and any(r.partition(":")[0] == "bash" for r in rules.deny):
        return Decision("ask", f"deny rules cannot judge this command ({shell.opaque})")
    if call.confinement in SANDBOXED:
        if mode in (*READ_ONLY_MODES, "auto-edit", "yolo"):
            return Decision("allow", f"runs in the {call.confinement} sandbox", ruled)
        if ruled:
            return Decision("allow", f"allowed by rule {ruled!r} (in the sandbox)", ruled)
        if call.confinement == "read-only" and read_only_command(shell):
            return Decision("allow", "a read-only command (every program only reads) runs unasked, in the read-only "
                                     "sandbox")
        return Decision("ask", _ask_reason(mode, shell))
    if writes_nothing(mode):
        return Decision("deny", f"{mode} mode runs commands only in the sandbox, and none is available")
    if mode == "yolo" and call.confinement == "off":
        return Decision("allow", "yolo mode with sandbox = \"off\" allows everything")
    if ruled:
        return Decision("allow", f"allowed by rule {ruled!r} (no sandbox)", ruled)
    why = "no sandbox is available (install bubblewrap)" if call.confinement == "unavailable" else "the sandbox is off"
    return Decision("ask", f"{why}; {_ask_reason(mode, shell)}")


def _outside(mode: Mode, allow: list[str], shell: ParsedCommand) -> Decision:
    if writes_nothing(mode):
        return Decision("deny", f"{mode} mode never runs commands outside the sandbox")
    ruled = _shell_allowed(allow, "unsandboxed", shell)
    if ruled:
        return Decision("allow", f"allowed outside the sandbox by rule {ruled!r}", ruled)
    return Decision("ask", "the command asks to run outside the sandbox; only a human (or an "
                           "'unsandboxed:' rule in the user's own config) can allow that")


def _ask_reason(mode: Mode, shell: ParsedCommand) -> str:
    if shell.opaque:
        return f"{mode} mode asks: no rule can allow this command because {shell.opaque}"
    return f"{mode} mode asks before running commands"

