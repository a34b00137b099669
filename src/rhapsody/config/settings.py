"""Settings: defaults < user config < project config < RHAPSODY_* environment < flags.

Files are TOML: `~/.config/rhapsody/config.toml` (or `$XDG_CONFIG_HOME/rhapsody/`) and
`.rhapsody/config.toml` in the project. Unknown keys and bad values are errors that name
the key, except in the project's file, which fails closed: there each key is validated on its
own and a bad one is dropped with a notice (`project_problems`), never handed on for a later
layer to repair. The resulting `Settings` is passed down explicitly.

A project's config comes with the project, so until the user trusts the project
(`rhapsody trust`, which lists it in `trusted_projects` of the user config) it may only
lower permissions: a lower permission mode, a stricter sandbox, no network, more deny
rules; its allow rules, MCP servers and anything else that raises are ignored
(`project_layer` says which). `unsandboxed:` rules and `trusted_projects` count only from
the user config. The environment and flags are the user's and beat both files. Once merged,
an untrusted project's settings are compared with those computed without its file, and any
value wider than there is put back (`_no_wider`): a project never widens what the user has.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rhapsody.config import claude
from rhapsody.config.files import project_config_path, read_config, user_config_path
from rhapsody.config.hooks import HookSettings
from rhapsody.core.errors import ConfigError
from rhapsody.core.access.permissions import MODES, Mode, SandboxSetting
from rhapsody.core.json_types import JsonObject


class MemorySettings(BaseModel):
    """Project memory (`[memory]` in the config)."""

    model_config = ConfigDict(extra="forbid")

    path: str = "docs/memory"
    """Folder of the memory files, relative to the project root."""

    @field_validator("path")
    @classmethod
    def _inside_the_project(cls, value: str) -> str:
        parts = PurePosixPath(value.replace("\\", "/")).parts
        if not parts or value.startswith(("/", "~")) or ".." in parts or ":" in value:
            raise ValueError("must be a folder inside the project, relative to its root, without '..'")
        return value
    commit: bool = False
    """Commit memory changes by themselves after each task and seam."""
    map_cap: int = Field(default=12000, ge=0)
    """Characters of the memory map put in the system prompt."""
    stale_days: int = Field(default=30, ge=0)
    """Age after which `memory audit` checks a status entry against later commits."""


class McpServer(BaseModel):
    """One MCP server (`[mcp_servers.NAME]`): a command over stdio, or a streamable-HTTP url."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    """Program to start (stdio transport)."""
    args: list[str] = Field(default_factory=list)
    """Its arguments."""
    env: dict[str, str] = Field(default_factory=dict)
    """Variables added to the small default environment the server gets (PATH, HOME, USER...)."""
    cwd: str | None = None
    """Working directory of the server (default: the project root)."""
    url: str | None = None
    """Endpoint of a streamable-HTTP server, e.g. http://127.0.0.1:8000/mcp."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers sent with every request (e.g. Authorization)."""
    enabled: bool = True
    """False keeps the entry without starting it."""
    enabled_tools: list[str] | None = None
    """Only these tools are offered to the model (default: all)."""
    disabled_tools: list[str] = Field(default_factory=list)
    """These tools are never offered."""
    startup_timeout_sec: float = Field(10.0, gt=0)
    """Seconds the server has to start and list its tools before it is marked failed."""
    tool_timeout_sec: float = Field(60.0, gt=0)
    """Seconds one tool call may take before it is answered as an error."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (stdio) or url (streamable HTTP)")
        return self


Provider = Literal["anthropic", "bedrock", "vertex", "openai"]


class Settings(BaseModel):
    """Everything a user can set."""

    model_config = ConfigDict(extra="forbid")

    provider: Provider = "anthropic"
    """Where the model runs: anthropic, bedrock, vertex or openai (any OpenAI-compatible endpoint)."""
    model: str | None = None
    """Model id in the provider's form; None means the newest Sonnet the installed SDK lists."""
    max_tokens: int = Field(16000, ge=1)
    """max_tokens of each request."""
    narration_min_words: int = Field(8, ge=0)
    """Words of visible text required before each tool call (0 turns the check off)."""
    parallel_tools: bool = False
    """Allow several tool calls per message, one narration covering the batch."""
    thinking: bool = False
    """Ask for adaptive thinking with summarised display."""
    permission_mode: Mode | None = None
    """What tools may do without asking; unset means `ask` in the app and plain mode, `auto-edit` headless."""
    allow: list[str] = Field(default_factory=list)
    """Rules that allow calls without asking, e.g. "bash:pytest*", "read_file:.env.example"."""
    deny: list[str] = Field(default_factory=list)
    """Rules that always refuse, e.g. "bash:rm -rf*", "bash:curl*"."""
    handoff_at_tokens: int | None = Field(None, ge=1000)
    """Trigger a micro-handoff when the active context passes this many estimated tokens."""
    handoff_at_share: Annotated[float, Field(gt=0, lt=1)] | Literal["off"] = 0.4
    """Trigger a micro-handoff when the context reaches this share of the model's window ("off": never);
    `handoff_at_tokens` replaces it when set. A request that does not fit is stripped first either way."""
    seam_policy: Literal["checkpoint", "threshold"] = "checkpoint"
    """Where the automatic seam goes: `checkpoint`, at the first natural pause (a turn's end, the human's
    message, a commit, tests passing after failures) once it pays by the cache's arithmetic; `threshold`, only at
    `handoff_at_share` / `handoff_at_tokens`, which stay the hard net either way."""
    cache_ttl: Literal["auto", "5m", "1h"] = "auto"
    """The prompt cache's lifetime: `auto` uses the 1-hour cache once, priced over this session's requests so
    far, it would have billed less than the 5-minute one (pauses between turns past five minutes); `5m`, `1h`."""
    context_window: int | None = Field(None, ge=1000)
    """The model's context window in tokens; unset: rhapsody's table (200K or 1M for Claude, 128K otherwise)."""
    bash_timeout: float = Field(120.0, gt=0)
    """Seconds before a bash command's process group is killed."""
    output_cap: int = Field(30000, ge=1000)
    """Characters of tool output kept (head and tail) before it is cut."""
    retries: int = Field(4, ge=0)
    """Retries of a failed request (429, 5xx, overloaded, cut stream)."""
    retry_base_delay: float = Field(0.5, ge=0)
    """First retry delay in seconds; doubles each time, at most 8 s, or the server's retry-after."""
    request_timeout: float = Field(600.0, gt=0)
    """Seconds before a request with no answer is abandoned (and retried)."""
    instructions_cap: int = Field(16000, ge=0)
    """Characters of AGENTS.md / CLAUDE.md put in the system prompt."""
    exact_tokens: bool = False
    """Ask the count_tokens endpoint for exact figures at each seam (needs a key)."""
    context: Literal["manual", "rolling"] = "manual"
    """`rolling`: old tool traffic leaves in batches by inline score (seed 003); `manual`: only seams."""
    rolling_short: int = Field(3, ge=0)
    """Rounds whose tool traffic always stays (short-term memory)."""
    rolling_working: int = Field(6, ge=0)
    """Rounds of working memory kept after a cut, best-scored first."""
    rolling_batch: int = Field(6, ge=1)
    """How far working memory may overfill before one cut (hysteresis for the prompt cache)."""
    max_steps_per_turn: int | None = Field(None, ge=1)
    """Requests one turn may send; the turn then ends with a "limit reached" notice."""
    max_cost_usd: float | None = Field(None, gt=0)
    """The session's estimated cost (USD) at which turns end before the next request."""
    subagent_model: str = ""
    """The model `delegate` runs sub-agents on when the call names none ('' for the session's own)."""
    subagent_max_tool_calls: int = Field(40, ge=1)
    """Tool calls one sub-agent may make; a call may ask for fewer."""
    subagent_max_tokens: int = Field(2_000_000, ge=1)
    """Tokens (input, cache and output) one sub-agent may use; a call may ask for fewer."""
    subagent_max_cost_usd: float = Field(2.0, gt=0)
    """Dollars one sub-agent may spend, at its own model's prices; a call may ask for less."""
    memory: MemorySettings = Field(default_factory=MemorySettings)
    """Project memory."""
    keymap: dict[str, str] = Field(default_factory=dict)
    """The app's key bindings by binding id, e.g. {"handoff": "f6"}."""
    result_lines: int = Field(4, ge=0)
    """Lines of each tool result the app shows under its line, unfolded (0: the line alone)."""
    diff_lines: int = Field(12, ge=0)
    """Lines of an applied edit's diff the app shows under its line, then `… N more lines`."""
    notify: Literal["off", "approvals", "waiting"] = "approvals"
    """When the app signals the terminal that it waits for you: on a question, or also when a turn of more
    than `notify_after` seconds ends."""
    notify_with: Literal["bell", "osc9", "osc777"] = "bell"
    """How: the terminal bell, or a desktop notification by OSC 9 (iTerm2, WezTerm, kitty) or OSC 777 (VTE)."""
    notify_after: float = Field(10.0, ge=0)
    """Seconds a turn must have run for its end to notify (with notify = "waiting")."""
    mcp_servers: dict[str, McpServer] = Field(default_factory=dict)
    """MCP servers whose tools the model gets as mcp__NAME__TOOL; a project's start only once it is trusted."""
    sandbox: SandboxSetting = "workspace-write"
    """Where bash and git run: bubblewrap with the project writable, read-only, or no sandbox (docs/security.md)."""
    sandbox_network: bool = False
    """Let sandboxed commands reach the network."""
    protected_paths: list[str] = Field(default_factory=list)
    """Files and folders no tool reads or writes and the sandbox mounts empty, besides the built-in credential
    locations (`~/.aws`, `~/.ssh`, ...); `~` expands, relative paths are under the project root. A project's
    config only adds to the list."""
    checkpoints: bool = True
    """Record the working tree before each turn and each call that may write (`/rewind` restores them)."""
    checkpoint_max_file_mb: float = Field(5.0, gt=0)
    """Files larger than this (MB) are left out of checkpoints, and named in each checkpoint record."""
    checkpoints_keep_days: float = Field(30.0, gt=0)
    """Checkpoints older than this many days are removed when a session starts."""
    checkpoints_max_mb: float = Field(1000.0, gt=0)
    """The shadow repository's size cap (MB): past it, the oldest checkpoints are removed first."""
    hooks: HookSettings = Field(default_factory=dict)
    """Programs run at points of a turn, by event (`[[hooks.PreToolUse]]` with matcher and hooks); a project's
    run only once it is trusted, after the user's (docs/user-guide.md, Hooks)."""
    trusted_projects: list[str] = Field(default_factory=list)
    """Project roots (and folders above them) whose own config and .mcp.json may raise permissions and start
    programs; read from the user config only."""


