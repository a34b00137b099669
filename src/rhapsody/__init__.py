"""rhapsody: a terminal coding agent that keeps its own words across context seams.

The Python API is `rhapsody.api` (docs/python-api.md); `from rhapsody import Agent` is the same class, loaded
on first use. The package root imports nothing itself: the core and the importer read `__version__` from
here, so the root stays out of the layers lint-imports holds, and `import rhapsody` stays as light as the
CLI's first frame needs.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
__all__ = ["Agent", "Answer", "Figures", "__version__"]


def __getattr__(name: str) -> Any:
    """`rhapsody.Agent`, `rhapsody.Answer`, `rhapsody.Figures`: the Python API's names, imported when first asked for."""
    if name in ("Agent", "Answer", "Figures"):
        return getattr(importlib.import_module("rhapsody.api"), name)
    raise AttributeError(f"module 'rhapsody' has no attribute {name!r}")
