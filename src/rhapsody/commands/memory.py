"""`rhapsody memory init|stats|audit`: the project's memory folder in git (docs/memory/ by default)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rhapsody import memory
from rhapsody.config.settings import MemorySettings


def main(root: Path, settings: MemorySettings, action: str, as_json: bool) -> int:
    """Run one memory action; the exit status is 1 for a layout error or an audit with findings."""
    path = settings.path
    if action == "init":
        try:
            created = memory.init(root, path)
        except memory.LayoutError as exc:
            print(f"rhapsody: {exc}", file=sys.stderr)
            return 1
        print("\n".join(f"created {c}" for c in created) or f"{path}/ already set up")
        return 0
    if action == "stats":
        figures = memory.stats(root, path)
        print(json.dumps(figures) if as_json else memory.format_stats(figures))
        return 0
    findings = memory.audit(root, path, settings.stale_days)
    for finding in findings:
        print(finding)
    print(f"{len(findings)} finding(s)" if findings else "no findings")
    return 1 if findings else 0
