"""Time `rhapsody export` on a large history, and a headless Chromium opening the page.

    .venv/bin/python bench/export_bench.py [--mb 12] [--source history/review-….jsonl]

The large history is the recorded review session (bench/record_session.py) repeated until it
reaches the size asked: each copy continues the conversation with its tool ids, hint ids,
seam numbers, sequence numbers and times renumbered, so it folds like one long session with
one seam per copy. The bench prints the history's size, the export's wall and CPU time for
HTML and Markdown (CPU time says more on a shared machine), the page's size, and the time
Chromium takes to load the page and dump its DOM (when `chromium` is installed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SOURCE = REPO / "history" / "review-20261129-142658-95fc0b.jsonl"


def tiled(records: list[dict[str, Any]], target: int) -> list[dict[str, Any]]:
    """The session repeated until its JSONL reaches `target` bytes."""
    size = sum(len(json.dumps(r)) + 1 for r in records)
    copies = max(1, -(-target // size))
    messages = sum(1 for r in records if r["kind"] == "message")
    span = records[-1]["ts"] - records[0]["ts"] + 1.0
    out = list(records)
    for c in range(1, copies):
        text = json.dumps(records[1:])
        text = text.replace('"toolu_', f'"c{c}_toolu_').replace('"h1"', f'"h1_{c}"').replace('"h2"', f'"h2_{c}"')
        for record in json.loads(text):
            record["seq"] += c * len(records)
            record["ts"] += c * span
            if "message_seq" in record:
                record["message_seq"] += c * len(records)
            if record["kind"] == "seam":
                record["seam"] += c
                record["boundary"] += c * messages
            out.append(record)
    return out


def chromium_load(page: Path) -> tuple[float, float] | None:
    """Wall and CPU seconds (its processes') for headless Chromium to load `page` and print its DOM;
    None without chromium."""
    binary = shutil.which("chromium")
    if binary is None:
        return None
    with tempfile.TemporaryDirectory() as profile:
        start, before = time.perf_counter(), os.times()
        subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--disable-component-update", "--disable-sync", "--no-first-run",
                        f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                       check=True, capture_output=True, timeout=300)
        after = os.times()
        return time.perf_counter() - start, after.children_user + after.children_system - before.children_user - before.children_system


def main() -> None:
    from rhapsody.commands.export import export_text

    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=12.0)
    parser.add_argument("--source", type=Path, default=SOURCE)
    args = parser.parse_args()
    records = [json.loads(line) for line in args.source.read_text(encoding="utf-8").splitlines() if line.strip()]
    big = tiled(records, int(args.mb * 1_000_000))
    with tempfile.TemporaryDirectory() as folder:
        history = Path(folder) / "big.jsonl"
        history.write_text("".join(json.dumps(r) + "\n" for r in big), encoding="utf-8")
        print(f"history: {history.stat().st_size / 1e6:.1f} MB, {len(big):,} records, "
              f"{sum(1 for r in big if r['kind'] == 'seam')} seams")
        for fmt in ("html", "md"):
            start, cpu = time.perf_counter(), time.process_time()
            _, page = export_text(Path(folder), str(history), fmt)
            took, cpu = time.perf_counter() - start, time.process_time() - cpu
            out = Path(folder) / f"page.{fmt}"
            out.write_text(page, encoding="utf-8")
            print(f"export --{fmt}: {took:.2f} s wall, {cpu:.2f} s CPU, {len(page.encode()) / 1e6:.1f} MB")
        loaded = chromium_load(Path(folder) / "page.html")
        print("chromium: not installed" if loaded is None else
              f"chromium --headless --dump-dom: {loaded[0]:.2f} s wall, {loaded[1]:.2f} s CPU")


if __name__ == "__main__":
    main()
