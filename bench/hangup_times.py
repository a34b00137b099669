"""How long rhapsody takes to be gone once its terminal closes, at each moment the tests close it.

    python bench/hangup_times.py

Runs tests/frontends/test_hangup.py (real pseudo-terminals, the loopback server) and prints, per
test, the seconds from closing the terminal to the process gone, as the test measured them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import tests.frontends.test_hangup as hangup_tests  # noqa: E402 - after the path that finds it


class Timings:
    """A pytest plugin that keeps, per test, what each close of the terminal took."""

    def __init__(self) -> None:
        self.current = ""
        self.seconds: dict[str, list[float]] = {}

    def pytest_runtest_setup(self, item: Any) -> None:
        """Note which test runs now."""
        self.current = item.nodeid.split("::", 1)[1]


def main() -> int:
    """Run the tests with the close timed; print one line per test."""
    timings = Timings()
    closed = hangup_tests._closed

    def timed(term: Any) -> float:
        seconds = closed(term)
        timings.seconds.setdefault(timings.current, []).append(seconds)
        return seconds

    hangup_tests._closed = timed
    os.chdir(REPO)
    status = pytest.main(["-n", "0", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", hangup_tests.__file__],
                         plugins=[timings])
    for name, seconds in timings.seconds.items():
        print(f"{max(seconds):5.2f} s  {name}")
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
