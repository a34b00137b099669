"""The structure is held by tools: import-linter contracts and mypy --strict, run with the suite.

The contracts and mypy's settings live in pyproject.toml; this test runs both as the
command line would and fails with their output.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.mark.timeout(300)  # mypy without its cache takes a while on a busy machine
def test_import_contracts_hold_and_mypy_strict_is_clean() -> None:
    checks = {
        "lint-imports": [str(BIN / "lint-imports")],
        "mypy": [sys.executable, "-m", "mypy"],  # files, excludes and strict come from pyproject.toml
    }
    running = {name: subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for name, cmd in checks.items()}
    failures = []
    for name, proc in running.items():
        out, _ = proc.communicate(timeout=280)
        if proc.returncode != 0:
            failures.append(f"$ {name} (exit {proc.returncode})\n{out[-6000:]}")
    assert not failures, "\n\n".join(failures)


def test_what_the_first_frame_needs_imports_no_pydantic_and_no_core() -> None:
    """The app paints before its session is built (docs/performance.md): the modules on the way to
    the first frame must not import pydantic, the SDK or the loop. A heavy import added at the top
    of one of them would slow every start without failing anything else."""
    probe = ("import sys, rhapsody.cli, rhapsody.trust, rhapsody.demo, rhapsody.tui.app; "
             "heavy = sorted(m for m in ('pydantic', 'anthropic', 'rhapsody.core.loop', 'rhapsody.config', "
             "'rhapsody.render', 'rhapsody.core.events', 'rhapsody.wiring') "
             "if m in sys.modules and type(sys.modules[m]).__name__ != '_LazyModule'); print(heavy)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
