"""The built-in tools, and the toolbox every front end uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the command line imports a module of this package before its first frame: no pydantic here
    from rhapsody.core.access.permissions import Mode, SandboxSetting
    from rhapsody.core.toolbox.approval import Approver
    from rhapsody.core.toolbox.orchestrator import Toolbox
    from rhapsody.core.toolbox.protocol import Tool


def default_tools(sandbox: SandboxSetting = "workspace-write", network: bool = False) -> list[Tool]:
    """Every built-in tool, in the order the model sees them; bash and git run in the given sandbox."""
    from rhapsody.tools.bash import Bash
    from rhapsody.tools.delegate import Delegate
    from rhapsody.tools.files import EditFile, FindFiles, ReadFile, SearchText, WriteFile
    from rhapsody.tools.git import Git
    from rhapsody.tools.handoff import MicroHandoff, Recall
    from rhapsody.tools.plan import ExitPlan, TodoWrite
    from rhapsody.tools.web import WebFetch

    return [ReadFile(), WriteFile(), EditFile(), Bash(sandbox, network), FindFiles(), SearchText(), Git(sandbox),
            Recall(), MicroHandoff(), WebFetch(), TodoWrite(), ExitPlan(), Delegate()]


def default_toolbox(permission_mode: Mode = "yolo", allow: list[str] | None = None,
                    deny: list[str] | None = None, approver: Approver | None = None,
                    sandbox: SandboxSetting = "workspace-write", network: bool = False) -> Toolbox:
    """The toolbox with every built-in tool; credentials in the environment are masked in output."""
    from rhapsody.core.access.permissions import Rules
    from rhapsody.core.toolbox.orchestrator import Toolbox
    from rhapsody.sandbox.bwrap import secret_values
    from rhapsody.tools.shell import parse

    rules = Rules(list(allow or []), list(deny or []), parse=parse)
    return Toolbox(default_tools(sandbox, network), permission_mode, rules, secret_values(), approver)
