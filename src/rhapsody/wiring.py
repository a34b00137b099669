"""Builds a ready agent from settings: system prompt, tools, session, model, policy.

The CLI's assembly (and the tests'): it builds the agent and hands it, with the settings,
to a front end. Front ends never import this module; they get what they need passed in.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rhapsody.config.settings import McpServer, Settings, permission_mode
from rhapsody.core.session.context import RequestSpec
from rhapsody.core.access.credentials import absolute
from rhapsody.core.errors import RhapsodyError
from rhapsody.core.session.history import find_session
from rhapsody.core.agent.loop import Agent
from rhapsody.core.agent.policy import Policy
from rhapsody.core.model import Model
from rhapsody.core.access.permissions import Mode, writes_nothing
from rhapsody.core.session.rolling import RollingPolicy
from rhapsody.core.session.session import Session
from rhapsody.core.agent.delegation import Budget, Delegation
from rhapsody.core.toolbox.approval import Approver
from rhapsody.core.toolbox.orchestrator import Toolbox
from rhapsody.core.toolbox.plan_review import HumanReviewer
from rhapsody.prompts import load, render
from rhapsody.tools import default_toolbox
from rhapsody.core.session import records as rec

if TYPE_CHECKING:
    from rhapsody.rewind.shadow import Shadow

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")


def project_instructions(root: Path, cap: int) -> str:
    """AGENTS.md (or CLAUDE.md) for the system prompt, cut at `cap` characters and saying so."""
    from rhapsody.core.own_files import read_own
    from rhapsody.sandbox.bwrap import secret_values

    for name in INSTRUCTION_FILES:
        text = read_own(root, root / name, known=secret_values())
        if text is not None:
            if len(text) > cap:
                text = text[:cap] + f"\n[{name} cut at {cap} of {len(text)} characters]"
            return f"\n## Project instructions ({name})\n{text}"
    return ""


def system_prompt(root: Path, settings: Settings) -> str:
    """The rendered system prompt for a new session (the memory map included when set up)."""
    from rhapsody.memory import memory_map

    path = settings.memory.path
    map_text = memory_map(root, path, settings.memory.map_cap)
    return render(
        "system",
        root=str(root),
        date=time.strftime("%Y-%m-%d"),
        instructions=project_instructions(root, settings.instructions_cap),
        memory=(render("memory", path=path, map=map_text) if (root / path).is_dir() else "")
        + (rolling_prompt(root) if settings.context == "rolling" else "")
        + (f"\n{load('plan_mode')}" if settings.permission_mode == "plan" else ""),
    )


def recipe_home(root: Path | None, settings: Settings) -> str:
    """Where the handoff prompt tells the agent to save a reusable recipe (the memory when it is on)."""
    path = settings.memory.path
    if root is not None and (root / path).is_dir():
        return (f"A recipe you will want again (a long one-liner, a reproduction, a build incantation) goes into "
                f"a file of the project memory now (`{path}/`, e.g. a section of `{path}/PROJECT_STATUS.md` or its own "
                "file linked from there): lines in a note scroll away, a file stays.")
    return ("A recipe you will want again (a long one-liner, a reproduction, a build incantation) goes into a "
            "file in the project now (a script or a doc): lines in a note scroll away, a file stays.")


def rolling_prompt(root: Path) -> str:
    """The rolling-context section: rhapsody's mechanics, the project's scoring criteria when it has its own."""
    from rhapsody.prompts import project_override

    criteria = project_override(root, "rolling") or load("rolling_criteria").strip()
    return render("rolling", criteria=criteria)


def policy(settings: Settings, root: Path | None = None) -> Policy:
    """Loop policy from settings and the prompt files."""
    return Policy(
        narration_rule=load("narration_rule").strip(),
        handoff_request=render("handoff", recipes=recipe_home(root, settings)).strip(),
        handoff_reminder=load("handoff_reminder").strip(),
        continue_after_handoff=load("continue").strip(),
        window_request=load("window").strip(),
        window_note=load("window_note").strip(),
        narration_min_words=settings.narration_min_words,
        parallel_tools=settings.parallel_tools,
        handoff_at_tokens=settings.handoff_at_tokens,
        handoff_at_share=None if settings.handoff_at_share == "off" else settings.handoff_at_share,
        context_window=settings.context_window,
        checkpoint_seams=settings.seam_policy == "checkpoint",
        cache_ttl=settings.cache_ttl,
        bash_timeout=settings.bash_timeout,
        output_cap=settings.output_cap,
        exact_tokens=settings.exact_tokens,
        rolling=RollingPolicy(settings.rolling_short, settings.rolling_working, settings.rolling_batch)
        if settings.context == "rolling" else None,
        max_steps_per_turn=settings.max_steps_per_turn,
        max_cost_usd=settings.max_cost_usd,
        memory_reminder=render("memory_reminder", path=settings.memory.path).strip()
        if root is not None and (root / settings.memory.path).is_dir() else None,
        memory_path=settings.memory.path,
        plan_note=load("plan_mode"),
    )


def thinking_config(settings: Settings) -> dict[str, Any] | None:
    """The request's thinking parameter, when thinking is on."""
    return {"type": "adaptive", "display": "summarized"} if settings.thinking else None


@dataclass
class Wiring:
    """Everything a front end needs."""

    agent: Agent
    settings: Settings

    @property
    def session(self) -> Session:
        """The agent's session."""
        return self.agent.session

    async def close(self) -> None:
        """Stop what the tool sources started (every MCP server process)."""
        await self.agent.toolbox.close_sources()