MODE_RANK: dict[str, int] = {mode: rank for rank, mode in enumerate(MODES)}
SANDBOX_STRICTNESS = {"off": 0, "workspace-write": 1, "read-only": 2}
RAISING = ("mcp_servers", "mcp", "hooks")
"""Keys an untrusted project may never set (they start programs); ignored, named in the notice."""
USER_ONLY = ("trusted_projects",)


def load_settings(root: Path, flags: JsonObject | None = None) -> Settings:
    """Merge every layer and validate; raises ConfigError with a one-line reason.

    The project layer fails closed: each of its keys is validated on its own and a bad one is
    dropped (`project_problems` names it), and an untrusted project's result is checked once more
    against the settings without it: whatever came out wider is put back to the user's own value.
    """
    user = user_layer()
    env = _from_env()
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    without = _merged(root, user, {}, env, given)
    project, _ = project_layer(root, user)
    if not project:
        return without
    settings = _merged(root, user, project, env, given)
    return settings if is_trusted(root, user) else _no_wider(settings, without)


def user_layer() -> dict[str, Any]:
    """The user's config with the rules and hooks of `~/.claude/settings.json` added (config/claude.py)."""
    return with_claude(read_config(user_config_path()), claude.read_user().layer)


def with_claude(layer: dict[str, Any], imported: dict[str, Any]) -> dict[str, Any]:
    """`layer` with a Claude Code layer's allow and deny rules and hooks added after its own."""
    out = dict(layer)
    for key in ("allow", "deny"):
        if key in imported:
            own = out.get(key, [])
            out[key] = [*own, *imported[key]] if isinstance(own, list) else own
    if "hooks" in imported:
        own = out.get("hooks", {})
        if isinstance(own, dict):
            out["hooks"] = {e: [*own.get(e, []), *imported["hooks"].get(e, [])] for e in {**own, **imported["hooks"]}}
    return out


