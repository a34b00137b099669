"""Prompt files: `prompts/*.md`, loaded and rendered with strict substitution.

Each prompt may begin with an HTML comment naming its variables; the comment is not sent.
`render` fails on a missing or an unused variable, so a prompt and its caller cannot drift.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

OVERRIDE_CAP = 8000

_VAR = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_HEADER = re.compile(r"\A<!--.*?-->\n?", re.S)


def prompts_dir() -> Path:
    """The prompts folder: beside the source tree in a checkout, inside the package when installed."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "_prompts", here.parent.parent / "prompts"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("rhapsody's prompts folder is missing from this installation")


@cache
def load(name: str) -> str:
    """The text of `prompts/<name>.md`, without its header comment."""
    text = (prompts_dir() / f"{name}.md").read_text(encoding="utf-8")
    return _HEADER.sub("", text)


def render(name: str, **variables: str) -> str:
    """The prompt with every `{{var}}` replaced; missing or unused variables are errors."""
    text = load(name)
    wanted = set(_VAR.findall(text))
    missing = wanted - variables.keys()
    unused = variables.keys() - wanted
    if missing or unused:
        raise KeyError(f"prompt {name}: missing {sorted(missing)}, unused {sorted(unused)}")
    return _VAR.sub(lambda m: variables[m.group(1)], text)


def names() -> list[str]:
    """Every prompt name, tools included (as `tools/<name>`)."""
    root = prompts_dir()
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.md"))


def project_override(root: Path, name: str, cap: int = OVERRIDE_CAP) -> str | None:
    """The text of `.rhapsody/prompts/<name>.md` when a project provides one, else None.

    Read safely: only a regular file that lies inside `root` (no symbolic link at the last
    component, none in the path leading out of the root), at most `cap` characters.
    """
    from rhapsody.core.own_files import read_own

    try:
        text = read_own(root, root / ".rhapsody" / "prompts" / f"{name}.md", cap * 4)
    except RuntimeError:  # a link loop on the way
        return None
    if text is None:
        return None
    return _HEADER.sub("", text[:cap]).strip() or None
