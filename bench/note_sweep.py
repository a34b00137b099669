"""What a field note's size costs: the what-if over note sizes × seam frequency, on the long sessions.

    .venv/bin/python bench/note_sweep.py [--calls 400]

The three long sessions of docs/performance.md (tests/transcripts.py `long_sessions`: Claude Code on
a 200k and a 1M window, Codex) are imported into a scratch project, and each is replayed by
`rhapsody stats --what-if`'s own functions with seams every 10/25/50/100 calls and a note that adds
300/800/1,500/2,500 tokens to the context (a quarter of it written as output, the ratio
`--note-tokens` uses), with rhapsody's own prompt and tools, billed as the what-if bills (each request at its model's rates, its
cache TTL and expiry; a Codex session's tokens at its own rates, no write premium, in claude-opus-4-6's dollars,
for the shape). Each cell is the billed input plus the notes' output in dollars, as a share of the same replay
(the same prompt) without seams.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rhapsody.commands.whatif import own_spec  # noqa: E402
from rhapsody.core.accounting import whatif  # noqa: E402
from rhapsody.core.session.history import read_history  # noqa: E402
from rhapsody.core.pricing import Price, price_of, priced  # noqa: E402
from rhapsody.core.window import history_window  # noqa: E402
from rhapsody.core.session.records import parsed  # noqa: E402
from tests.transcripts import long_sessions  # noqa: E402

NOTES = (300, 800, 1500, 2500)
EVERY = (10, 25, 50, 100)


def dollars(arm: whatif.Arm, price: Price) -> float:
    """Input and the notes' output, at the model's prices."""
    return arm.billed_input_tokens * price.input / 1e6 + arm.note_output_tokens * price.output / 1e6


def sweep(records: list[Any], root: Path) -> list[list[float]]:
    """Rows by note size, columns by frequency: dollars as a share of no seams (rhapsody's own prompt)."""
    model = records[0].model
    price = price_of(model if priced(model) else "claude-opus-4-6")[0]  # Codex: priced as Opus, for the shape
    spec = own_spec(root, model)
    own = whatif.prompt_head(spec.system, spec.tools)
    fit = whatif.calibrate(records, price.read_mult)
    window = history_window(records, model).tokens  # as `rhapsody stats --what-if` finds it
    base = dollars(whatif.run(records, None, whatif.NoteCost(0, 0, ""), window, price.read_mult, fit, own), price)
    table = []
    for added in NOTES:
        note = whatif.NoteCost(added, added // 4, f"{added} tokens")
        table.append([dollars(whatif.run(records, whatif.SeamPolicy("every", n), note, window, price.read_mult, fit, own),
                              price) / base for n in EVERY])
    return table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=400)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder, project = Path(tmp) / "long", Path(tmp) / "project"
        project.mkdir()
        sources = long_sessions(folder, ns.calls)
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp}
        subprocess.run([sys.executable, "-m", "rhapsody", "import", str(folder)], cwd=project, env=env,
                       check=True, capture_output=True)
        histories = sorted((project / ".rhapsody" / "history").glob("*.jsonl"))
        for history in histories:
            records = read_history(history).records
            source = next((r["source"] for r in records if r["kind"] == "import"), None)
            if source is None:  # an imported sub-agent's own history: not one of the long sessions
                continue
            print(f"\n{Path(source).name} (of {len(sources)}): dollars as a share of no seams")
            print("| note tokens | " + " | ".join(f"every={n}" for n in EVERY) + " |")
            print("| --- |" + " --- |" * len(EVERY))
            for added, row in zip(NOTES, sweep(parsed(records), project)):
                print(f"| {added:,} | " + " | ".join(f"{share:.0%}" for share in row) + " |")


if __name__ == "__main__":
    main()