def _merged(root: Path, user: dict[str, Any], project: dict[str, Any], env: dict[str, Any],
            given: dict[str, Any]) -> Settings:
    """defaults < user < project < environment < flags, validated; rule lists and servers add up."""
    merged: JsonObject = dict(user)
    origin = dict.fromkeys(merged, str(user_config_path()))
    project = dict(project)
    origin.update(dict.fromkeys(project, str(project_config_path(root))))
    origin.update({k: f"RHAPSODY_{k.upper()}" for k in env})
    origin.update({k: f"--{k.replace('_', '-')}" for k in given})
    for key in ("allow", "deny", "protected_paths"):  # these lists add up across files; deny always beats allow
        if isinstance(project.get(key), list) and isinstance(merged.get(key), list):
            project[key] = [*merged[key], *project[key]]
    for key in ("mcp_servers", "memory"):
        if isinstance(project.get(key), dict) and isinstance(merged.get(key), dict):
            project[key] = {**merged[key], **project[key]}
    if isinstance(project.get("hooks"), dict) and isinstance(merged.get("hooks"), dict):  # the user's run first
        project["hooks"] = {e: [*merged["hooks"].get(e, []), *project["hooks"].get(e, [])]
                            for e in {**merged["hooks"], **project["hooks"]}}
    merged.update(project)
    merged.update(env)
    merged.update(given)
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, origin)) from None


