"""Confinement of tool paths to the project root."""

from __future__ import annotations

from pathlib import Path

from rhapsody.core.access.credentials import is_credential
from rhapsody.core.toolbox.output_caps import cap_text as cap_text  # one cut for tools and attached files
from rhapsody.core.toolbox.protocol import ToolFailure


def confine(root: Path, given: str, protected: tuple[str, ...] = (), outside: bool = False) -> Path:
    """Resolve `given` under `root`; refuse anything that lands outside, symlinks included (unless
    `outside`: the human or a rule allowed this read there), and credential locations
    (`core/access/credentials.py`, with the user's `protected` paths, and the system's own secrets) even inside."""
    from rhapsody.sandbox.bwrap import SYSTEM_SECRETS

    if not given or "\x00" in given:
        raise ToolFailure("path is empty or contains a NUL byte")
    base = root.resolve()
    candidate = Path(given)
    target = (candidate if candidate.is_absolute() else base / candidate).resolve()
    if target != base and base not in target.parents and not outside:
        raise ToolFailure(f"refused: {given!r} resolves outside the project root {base}")
    if is_credential(target, (*protected, *SYSTEM_SECRETS), resolved=True):
        raise ToolFailure(f"refused: {given!r} is a credential location (a protected read, see docs/security.md)")
    return target


def shown(root: Path, path: Path) -> str:
    """The path as the agent should see it: relative to the root."""
    try:
        return str(path.relative_to(root.resolve())) or "."
    except ValueError:
        return str(path)
