"""Modules imported on first use, so the app's first frame does not wait for them.

The app's module names the renderer, the loop's events and the commands at its top; the
first frame needs none of them. `lazy(name)` puts a module in `sys.modules` whose code
runs on its first attribute access (the standard library's `importlib.util.LazyLoader`).
Any later `import` of it loads it for real, so a lazy module never holds back the code
that uses it; it only moves the cost to after the first frame. `load_all()` runs every
module still pending, on the calling thread, so no background thread meets one half-built.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

_pending: list[ModuleType] = []


def lazy(name: str) -> ModuleType:
    """Module `name`: already imported, or imported when first touched."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)  # imports the parent package, not the module
    if spec is None or spec.loader is None:
        raise ImportError(f"no module named {name!r}")
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)  # `from parent import child` finds it, as after an import
    _pending.append(module)
    return module


def load_all() -> None:
    """Run every lazy module not yet run."""
    while _pending:
        getattr(_pending.pop(), "__name__")  # the first attribute access executes the module