def _explain(exc: ValidationError, origin: dict[str, str]) -> str:
    """Every bad setting in one line, each with where it was set and, for a misspelt key, the
    closest real one: `bad settings 'narration_min_wrds' (from ~/.config/rhapsody/config.toml)
    is not a setting, did you mean 'narration_min_words'?; ...`."""
    import difflib

    problems: list[str] = []
    unions: dict[str, list[str]] = {}  # one line per setting that may take several forms (a number or 'off')
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ())]
        # pydantic names each form of a union in the location ('constrained-float', "literal['off']"): not keys
        key = ".".join(p for p in loc if not any(c in p for c in "[-")) or "settings"
        where = f" (from {origin[loc[0]]})" if loc and loc[0] in origin else ""
        if err.get("type") == "extra_forbidden":
            fields = Settings.model_fields if len(loc) == 1 else MemorySettings.model_fields if loc[:1] == ["memory"] else {}
            close = difflib.get_close_matches(loc[-1], list(fields), n=1)
            hint = f", did you mean {close[0]!r}?" if close else ""
            problems.append(f"{key!r}{where} is not a setting{hint}")
        elif f"{key!r}{where}" in unions:
            unions[f"{key!r}{where}"].append(err["msg"])
        else:
            unions[f"{key!r}{where}"] = [err["msg"]]
            problems.append(f"{key!r}{where}")
    problems = [f"{p}: {', or '.join(unions[p])}" if p in unions else p for p in problems]
    head = "bad setting" if len(problems) == 1 else "bad settings"
    return f"{head} {'; '.join(problems)}".replace(str(Path.home()), "~", -1)


