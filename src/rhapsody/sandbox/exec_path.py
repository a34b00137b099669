"""Programs rhapsody starts are looked up in absolute PATH folders only.

An empty PATH entry (`PATH=/usr/bin:` or `::`, which shells read as the working directory) or
a relative one (`.`, `bin`, `node_modules/.bin`) makes a program name resolve against the folder
a child runs in: the project. A cloned repository that commits an executable `git` (or `rg`,
`bwrap`) would then run outside the sandbox the moment rhapsody asks git for the branch.
`keep_absolute` drops those entries from rhapsody's own environment when it starts, before
anything is looked up, so every lookup and every child sees the same PATH.

Stdlib only.
"""

from __future__ import annotations

import os


def keep_absolute() -> None:
    """Drop the empty and relative entries of PATH from rhapsody's environment (absent PATH stays absent)."""
    path = os.environ.get("PATH")
    if path is not None:
        os.environ["PATH"] = os.pathsep.join(p for p in path.split(os.pathsep) if os.path.isabs(p))
