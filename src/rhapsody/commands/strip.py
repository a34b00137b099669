"""`rhapsody strip FILE`: the micro-handoff strip applied offline, checkpoint at the end.

FILE is a Messages API request body or a rhapsody history file. The report (`--json`)
carries the contract's keys: before/after shapes, authored-text hashes, reduction, valid.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rhapsody.core.session import records as rec
from rhapsody.core.session.context import Conversation, build_request, measure, spec_from_record
from rhapsody.core.errors import HistoryError, InputError
from rhapsody.core.session.history import read_history
from rhapsody.core.session.messages import Message, Request
from rhapsody.core.session.strip import authored_sha256, authored_texts, shape, strip, validity_problems


def load_input(path: Path) -> tuple[str, Any]:
    """("request", body) or ("history", records); raises InputError with one line."""
    if path.exists() and not path.is_file():
        raise InputError(f"cannot read {path}: not a regular file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return "request", json.loads(text)
    except RecursionError:  # deeper than the parser goes: a malformed file, one line
        raise InputError(f"{path} is not a request body: nested deeper than the JSON parser goes") from None
    except ValueError as whole_error:
        first = text.lstrip().split("\n", 1)[0]
        try:
            head = json.loads(first)
        except (ValueError, RecursionError):
            raise InputError(f"{path} is not JSON: {whole_error}") from None
        if isinstance(head, dict) and "kind" in head:
            try:
                return "history", read_history(path, typed=True).typed
            except HistoryError as exc:
                raise InputError(str(exc)) from None
        raise InputError(f"{path} is neither a request body nor a history file: {whole_error}") from None


def strip_report(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(report, stripped request body) for FILE."""
    kind, data = load_input(path)
    if kind == "history":
        before_msgs, before_body, rebuild = _from_history(data, path)
    else:
        try:
            request = Request.from_api(data)
        except ValueError as exc:
            raise InputError(f"{path}: {exc}") from None
        before_msgs, before_body = request.messages, data

        def rebuild(messages: list[Message]) -> dict[str, Any]:
            return request.model_copy(update={"messages": messages}).to_api()

    after_msgs = strip(before_msgs)
    after_body = rebuild(after_msgs)
    before, after = shape(before_msgs, *measure(before_body)), shape(after_msgs, *measure(after_body))
    problems = validity_problems(after_msgs)
    report = {
        "source": kind,
        "before": before.model_dump(),
        "after": after.model_dump(),
        "authored_sha256_before": authored_sha256(before_msgs),
        "authored_sha256_after": authored_sha256(after_msgs),
        "authored_chars": sum(len(t) for t in authored_texts(before_msgs)),
        "reduction": round(1 - after.request_bytes / before.request_bytes, 4) if before.request_bytes else 0.0,
        "valid": not problems,
        "problems": problems,
    }
    return report, after_body


def _from_history(records: list[rec.Record], path: Path) -> Any:
    head = records[0] if records else None
    if not isinstance(head, rec.SessionStarted):
        raise InputError(f"{path} is not a rhapsody history file (no session record first)")
    spec = spec_from_record(head)
    try:
        conv = Conversation.of(records)
    except ValueError as exc:
        raise InputError(f"{path}: malformed message record: {str(exc).splitlines()[0]}") from None
    # The whole record, as if no seam had been taken: the report then shows everything the
    # strip removes (earlier seams are a subset of a strip at the end).
    messages = conv.view(0)
    if not messages:
        raise InputError(f"{path} holds no messages")
    return messages, build_request(spec, messages), lambda m: build_request(spec, m)


def format_report(report: dict[str, Any]) -> str:
    """The report as a few human lines."""
    b, a = report["before"], report["after"]
    same = "identical" if report["authored_sha256_before"] == report["authored_sha256_after"] else "CHANGED"
    return "\n".join([
        f"messages     {b['messages']:>9,} → {a['messages']:,}",
        f"text blocks  {b['text_blocks']:>9,} → {a['text_blocks']:,}",
        f"tool_use     {b['tool_use']:>9,} → {a['tool_use']:,}",
        f"tool_result  {b['tool_result']:>9,} → {a['tool_result']:,}",
        f"thinking     {b['thinking']:>9,} → {a['thinking']:,}",
        f"bytes        {b['request_bytes']:>9,} → {a['request_bytes']:,}  (reduction {report['reduction']:.1%})",
        f"est. tokens  {b['est_tokens']:>9,} → {a['est_tokens']:,}",
        f"authored text: {report['authored_chars']:,} chars, {same}; valid: {report['valid']}",
    ])


def main(path: Path, out: Path | None, as_json: bool) -> int:
    """Run the command; InputError propagates to the CLI's one-line handler."""
    report, body = strip_report(path)
    if out is not None:
        try:
            out.write_text(json.dumps(body, ensure_ascii=False, indent=1), encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write {out}: {exc.strerror or exc}") from None
    print(json.dumps(report) if as_json else format_report(report))
    return 0
