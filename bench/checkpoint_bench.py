"""Benchmark: a checkpoint of a 20,000-file project with one changed file, beside `git stash create`.

    .venv/bin/python bench/checkpoint_bench.py [--files 20000] [--runs 15]

Makes a git repository of FILES small files in 200 folders (committed), takes the first
checkpoint (every file hashed once), then RUNS times, interleaved: change one tracked file,
time `git stash create` (a subprocess, wall clock), change it again, time a checkpoint
(`Shadow.snapshot`: ls-files, update-index, write-tree, commit-tree, all subprocesses). Prints
the medians, their ratio (the goal: at most 3), and the shadow repository's size.
"""

from __future__ import annotations

import argparse
import os
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # the shadow lives there: not the user's own
        root = Path(tmp) / "project"
        root.mkdir()
        make_project(root, args.files)
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
