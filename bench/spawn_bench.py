"""Benchmark: what confinement costs each process rhapsody starts (issue 18, items 3 and 6).

    python bench/spawn_bench.py

In a process of rhapsody's size (textual and anthropic imported), the median time of one
short child (`true`) started plainly, with the parent-death signal armed in a `preexec_fn`
(which forces a fork of this process), under `setpriv --pdeathsig KILL`, and as commands and workers start
(`lifeline.dying_with_us`: setpriv, then bash, which checks the parent and execs it); one `bash -c
true` plainly and under the supervisor that bash outside the sandbox gets; and one of
rhapsody's own git calls (`run_git`, which checks the repository's confinement first) and
`git_facts` on a fresh one-commit repository.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anthropic  # noqa: F401  (a process of rhapsody's size: forking copies its page tables)
import textual.app  # noqa: F401

from rhapsody.sandbox import lifeline
from rhapsody.tools.git import git_facts, run_git

RUNS = 30


def _started_dying(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    argv, preexec = lifeline.dying_with_us(argv)
    return subprocess.run(argv, preexec_fn=preexec)


def median_ms(step: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    setpriv = shutil.which("setpriv") or "setpriv"
    rows = [("true, plain", lambda: subprocess.run(["true"])),
            ("true, preexec_fn (parent-death signal)", lambda: subprocess.run(["true"], preexec_fn=lifeline.preexec())),
            ("true, setpriv --pdeathsig KILL", lambda: subprocess.run([setpriv, "--pdeathsig", "KILL", "--", "true"])),
            ("true, dying_with_us (setpriv, then bash's parent check)",
             lambda: _started_dying(["true"])),
            ("bash -c true, plain", lambda: subprocess.run(["bash", "-c", "true"])),
            ("bash -c true, supervised", lambda: subprocess.run(lifeline.supervised(["bash", "-c", "true"])))]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
        subprocess.run([*git, "init", "-q"], cwd=root, check=True)
        (root / "a.txt").write_text("a\n")
        subprocess.run([*git, "add", "."], cwd=root, check=True)
        subprocess.run([*git, "commit", "-qm", "a"], cwd=root, check=True)
        rows += [("run_git(rev-parse HEAD)", lambda: run_git(root, "rev-parse", "HEAD")),
                 ("git_facts", lambda: git_facts(root))]
        for name, step in rows:
            print(f"{name}: {median_ms(step):.1f} ms (median of {RUNS})")


if __name__ == "__main__":
    main()
