"""Runs the hooks of the settings as subprocesses: Claude Code's contract, rhapsody's bounds.

A hook is a shell command (`bash -c`) run in the project root, outside the sandbox, with
the event's JSON on standard input and `CLAUDE_PROJECT_DIR`/`RHAPSODY_PROJECT_DIR` set.
It runs under the supervisor (`sandbox/lifeline.py`), as an asyncio subprocess (the interface keeps
drawing): when it ends, times out or rhapsody dies, what it started in the background dies too, in its
group or out of it. Exit status:

    0      ok; standard output may be JSON (`decision`, `reason`, `continue`, `systemMessage`,
           `hookSpecificOutput.permissionDecision`/`permissionDecisionReason`/`additionalContext`);
           a UserPromptSubmit or PreHandoff hook's plain output is context for the model
    2      blocks the event's action; standard error is the reason the model sees
    other  a non-blocking error: one line for the human, and the turn goes on

Every run is a `hook` history record. Which hooks exist is the settings' business: a
project's own hooks arrive only once the project is trusted (rhapsody.config.settings).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path

from rhapsody.config.hooks import HookCommand, HookSettings
from rhapsody.core.toolbox.hooks import HookVerdict, combine
from rhapsody.core.access.permissions import verdict_named
from rhapsody.core.secrets import mask
from rhapsody.core.session.session import Session
from rhapsody.sandbox import lifeline, procs
from rhapsody.core.session import records as rec
from rhapsody.core.json_types import JsonObject

OUTPUT_CAP = 64_000
"""Bytes of a hook's stdout or stderr read; the rest is dropped (a reason is for reading, not a log)."""
REAP_WAIT = 2.0
"""Seconds to wait for a killed hook to be reaped before the turn goes on without it."""
REASON_CAP = 2000
"""Characters of a hook's reason passed to the model."""


class HookRunner:
    """The `Hooks` of the core, running the configured commands."""

    def __init__(self, config: HookSettings, root: Path, secrets: tuple[str, ...] = ()) -> None:
        self.config = config
        self.root = root
        self.secrets = secrets
        self._notices: list[str] = []

    def wants(self, event: str, subject: str = "") -> bool:
        """Whether a hook of `event` takes `subject`."""
        return bool(self._commands(event, subject))

    async def fire(self, session: Session, event: str, payload: JsonObject, subject: str = "") -> HookVerdict:
        """Run every matching hook of `event` at once; their combined verdict."""
        commands = self._commands(event, subject)
        if not commands:
            return HookVerdict()
        data = json.dumps(payload, ensure_ascii=False).encode()
        runs = await asyncio.gather(*(self._run_one(session, event, h, data) for h in commands))
        return combine(list(runs))

    def _commands(self, event: str, subject: str) -> list[HookCommand]:
        """The hooks of `event` whose matcher takes `subject`."""
        return [h for m in self.config.get(event, []) if m.takes(subject) for h in m.hooks]  # type: ignore[call-overload]

    def notices(self) -> list[str]:
        """The failure lines not yet shown."""
        taken, self._notices = self._notices, []
        return taken

    async def _run_one(self, session: Session, event: str, hook: HookCommand, data: bytes) -> HookVerdict:
        start = time.perf_counter()
        code, out, err = await self._spawn(hook, data)
        ms = int((time.perf_counter() - start) * 1000)
        answer = _json(out) if code == 0 else None
        verdict, outcome = _verdict(event, code, out, err, answer)
        shown = _last_line(err) or _last_line(out)  # a traceback's last line names the error
        message = (answer or {}).get("systemMessage")
        if isinstance(message, str) and message.strip():
            self._notices.append(self._masked(f"hook {event}: {_first_line(message)}"))
        if outcome in ("error", "timeout"):
            what = f"timed out after {hook.timeout:g}s (killed)" if code is None else f"exited {code}"
            self._notices.append(self._masked(f"hook {event} `{_short(hook.command)}` {what}"
                                              + (f": {shown}" if shown and code is not None else "")))
        session.append(rec.Hook(event=event, command=self._masked(_short(hook.command, 200)), exit_code=code,
                                duration_ms=ms, outcome=outcome, reason=self._masked(verdict.reason) or None))
        return HookVerdict(verdict.blocked, verdict.decision, self._masked(verdict.reason), self._masked(verdict.context))

    async def _spawn(self, hook: HookCommand, data: bytes) -> tuple[int | None, str, str]:
        """Exit status (None: timed out), stdout, stderr."""
        env = {**os.environ, "CLAUDE_PROJECT_DIR": str(self.root), "RHAPSODY_PROJECT_DIR": str(self.root)}
        try:
            proc = await asyncio.create_subprocess_exec(
                *lifeline.supervised(["bash", "-c", hook.command]), cwd=self.root, env=env,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True)
        except OSError as exc:
            return 127, "", f"cannot start: {exc}"
        try:
            out, err = await asyncio.wait_for(_talk(proc, data), hook.timeout)
        except TimeoutError:
            return None, "", ""
        finally:
            await procs.stop(proc, supervised=True)
            if proc.returncode is None:  # bounded: a child that left the group may still hold a pipe
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), REAP_WAIT)
            procs.release(proc)
        return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")

    def _masked(self, text: str) -> str:
        return mask(text, self.secrets)


