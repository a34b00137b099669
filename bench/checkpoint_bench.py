"""Benchmark: a checkpoint of a 20,000-file project with one changed file, beside `git stash create`.

    .venv/bin/python bench/checkpoint_bench.py [--files 20000] [--runs 15]

Makes a git repository of FILES small files in 200 folders (committed), takes the first
checkpoint (every file hashed once), then RUNS times, interleaved: change one tracked file,
time `git stash create` (a subprocess, wall clock), change it again, time a checkpoint
(`Shadow.snapshot`: ls-files, update-index, write-tree, commit-tree, all subprocesses). Prints
the medians, their ratio (the goal: at most 3), and the shadow repository's size.

    .venv/bin/python bench/checkpoint_bench.py --unchanged --files 200 [--runs 15]

A tree under 2,000 entries in which nothing changed since the last checkpoint, its files written 10 s
before: a checkpoint between calls (`thorough=False`) by the tree's stamps, interleaved with one that
asks git (`ls-files`, as every checkpoint did before the stamp scan); CPU time of this process and its
children, and wall time.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rhapsody.rewind.shadow import Shadow

GIT = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
       "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}


def git(root: Path, *args: str) -> None:
    done = subprocess.run(["git", *args], cwd=root, env={**os.environ, **GIT}, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"git {args[0]}: {done.stderr.strip()}")


def make_project(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / f"pkg{i % 200:03d}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i}.py").write_text(f"def f{i}(x):\n    return x + {i}\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")


def timed(action: "object") -> float:
    start = time.perf_counter()
    action()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


def cpu_ms(action: "object") -> tuple[float, float]:
    """CPU time (this process and the children it waited for) and wall time of `action`, in ms."""
    def used() -> float:
        return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                     resource.getrusage(resource.RUSAGE_CHILDREN)))

    before, start = used(), time.perf_counter()
    action()  # type: ignore[operator]
    return (used() - before) * 1000, (time.perf_counter() - start) * 1000


def unchanged(root: Path, runs: int) -> None:
    old = time.time_ns() - 10_000_000_000
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files:
            os.utime(os.path.join(folder, name), ns=(old, old))
    time.sleep(0.1)  # every stamp settled
    by_stamps, by_git = Shadow(root), Shadow(root)
    by_git._unscanned = True  # as before the stamp scan: `ls-files` each time
    for shadow in (by_stamps, by_git):
        shadow.snapshot("first")
        shadow.snapshot("settled", thorough=False)
    stamps, gits = [], []
    for _ in range(runs):
        stamps.append(cpu_ms(lambda: by_stamps.snapshot("bench", thorough=False)))
        gits.append(cpu_ms(lambda: by_git.snapshot("bench", thorough=False)))
    files = sum(len(f) for _, _, f in os.walk(root)) - sum(len(f) for _, _, f in os.walk(root / ".git"))
    print(f"{files} files, nothing changed, median of {runs} (CPU ms, wall ms):")
    for name, got in (("by the stamps", stamps), ("by git ls-files", gits)):
        print(f"  {name:16s} {statistics.median(c for c, _ in got):7.2f} {statistics.median(w for _, w in got):7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--unchanged", action="store_true", help="a small tree in which nothing changed")
    args = parser.parse_args()
    if args.files < 1 or args.runs < 1:
        parser.error("--files and --runs take a whole number of at least 1")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # the shadow lives there: not the user's own
        root = Path(tmp) / "project"
        root.mkdir()
        make_project(root, args.files)
        if args.unchanged:
            unchanged(root, args.runs)
            return
        shadow = Shadow(root)
        cold = timed(lambda: shadow.snapshot("first"))
        changed = root / "pkg007" / "mod7.py"
        stash, checkpoint = [], []
        for n in range(args.runs):
            changed.write_text(f"def f7(x):\n    return x * {n}\n")
            stash.append(timed(lambda: git(root, "stash", "create")))
            changed.write_text(f"def f7(x):\n    return x - {n}\n")
            checkpoint.append(timed(lambda: shadow.snapshot("bench")))
        s, c = statistics.median(stash), statistics.median(checkpoint)
        size = shadow.size_bytes() / 1024 / 1024
        print(f"{args.files} files, one changed, median of {args.runs}:")
        print(f"  git stash create    {s:7.1f} ms")
        print(f"  checkpoint          {c:7.1f} ms   ({c / s:.2f}x git stash create)")
        print(f"  first checkpoint    {cold:7.1f} ms   (every file hashed once)")
        print(f"  shadow repository   {size:7.1f} MB after {args.runs + 1} checkpoints")


if __name__ == "__main__":
    main()
