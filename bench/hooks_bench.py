"""Benchmark: what a hook costs a tool call, and what web_fetch adds to every request.

    python bench/hooks_bench.py

Fires a PreToolUse hook through rhapsody's own runner (bash starting a trivial command, the
JSON payload on stdin, the `hook` record appended with fsync), 30 times each for `true`, a
`python3 -c` one-liner and a `jq` call (when installed), and prints the median and the 90th
percentile. Then prints the bytes of the `web_fetch` definition in the compact `tools` array.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rhapsody.core.context import RequestSpec
from rhapsody.core.hooks import payload
from rhapsody.core.messages import compact_json
from rhapsody.core.session import Session
from rhapsody.hook_runner import HookCommand, HookMatcher, HookRunner
from rhapsody.tools import default_toolbox

RUNS = 30
COMMANDS = {"true": "true", "python3": "python3 -c 'import json,sys; json.load(sys.stdin)'",
            "jq": "jq -e .tool_name >/dev/null"}


async def timings(root: Path, command: str) -> list[float]:
    """Milliseconds per fire of one PreToolUse hook."""
    session = Session.start(root, RequestSpec(model="bench", system="", tools=[], max_tokens=1))
    runner = HookRunner({"PreToolUse": [HookMatcher(hooks=[HookCommand(command=command)])]}, root)
    event = payload(session, "PreToolUse", "ask", tool_name="Bash", tool_input={"command": "ls"})
    out = []
    for _ in range(RUNS):
        start = time.perf_counter()
        await runner.fire(session, "PreToolUse", event, "bash")
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        for name, command in COMMANDS.items():
            if not shutil.which(command.split()[0]):
                continue
            ms = sorted(asyncio.run(timings(Path(folder), command)))
            print(f"hook {name:8} median {statistics.median(ms):6.1f} ms  p90 {ms[int(len(ms) * 0.9)]:6.1f} ms")
    spec = next(s for s in default_toolbox().specs() if s["name"] == "web_fetch")
    print(f"web_fetch definition: {len(compact_json(spec).encode())} bytes of every request's tools array")


if __name__ == "__main__":
    main()
