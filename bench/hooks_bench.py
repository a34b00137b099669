"""Benchmark: what a hook costs a tool call, and what web_fetch adds to every request.

    python bench/hooks_bench.py

Fires a PreToolUse hook through rhapsody's own runner (bash starting a trivial command, the
JSON payload on stdin, the `hook` record appended with fsync), 30 times each for `true`, a
`python3 -c` one-liner and a `jq` call (when installed), and prints the median and the 90th
percentile. Then times what a tool call pays for hooks when none is configured (`Toolbox.run` of a
`write_file` with a 256 KB body and a `read_file` of a 30 KB answer, 200 runs each, median), and prints the bytes of the `web_fetch` definition in the compact `tools` array.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rhapsody.core.session.context import RequestSpec
from rhapsody.core.toolbox.hooks import payload
from rhapsody.core.session.messages import compact_json
from rhapsody.core.session.session import Session
from rhapsody.core.toolbox.protocol import ToolContext
from rhapsody.config.hooks import HookCommand, HookMatcher
from rhapsody.hook_runner import HookRunner
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


CALLS = 200
BODY = "".join(f"    result_{i} = compute(value_{i}, limit={i})  # line {i} of the body\n" for i in range(4500))[:256_000]


async def unhooked(root: Path) -> dict[str, float]:
    """Median milliseconds of `Toolbox.run` per call with no hooks configured: a big write, a capped read."""
    session = Session.start(root, RequestSpec(model="bench", system="", tools=[], max_tokens=1))
    toolbox, ctx = default_toolbox("yolo", sandbox="off"), ToolContext(root, session)
    out = {}
    for name, args in (("write_file", {"path": "big.py", "content": BODY}), ("read_file", {"path": "big.py"})):
        ms = []
        for _ in range(CALLS):
            start = time.perf_counter()
            await toolbox.run(name, args, ctx)
            ms.append((time.perf_counter() - start) * 1000)
        out[name] = statistics.median(ms)
    return out


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        for name, command in COMMANDS.items():
            if not shutil.which(command.split()[0]):
                continue
            ms = sorted(asyncio.run(timings(Path(folder), command)))
            print(f"hook {name:8} median {statistics.median(ms):6.1f} ms  p90 {ms[int(len(ms) * 0.9)]:6.1f} ms")
    with tempfile.TemporaryDirectory() as folder:
        for name, median in asyncio.run(unhooked(Path(folder))).items():
            print(f"no hooks: {name:10} median {median:6.3f} ms per call")
    spec = next(s for s in default_toolbox().specs() if s["name"] == "web_fetch")
    print(f"web_fetch definition: {len(compact_json(spec).encode())} bytes of every request's tools array")


if __name__ == "__main__":
    main()