def is_trusted(root: Path, user: JsonObject | None = None) -> bool:
    """Whether the user config lists `root` (resolved) itself in trusted_projects.

    Not a folder above it: a command in a trusted project can write `sub/.rhapsody/config.toml` or
    `sub/.mcp.json` (only the root's own `.rhapsody/` is read-only in the sandbox), and opening
    `sub` later must not apply them as trusted.
    """
    user = read_config(user_config_path()) if user is None else user
    listed = user.get("trusted_projects", [])
    if not isinstance(listed, list):
        raise ConfigError(f"{user_config_path()}: trusted_projects must be a list of paths")
    here = root.resolve()
    for entry in listed:
        path = Path(os.path.expanduser(str(entry))).resolve()
        if path == here:
            return True
    return False


def project_layer(root: Path, user: JsonObject) -> tuple[JsonObject, list[str]]:
    """The project config as it applies (its valid keys; when untrusted only those that lower) and what was ignored."""
    layer = with_claude(read_config(project_config_path(root)), claude.read_project(root).layer)
    ignored = [f"{k} (user config only)" for k in USER_ONLY if layer.pop(k, None) is not None]
    if isinstance(layer.get("allow"), list):
        kept = [r for r in layer["allow"] if not (isinstance(r, str) and r.startswith("unsandboxed"))]
        if len(kept) < len(layer["allow"]):
            ignored.append("unsandboxed: rules (user config only)")
        layer["allow"] = kept
    layer = _valid_keys(layer)[0]
    if is_trusted(root, user):
        return layer, ignored
    return _lowering_only(layer, user, ignored)


def project_problems(root: Path) -> list[str]:
    """One line per key of the project config that is not a valid setting on its own (it is dropped)."""
    path = project_config_path(root)
    problems = _valid_keys(read_config(path))[1]
    return [f"ignored in {path}: {problem}".replace(str(Path.home()), "~", 1) for problem in problems]


def _valid_keys(layer: JsonObject) -> tuple[JsonObject, list[str]]:
    """The keys (memory's one by one) that validate on their own, and a reason for each that does not."""
    kept: JsonObject = {}
    problems: list[str] = []
    for key, value in _flat(layer).items():
        alone: JsonObject = {}
        _put(alone, key, value)
        try:
            Settings.model_validate(alone)
        except ValidationError as exc:
            problems.append(_explain(exc, {}))
        else:
            _put(kept, key, value)
    return kept, problems


def _no_wider(settings: Settings, without: Settings) -> Settings:
    """`settings` with every value wider than in `without` (the settings without the project's file) put back."""
    ours, theirs = _flat(settings.model_dump()), _flat(without.model_dump())
    wider = [key for key in theirs if _wider(key, ours[key], theirs[key])]
    if not wider:
        return settings
    data: JsonObject = {}
    for key, value in ours.items():
        _put(data, key, theirs[key] if key in wider else value)
    return Settings.model_validate(data)


def _wider(key: str, ours: Any, theirs: Any) -> bool:
    """Whether `ours` lets rhapsody do more than `theirs`: an allow rule or a deny rule, or `_widens`."""
    if key == "allow":
        return not set(ours) <= set(theirs)
    if key == "deny":
        return not set(theirs) <= set(ours)
    return _widens(key, ours, theirs)


