"""The apps a test worker starts share their parsed stylesheets, as one app's re-parses already do.

Textual parses the app's CSS file and every widget's default CSS again for each app (its parse cache
belongs to the app's stylesheet), about a fifth of the CPU a `run_test()` start takes
(docs/performance.md, "A start to the first idle frame"), and the suite starts hundreds. The rules a
source parses to depend only on the source, where it was read from, its place and scope, and the CSS
variables (the theme) it was parsed with, which is the key here; Textual itself hands the same rule
objects to every later parse of an unchanged source, so the objects are not changed once parsed. A
person's app starts once a process and never meets this.
"""

from __future__ import annotations

from typing import Any

from textual.css.stylesheet import Stylesheet

_PARSED: dict[tuple[Any, ...], list[Any]] = {}
_OWN = Stylesheet._parse_rules


def _parse_rules(self: Stylesheet, css: str, read_from: Any, is_default_rules: bool = False,
                 tie_breaker: int = 0, scope: str = "") -> list[Any]:
    key = (css, read_from, is_default_rules, tie_breaker, scope, tuple(sorted(self._variables.items())))
    rules = _PARSED.get(key)
    if rules is None:
        rules = _PARSED[key] = _OWN(self, css, read_from, is_default_rules, tie_breaker, scope)
    return rules


def install() -> None:
    Stylesheet._parse_rules = _parse_rules  # type: ignore[method-assign]