async def _talk(proc: asyncio.subprocess.Process, data: bytes) -> tuple[bytes, bytes]:
    """Write the payload (a hook that reads none is fine), read both streams bounded, wait for the exit."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
        proc.stdin.close()
    except (BrokenPipeError, ConnectionResetError):
        pass
    out, err = await asyncio.gather(_bounded(proc.stdout), _bounded(proc.stderr))
    await proc.wait()
    return out, err


async def _bounded(stream: asyncio.StreamReader) -> bytes:
    """Everything up to OUTPUT_CAP bytes; the rest is read and dropped, so the hook never blocks on a full pipe."""
    kept = bytearray()
    while chunk := await stream.read(65536):
        kept += chunk[: max(0, OUTPUT_CAP - len(kept))]
    return bytes(kept)


def _verdict(event: str, code: int | None, out: str, err: str,
             answer: JsonObject | None) -> tuple[HookVerdict, str]:
    """What one run decided, and its outcome word for the record (`answer`: its output as JSON, if it is)."""
    if code is None:
        return HookVerdict(), "timeout"
    if code == 2:
        return HookVerdict(blocked=True, decision="deny", reason=_cap(err.strip() or out.strip())), "blocked"
    if code != 0:
        return HookVerdict(), "error"
    if answer is None:
        plain = out.strip() if event in ("UserPromptSubmit", "PreHandoff") else ""
        return HookVerdict(context=_cap(plain)), "ok"
    return _from_json(event, answer)


def _from_json(event: str, answer: JsonObject) -> tuple[HookVerdict, str]:
    """Claude Code's JSON output: the old `decision`/`reason`, `continue`, and `hookSpecificOutput`."""
    raw = answer.get("hookSpecificOutput")
    specific: JsonObject = raw if isinstance(raw, dict) else {}
    old = str(answer.get("decision") or "")
    decision = verdict_named(specific.get("permissionDecision") or {"approve": "allow", "block": "deny"}.get(old, old))
    reason = str(specific.get("permissionDecisionReason") or answer.get("reason") or answer.get("stopReason") or "")
    blocked = old == "block" or (answer.get("continue") is False and event != "Stop")  # a Stop hook's false: just stop
    context = str(specific.get("additionalContext") or "")
    verdict = HookVerdict(blocked, decision, _cap(reason), _cap(context))
    outcome = "blocked" if blocked else verdict.decision or "ok"
    return verdict, outcome


def _json(out: str) -> JsonObject | None:
    text = out.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
        return None
    return value if isinstance(value, dict) else None


def _cap(text: str) -> str:
    return text if len(text) <= REASON_CAP else text[:REASON_CAP] + " [cut]"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:200]


def _last_line(text: str) -> str:
    return _first_line("\n".join(reversed(text.splitlines())))


def _short(command: str, width: int = 60) -> str:
    one = " ".join(command.split())
    return one if len(one) <= width else one[: width - 3] + "..."