ORDER: dict[str, str] = {
    "permission_mode": "rank", "sandbox": "rank", "deny": "free", "narration_min_words": "lower",
    "max_tokens": "higher", "bash_timeout": "higher", "output_cap": "higher", "retries": "higher",
    "request_timeout": "higher", "instructions_cap": "higher", "max_steps_per_turn": "higher",
    "max_cost_usd": "higher", "handoff_at_tokens": "higher", "rolling_short": "higher", "rolling_working": "higher",
    "rolling_batch": "higher", "memory.map_cap": "higher", "retry_base_delay": "free", "parallel_tools": "on",
    "thinking": "on", "exact_tokens": "on", "sandbox_network": "on", "memory.commit": "on", "context": "free",
    "memory.stale_days": "free", "protected_paths": "free", "subagent_max_tool_calls": "higher",
    "subagent_max_tokens": "higher", "subagent_max_cost_usd": "higher",
}
"""How each setting an untrusted project may change compares: `higher` (a bigger number widens; a number
where the user has no limit lowers), `lower` (a smaller number widens), `on` (true widens), `rank` (a looser mode or
sandbox widens), `free` (no direction: deny rules only add). A setting not listed here (the
provider, the model, memory.path, allow rules, MCP servers, key bindings, anything added later) is ignored unless it
equals what the user has: a new setting cannot widen anything until someone decides how it compares."""


def _lowering_only(layer: JsonObject, user: JsonObject, ignored: list[str]) -> tuple[JsonObject, list[str]]:
    for key in RAISING:
        if key in layer:
            layer.pop(key)
            ignored.append(f"{key} (starts programs)")
    mine = Settings.model_validate(layer)  # each key is valid on its own, and no setting depends on another
    base = _base_settings(user)
    kept: JsonObject = {}
    for key, value in _flat(layer).items():
        ours, theirs = _value(mine, key), _value(base, key)
        if _widens(key, ours, theirs):
            ignored.append(f"{key} = {_show(value)} (yours: {_show(theirs)})")
        else:
            _put(kept, key, value)
    return kept, ignored


def _base_settings(user: JsonObject) -> Settings:
    """The user's own settings (defaults where the user file is unusable: load_settings reports that)."""
    base = {k: v for k, v in user.items() if k in Settings.model_fields}
    base.setdefault("permission_mode", "ask")
    try:
        return Settings.model_validate(base)
    except ValidationError:
        return Settings.model_validate({"permission_mode": "ask"})


def _widens(key: str, ours: Any, theirs: Any) -> bool:
    """Whether the project's value `ours` lets rhapsody do more than the user's `theirs` (see ORDER)."""
    kind = ORDER.get(key, "fixed")
    if kind == "free" or ours == theirs:
        return False
    if kind == "higher":
        return ours is None or (theirs is not None and ours > theirs)  # None: no limit
    if kind == "lower":
        return bool(ours < theirs)
    if kind == "on":
        return bool(ours)
    if kind == "rank" and key == "permission_mode":
        return MODE_RANK.get(str(ours), 99) > MODE_RANK.get(str(theirs), 1)
    if kind == "rank":
        return SANDBOX_STRICTNESS.get(str(ours), -1) < SANDBOX_STRICTNESS.get(str(theirs), 1)
    return True


def _flat(layer: JsonObject) -> JsonObject:
    out: JsonObject = {}
    for key, value in layer.items():
        if key == "memory" and isinstance(value, dict):
            out.update({f"memory.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def _value(settings: Settings, key: str) -> Any:
    head, _, rest = key.partition(".")
    value = getattr(settings, head)
    return getattr(value, rest) if rest else value


def _put(out: JsonObject, key: str, value: Any) -> None:
    head, _, rest = key.partition(".")
    if rest:
        out.setdefault(head, {})[rest] = value
    else:
        out[head] = value


def _show(value: Any) -> str:
    return "none" if value is None else repr(value) if not isinstance(value, list) else f"{len(value)} rules"


def _from_env() -> JsonObject:
    out: JsonObject = {}
    for name in Settings.model_fields:
        value = os.environ.get(f"RHAPSODY_{name.upper()}")
        if value is not None and name not in ("keymap", "allow", "deny", "memory", "mcp_servers", "trusted_projects",
                                                 "protected_paths", "hooks"):
            out[name] = value
    return out


def permission_mode(settings: Settings, interactive: bool) -> Mode:
    """The mode tools run under: the setting, else `ask` where a human can answer and `auto-edit` headless."""
    return settings.permission_mode or ("ask" if interactive else "auto-edit")
