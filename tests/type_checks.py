"""Run `lint-imports` and `mypy` (settings in pyproject.toml) side by side; write what they said to a folder.

    python tests/type_checks.py FOLDER

Writes FOLDER/result.json, `{"lint-imports": [exit, output], "mypy": [exit, output]}`, once both have
ended (renamed into place, so a reader never sees half of it). tests/conftest.py starts it as a whole-suite
run begins, so that a cold mypy (a minute on a busy 2-core machine) overlaps the other tests;
tests/test_architecture.py reads the result, or runs it itself when nothing started it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CHECKS = {"lint-imports": [str(BIN / "lint-imports")],
          "mypy": [sys.executable, "-m", "mypy"]}  # files, excludes and strict come from pyproject.toml
RESULT = "result.json"
STARTED_ENV = "RHAPSODY_TYPE_CHECKS"
"""Names the folder where the checks started for this run write their result (set by tests/conftest.py)."""


def main(folder: Path) -> None:
    running = {name: subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for name, cmd in CHECKS.items()}
    said = {name: (proc.communicate()[0], proc.returncode) for name, proc in running.items()}
    partial = folder / (RESULT + ".part")
    partial.write_text(json.dumps({name: [code, out] for name, (out, code) in said.items()}), encoding="utf-8")
    partial.rename(folder / RESULT)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
