"""The suite's assertion rewriting, done once before the workers start instead of once in each.

pytest rewrites the `assert`s of every test module, conftest and plugin module it imports, and caches
the result as a `.pyc` beside it, except where `PYTHONDONTWRITEBYTECODE` is set; on a fresh clone
no cache exists either way. Each xdist worker then rewrites all of them itself, at the same moment
as the others: about 14 core-seconds a worker on the 2-core machine, four workers
(docs/performance.md, "The suite"). Here the controller writes those caches first, split between
itself and one forked child, the same code pytest's own import hook would write
(`_pytest.assertion.rewrite`: its private helpers, so a pytest that moves them only loses the
head start: every worker then rewrites as before).

`compile_ahead` does the same for the modules no `assert` is rewritten in: rhapsody's own source and the
suite's helpers. Python reads a module's `.pyc` even where `PYTHONDONTWRITEBYTECODE` is set, but never writes
one there, and an editable install has none, so every process compiled each rhapsody module it imported:
each worker, each fork server, and each of the few hundred `python -m rhapsody` runs forked from them
(a fork server imports only the entry modules; a run imports the rest itself). One whole run compiled some
33,000 modules that way, about 89 core-seconds (docs/performance.md, "The suite"); written once here, as
pip writes them for the installed packages, every process reads them instead.
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path
from typing import Any

import pytest


def rewrite_ahead(config: pytest.Config, tests: Path) -> int:
    """Write the rewritten cache of every module the workers will rewrite that has none; how many."""
    try:
        from _pytest.assertion import rewrite as rw

        state = config.stash[rw.assertstate_key]
        imported = list(state.hook._rewritten_names.values())  # the plugins, rewritten here already
    except (ImportError, AttributeError, KeyError):
        return 0
    found = {*imported, *tests.rglob("test_*.py"), *tests.rglob("conftest.py")}
    todo = sorted(fn for fn in found if rw._read_pyc(fn, pyc_of(rw, fn), state.trace) is None)
    if not todo:
        return 0
    child = os.fork()
    for fn in todo[child == 0::2]:  # the child takes every other one
        try:
            if rw.try_makedirs(rw.get_cache_dir(fn)):
                stat, code = rw._rewrite_test(fn, config)
                rw._write_pyc(state, code, stat, pyc_of(rw, fn))
        except Exception:  # noqa: BLE001 - a module that does not rewrite here is rewritten, or fails, in its worker
            continue
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    return len(todo)


def pyc_of(rw: Any, fn: Path) -> Path:
    """Where pytest's import hook looks for `fn`'s rewritten cache."""
    return Path(rw.get_cache_dir(fn) / (fn.name[:-3] + rw.PYC_TAIL))


def compile_ahead(tests: Path) -> None:
    """Write the `.pyc` of every rhapsody module and test helper that has none, or a stale one (compileall
    skips those already fresh: a warm run costs a few milliseconds)."""
    import rhapsody

    compileall.compile_dir(Path(rhapsody.__file__).parent, quiet=2)
    for fn in tests.rglob("*.py"):
        if not fn.name.startswith("test_") and fn.name != "conftest.py":
            compileall.compile_file(fn, quiet=2)
