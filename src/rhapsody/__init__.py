"""rhapsody: a terminal coding agent that keeps its own words across context seams.

`from rhapsody import Agent` is the Python API (rhapsody/api.py, docs/python-api.md). It is loaded on first
use, so `import rhapsody` stays as light as the CLI's first frame needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Agent", "Answer", "Figures", "__version__"]

if TYPE_CHECKING:
    from rhapsody.api import Agent, Answer, Figures


def __getattr__(name: str) -> Any:
    if name in ("Agent", "Answer", "Figures"):
        from rhapsody import api

        return getattr(api, name)
    raise AttributeError(f"module 'rhapsody' has no attribute {name!r}")
