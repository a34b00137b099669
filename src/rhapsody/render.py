"""Plain-text descriptions of loop events, shared by headless, plain and TUI front ends."""

from __future__ import annotations

import json
from typing import Any, TextIO

from rhapsody.core import events as ev
from rhapsody.core.messages import ToolUseBlock

KEY_ARGUMENTS = ("command", "path", "pattern", "query", "id", "action")


def key_argument(call: ToolUseBlock) -> str:
    """The one argument that says what a call does (command, path, pattern...)."""
    args: Any = call.input if isinstance(call.input, dict) else {}
    if call.name == "micro_handoff":
        return f"field note ({len(args.get('done') or [])} done, {len(args.get('open') or [])} open)"
    for key in KEY_ARGUMENTS:
        if key in args and args[key]:
            return one_line(str(args[key]), 90)
    return one_line(json.dumps(args, ensure_ascii=False), 90) if args else ""


def one_line(text: str, width: int) -> str:
    """`text` on one line, cut to `width` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def tool_line(call: ToolUseBlock, is_error: bool, duration_ms: int, exit_code: int | None) -> str:
    """One compact line per tool call: tool, key argument, outcome, duration."""
    if exit_code is not None:
        outcome = f"exit {exit_code}"
    else:
        outcome = "error" if is_error else "ok"
    return f"{call.name} {key_argument(call)} → {outcome} ({duration_ms / 1000:.1f} s)"


def seam_line(record: dict[str, Any]) -> str:
    """The before → after figures of a seam."""
    before, after = record["before"], record["after"]
    reduction = 1 - after["request_bytes"] / before["request_bytes"] if before["request_bytes"] else 0.0
    return (
        f"seam {record['seam']}: {before['request_bytes']:,} → {after['request_bytes']:,} bytes "
        f"(−{reduction:.0%}), ~{before['est_tokens']:,} → ~{after['est_tokens']:,} tokens, "
        f"tool calls {before['tool_use']} → {after['tool_use']}, text blocks kept {after['text_blocks']}"
    )


def dollars(amount: float) -> str:
    """An amount in USD: cents from a dollar up, four decimals below."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:.4f}"


def limit_line(event: ev.LimitsExceeded) -> str:
    """Which limit ended the turn, and how to go on."""
    if event.limit == "max_cost_usd":
        reached = f"{dollars(event.value)} spent of max_cost_usd {dollars(event.maximum)}"
    else:
        reached = f"{event.value:.0f} requests this turn, max_steps_per_turn {event.maximum:.0f}"
    return f"limit reached: {reached}; the turn stopped (raise the setting to go on)"


def print_event(event: ev.Event, out: TextIO) -> None:
    """One event as the line-based front ends show it."""
    if isinstance(event, ev.TextDelta):
        out.write(event.text)
    elif isinstance(event, ev.BlockStopped) and event.kind == "text":
        out.write("\n")
    elif isinstance(event, ev.ToolFinished):
        out.write(f"  ⏺ {tool_line(event.call, event.is_error, event.duration_ms, event.exit_code)}\n")
    elif isinstance(event, ev.NarrationViolation):
        out.write(f"  ✗ {event.call.name} not run: {event.words} words of narration, {event.required} required "
                  f"(violations: {event.total})\n")
    elif isinstance(event, ev.Retrying):
        asked = f" (server asked {event.asked:g} s)" if event.asked is not None and event.asked > event.delay else ""
        out.write(f"\n  ↻ retry {event.attempt} in {event.delay:.1f} s{asked}: {event.reason}\n")
    elif isinstance(event, ev.SeamCommitted):
        out.write(f"  ── {seam_line(event.record)}\n")
    elif isinstance(event, ev.ContextPruned):
        b, a = event.record["before"], event.record["after"]
        out.write(f"  ── rolling cut: {len(event.record['ids'])} calls out, {b['request_bytes']:,} → {a['request_bytes']:,} bytes\n")
    elif isinstance(event, ev.HandoffFailed):
        out.write(f"  ✗ handoff: {event.reason}\n")
    elif isinstance(event, ev.HintDelivered):
        out.write(f"  ✓ hints {', '.join(event.hint_ids)} delivered ({event.where})\n")
    elif isinstance(event, ev.LimitsExceeded):
        out.write(f"  ■ {limit_line(event)}\n")
    elif isinstance(event, ev.Notice):
        out.write(f"  ! {event.text}\n")
