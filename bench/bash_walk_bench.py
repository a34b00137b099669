"""Time a sandboxed `true` through the real bash tool in a small project and in a 20,000-file one.

    .venv/bin/python bench/bash_walk_bench.py [--calls 31] [--files 20000]

Both projects are git repositories built in a temp folder: the small one holds 20 files, the large
one `--files` files in 1,000 folders (20 a folder, two levels deep). Both are left alone for
tree_index.SETTLE_NS first (the index lists a folder changed within it again on every walk). Prints the
median wall time of `--calls` calls of `true` each (after one warm-up call; the two projects take
turns) and the ratio;
docs/performance.md quotes it.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rhapsody.core.session.context import RequestSpec
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.protocol import ToolContext
from rhapsody.tools.bash import Bash, BashInput
from rhapsody.sandbox.bwrap import bwrap_path
from rhapsody.sandbox.tree_index import SETTLE_NS


def build(root: Path, files: int) -> Path:
    """A git repository with `files` files, 20 to a folder, folders grouped 25 to a parent."""
    root.mkdir()
    for i in range(files):
        folder = root / f"pkg{i // 500:03d}" / f"mod{i // 20 % 25:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{i % 20:02d}.py").write_text(f"x = {i}\n", encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def context(root: Path) -> ToolContext:
    return ToolContext(root, Session.start(root, RequestSpec(model="m", system="s", tools=[])),
                       confinement="workspace-write")


async def timings(roots: list[Path], calls: int) -> list[list[float]]:
    """Wall seconds of each sandboxed `true` per project, after one warm-up call each; the projects take
    turns, so a change in the machine's load falls on both alike."""
    contexts = [context(root) for root in roots]
    tool = Bash()
    out: list[list[float]] = [[] for _ in roots]
    for _ in range(calls + 1):
        for ctx, times in zip(contexts, out):
            start = time.perf_counter()
            outcome = await tool.run(BashInput(command="true"), ctx)
            times.append(time.perf_counter() - start)
            assert outcome.exit_code == 0, outcome.content
    return [times[1:] for times in out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=31)
    parser.add_argument("--files", type=int, default=20_000)
    args = parser.parse_args()
    if bwrap_path() is None:
        raise SystemExit("bubblewrap is not installed: nothing to measure")
    with tempfile.TemporaryDirectory() as tmp:
        small_root, large_root = build(Path(tmp, "small"), 20), build(Path(tmp, "large"), args.files)
        time.sleep(SETTLE_NS / 1e9)  # a project not written to in the last moments, as one being worked on mostly is
        small, large = map(statistics.median, asyncio.run(timings([small_root, large_root], args.calls)))
    print(f"small project (20 files):       median {small * 1000:6.1f} ms over {args.calls} calls of `true`")
    print(f"large project ({args.files} files): median {large * 1000:6.1f} ms over {args.calls} calls of `true`")
    print(f"ratio large/small: {large / small:.2f}")


if __name__ == "__main__":
    main()
