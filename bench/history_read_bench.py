"""Time reading a large history: `read_history` alone, `Session.resume` (read and fold), and
`record_lines` (the transcript the app rebuilds from the resumed session's records).

    .venv/bin/python bench/history_read_bench.py [--mb 12] [--runs 5] [--source history/review-….jsonl]
    .venv/bin/python bench/history_read_bench.py --against /tmp/before   # that checkout, then this one

The large history is the recorded review session repeated until it reaches the size asked,
as bench/export_bench.py builds it (one seam per copy). Each run resumes a fresh copy of the
file (a resume appends its `resumed` record). The bench prints the history's size, then the
best and the median of the runs, wall and CPU time (CPU time says more on a shared machine).
To time another checkout with the same bench, put its `src` first on the path:
`PYTHONPATH=/tmp/before/src .venv/bin/python bench/history_read_bench.py`, or `--against
/tmp/before` to time it and then this checkout in one run, one after the other on the same
file size; the first line printed names the rhapsody that was timed. `resume+rebuild` is what
opening a session in the app costs: the resume, then the transcript from its records.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from export_bench import SOURCE, tiled

import rhapsody
from rhapsody.view.render import record_lines

try:
    from rhapsody.core.session.history import read_history
    from rhapsody.core.session.session import Session
except ImportError:  # a checkout from before core/ was grouped by role
    from rhapsody.core.session.history import read_history  # type: ignore[no-redef]
    from rhapsody.core.session.session import Session  # type: ignore[no-redef]


def timed(work: Callable[[], object], runs: int, prepare: Callable[[], object] = lambda: None,
          ) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of each run (`prepare` runs before each, untimed)."""
    walls, cpus = [], []
    for _ in range(runs):
        prepare()
        start, cpu = time.perf_counter(), time.process_time()
        work()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return walls, cpus


def line(name: str, walls: list[float], cpus: list[float]) -> str:
    return (f"{name:<16} wall best {min(walls) * 1000:7.0f} ms, median {statistics.median(walls) * 1000:7.0f} ms;"
            f"  CPU best {min(cpus) * 1000:7.0f} ms, median {statistics.median(cpus) * 1000:7.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=12.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--source", type=Path, default=SOURCE)
    parser.add_argument("--against", type=Path, help="another checkout to time first, in a process of its own")
    args = parser.parse_args()
    if args.against:
        env = {**os.environ, "PYTHONPATH": str(args.against / "src")}
        argv = [sys.executable, __file__, "--mb", str(args.mb), "--runs", str(args.runs), "--source", str(args.source)]
        subprocess.run(argv, env=env, check=True)
    print(f"rhapsody from {Path(rhapsody.__file__).parent}")
    records = [json.loads(line) for line in args.source.read_text(encoding="utf-8").splitlines() if line.strip()]
    big = tiled(records, int(args.mb * 1_000_000))
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        history = root / "big.jsonl"
        history.write_text("".join(json.dumps(r) + "\n" for r in big), encoding="utf-8")
        print(f"history: {history.stat().st_size / 1e6:.1f} MB, {len(big):,} records, "
              f"{sum(1 for r in big if r['kind'] == 'seam')} seams")
        print(line("read_history", *timed(lambda: read_history(history), args.runs)))
        copy = root / "copy.jsonl"
        fresh = lambda: shutil.copyfile(history, copy)  # noqa: E731
        print(line("Session.resume", *timed(lambda: Session.resume(root, copy).writer.close(), args.runs, fresh)))
        fresh()
        session = Session.resume(root, copy)
        session.writer.close()
        rebuild = lambda: record_lines(session.records, root, session.id, session.conversation)  # noqa: E731
        print(line("record_lines", *timed(rebuild, args.runs)))

        def opened() -> None:
            resumed = Session.resume(root, copy)
            resumed.writer.close()
            record_lines(resumed.records, root, resumed.id, resumed.conversation)

        print(line("resume+rebuild", *timed(opened, args.runs, fresh)))


if __name__ == "__main__":
    main()