def add_mcp(toolbox: Toolbox, root: Path, client: dict[str, McpServer] | None = None) -> None:
    """Give the toolbox the MCP servers this project may start (none configured: nothing is imported); `client`:
    the servers an editor passed for this session (frontends/acp/servers.py), started as the user's own are."""
    from rhapsody.mcp.config import plan, with_servers

    servers = with_servers(plan(root), client or {})
    if servers.empty:
        return
    from rhapsody.mcp.tools import McpTools

    toolbox.sources.append(McpTools(servers, root))
    values = [v for s in servers.servers.values() for v in (*s.env.values(), *s.headers.values())]
    toolbox.add_secrets(values + [v.split()[-1] for v in values if " " in v.strip()])  # "Bearer TOKEN": the token too


def add_hooks(toolbox: Toolbox, root: Path, settings: Settings) -> None:
    """Give the toolbox the hooks of the settings (none: the core's NoHooks stays)."""
    if not any(settings.hooks.values()):
        return
    from rhapsody.hook_runner import HookRunner

    toolbox.hooks = HookRunner(settings.hooks, root, toolbox.secrets)


def open_session(root: Path, settings: Settings, model_id: str | None, toolbox: Toolbox,
                 resume: str | None = None, continue_last: bool = False) -> Session:
    """A new session, or the one to resume."""
    if resume or continue_last:
        path = find_session(root, resume)
        return Session.resume(root, path, model=model_id)
    if model_id is None:
        raise ValueError("a new session needs a model id")
    from rhapsody.tools.git import head_branch

    return Session.start(root, new_spec(root, settings, model_id, toolbox), branch=head_branch(root))


def new_spec(root: Path, settings: Settings, model_id: str, toolbox: Toolbox) -> RequestSpec:
    """What every request of a new session is built from (a started or an imported one)."""
    return RequestSpec(
        model=model_id,
        system=system_prompt(root, settings),
        tools=toolbox.specs(),
        max_tokens=settings.max_tokens,
        parallel_tools=settings.parallel_tools,
        thinking=thinking_config(settings),
    )


def shadow(root: Path, settings: Settings) -> Shadow:
    """The project's checkpoint repository, with the settings' file size limit."""
    from rhapsody.rewind.shadow import Shadow

    return Shadow(root, int(settings.checkpoint_max_file_mb * 1024 * 1024))


def start_checkpoints(session: Session, settings: Settings) -> Shadow:
    """The checkpointer for a session: a restore a kill cut short is finished (said in a notice), old
    checkpoints are cleaned (at most daily)."""
    from rhapsody.rewind.rewind import clean, finish_interrupted

    found = shadow(session.root, settings)
    try:
        finished = finish_interrupted(session, found)
        clean(found, settings.checkpoints_keep_days, settings.checkpoints_max_mb * 1024 * 1024, time.time())
    except (RhapsodyError, OSError) as exc:
        finished = f"checkpoints: {exc}"
    if finished:
        session.append(rec.NoticeShown(text=finished, shown="as is"))
    if not found.index.exists():  # the first checkpoint hashes every file: begin while the person types
        threading.Thread(target=_warm_up, args=(found,), daemon=True).start()
    return found


def _warm_up(found: Shadow) -> None:
    with contextlib.suppress(RhapsodyError, OSError):
        found.snapshot("rhapsody warm-up")


def build(root: Path, settings: Settings, model: Model, model_id: str | None,
          resume: str | None = None, continue_last: bool = False, approver: Approver | None = None,
          client_mcp: dict[str, McpServer] | None = None, reviews_plans: bool | None = None) -> Wiring:
    """Wire an agent for `root`; with an approver (a human can answer) an unset permission mode is `ask`.
    `exit_plan`'s plan goes out as a `PlanReviewAsked` event where `reviews_plans` (by default: where there is an
    approver); elsewhere exit_plan says no human can approve, as headless. `client_mcp`: MCP servers an editor
    passed for the session."""
    from rhapsody.memory import DialogRecorder

    mode = permission_mode(settings, approver is not None)
    toolbox = default_toolbox(mode, settings.allow, settings.deny, approver, settings.sandbox, settings.sandbox_network)
    toolbox.protected = absolute(root, settings.protected_paths)
    reviews = approver is not None if reviews_plans is None else reviews_plans
    if reviews:
        toolbox.reviewer = HumanReviewer()
    add_mcp(toolbox, root, client_mcp)
    add_hooks(toolbox, root, settings)
    session = open_session(root, settings, model_id, toolbox, resume, continue_last)
    rewinder = None
    if settings.checkpoints:
        toolbox.checkpointer = start_checkpoints(session, settings)
        from rhapsody.rewind.rewinder import CheckpointRewinder

        rewinder = CheckpointRewinder(toolbox.checkpointer)
    # read-only writes nothing into the project: no dialog log (rhapsody's own .rhapsody/ state aside).
    observers = [] if writes_nothing(mode) else [DialogRecorder(settings.memory.path, settings.memory.commit)]
    loop_policy = policy(settings, root)
    return Wiring(Agent(session, model, toolbox, loop_policy, observers=observers, rewinder=rewinder,
                        delegation=delegation(model, loop_policy, toolbox, settings)), settings)


def delegation(model: Model, loop_policy: Policy, toolbox: Toolbox, settings: Settings) -> Delegation:
    """What the agent lends its sub-agents: its model adapter, policy and toolbox, the settings' model and budget."""
    budget = Budget(settings.subagent_max_tool_calls, settings.subagent_max_tokens, settings.subagent_max_cost_usd)
    return Delegation(model, loop_policy, toolbox, load("subagent").strip(), settings.subagent_model, budget)
