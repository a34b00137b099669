"""Masking of credential values before text reaches a prompt, the history or the screen.

Two nets: the exact values rhapsody knows are secret (its own keys, environment variables
named like credentials), and shapes that are credentials wherever they come from
(provider key prefixes, private key blocks, `NAME_TOKEN=value` assignments).

Imports: stdlib only.
"""

from __future__ import annotations

import re

MASK = "[masked secret]"
_SHAPES = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]{16,}"
    r"|sk-(?:proj-|live-|test-)?[A-Za-z0-9_\-]{32,}"
    r"|AKIA[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|AIza[0-9A-Za-z_\-]{35}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"
    r"|(?<=://)[^/\s:@]{1,200}:[^/\s@]{1,200}(?=@)"  # user:password in a URL (a git remote with a token)
    r"|(?<=://)(?=[^/\s:@]{0,200}[0-9])(?=[^/\s:@]{0,200}[A-Za-z])[A-Za-z0-9_\-.~%+]{20,200}(?=@)"  # a token as the URL's user
)
_ASSIGNED = re.compile(r"\b([A-Za-z0-9_]{1,200})([ \t]*[=:][ \t]*)(['\"]?)([^\s'\"\x00]{8,})")
"""A name, `=` or `:`, a value; kept linear-time (the name is checked for a credential word afterwards)."""
_CREDENTIAL_NAME = re.compile(r"API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|TOKEN(?!S)|SECRET|PASSW(?:OR)?D|CREDENTIAL", re.IGNORECASE)


def mask(text: str, known: tuple[str, ...] = (), assignments: bool = False) -> str:
    """`text` with known secret values and credential shapes masked; `NAME_KEY=value` too when asked.

    Assignments are masked only in text rhapsody reads on its own account (AGENTS.md,
    memory): in tool output they would also hit ordinary code (`token = get_token()`).
    """
    for value in known:
        if len(value) >= 8:
            text = text.replace(value, MASK)
    text = _SHAPES.sub(MASK, text)
    if not assignments:
        return text
    return _ASSIGNED.sub(_mask_assignment, text)


def _mask_assignment(m: re.Match[str]) -> str:
    if not _CREDENTIAL_NAME.search(m.group(1)):
        return m.group(0)
    return m.group(1) + m.group(2) + m.group(3) + MASK
