"""The built-in tools, and the toolbox every front end uses."""

from __future__ import annotations

from rhapsody.core.tools import Approver, Tool, Toolbox


def default_tools() -> list[Tool]:
    """Every built-in tool, in the order the model sees them."""
    from rhapsody.tools.bash import Bash
    from rhapsody.tools.files import EditFile, FindFiles, ReadFile, SearchText, WriteFile
    from rhapsody.tools.git import Git
    from rhapsody.tools.handoff import MicroHandoff, Recall

    return [ReadFile(), WriteFile(), EditFile(), Bash(), FindFiles(), SearchText(), Git(), Recall(), MicroHandoff()]


def default_toolbox(permission_mode: str = "yolo", allow: list[str] | None = None,
                    deny: list[str] | None = None, approver: Approver | None = None) -> Toolbox:
    """The toolbox with every built-in tool; the credentials in the environment are masked in output."""
    import os

    from rhapsody.core.permissions import Rules
    from rhapsody.tools.bash import SCRUBBED

    secrets = tuple(os.environ[name] for name in SCRUBBED if os.environ.get(name))
    return Toolbox(default_tools(), permission_mode, Rules(list(allow or []), list(deny or [])), secrets, approver)
