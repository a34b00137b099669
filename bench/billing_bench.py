"""CPU time of pricing a long session with and without its seams (`rhapsody stats`, the export's charts).

    .venv/bin/python bench/billing_bench.py [--mb 12] [--runs 3]

The history is the recorded review session tiled to the size asked (bench/export_bench.py's `tiled`);
the bench prints the best CPU time of `core.accounting.billing.seam_savings` over the runs.
"""

from __future__ import annotations

import argparse
import json
import time

from export_bench import SOURCE, tiled

from rhapsody.core.accounting.billing import seam_savings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=12.0)
    parser.add_argument("--runs", type=int, default=3)
    ns = parser.parse_args()
    records = [json.loads(line) for line in SOURCE.read_text(encoding="utf-8").splitlines()]
    big = tiled(records, int(ns.mb * 1_000_000))
    times = []
    for _ in range(ns.runs):
        start = time.process_time()
        figures = seam_savings(big, 0.1)
        times.append(time.process_time() - start)
    print(f"{len(big):,} records, {sum(1 for r in big if r['kind'] == 'usage'):,} requests: "
          f"seam_savings best CPU {min(times):.2f} s of {ns.runs} (without seams {figures['billed_input_tokens_without_seams']:,})")


if __name__ == "__main__":
    main()
