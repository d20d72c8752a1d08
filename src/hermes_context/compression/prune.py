"""Stage 1: prune old tool output without an LLM (SPEC 3.3, four passes)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..credentials import redact_credentials, redact_value
from ..messages import content_text, json_loads_or_none, without_lone_surrogates
from ..tokens import estimate_message_tokens_rough
from .tool_summaries import summarize_tool_result

DUPLICATE_PLACEHOLDER = "[Duplicate tool output — same content as a more recent call]"
SCREENSHOT_PLACEHOLDER = "[screenshot removed to save context]"
# Tool results at least this long are worth deduplicating / summarising.
DEDUPE_MIN_CHARS = 200
MIN_PRUNE_CHARS = 200
# Tool-call arguments longer than this are re-serialised with long leaves cut.
ARGS_MAX_CHARS = 500
ARG_LEAF_MAX_CHARS = 200
ARG_TRUNCATED_SUFFIX = "...[truncated]"
# Pass 4 demotes tool output inside the tail once it exceeds budget x this factor.
TAIL_OVERFLOW_FACTOR = 1.5
# ...but the newest messages stay verbatim whatever their size.
TAIL_VERBATIM_LAST = 3
# The tail never holds fewer messages than min(protect_last_n, this).
MAX_TAIL_MESSAGE_FLOOR = 8

_SUMMARY_LINE_RE = re.compile(r"^\[[\w.:-]+\] ")
_SUMMARY_LINE_MAX = 400


@dataclass
class PruneOutcome:
    """Messages after pruning, tokens reclaimed, and which indices changed."""

    messages: list[dict[str, Any]]
    reclaimed: int
    pruned: set[int] = field(default_factory=set)
    delta: int = 0  # tokens after minus before (negative when pruning saved tokens)


def tail_start_by_budget(messages: Sequence[dict[str, Any]], budget: int, floor: int) -> int:
    """Index where the tail starts, walking back from the end within ``budget`` tokens.

    At least ``floor`` messages (when there are that many) are always in the tail.
    """
    used = 0
    start = len(messages)
    for i in range(len(messages) - 1, -1, -1):
        cost = estimate_message_tokens_rough(messages[i])
        if len(messages) - i > floor and used + cost > budget:
            break
        used += cost
        start = i
    return start


def _call_index(messages: Sequence[dict[str, Any]]) -> dict[str, tuple[str, Any]]:
    index: dict[str, tuple[str, Any]] = {}
    for m in messages:
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            index[str(call.get("id"))] = (str(fn.get("name") or "tool"), fn.get("arguments"))
    return index


def _has_image(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") in ("image_url", "image", "input_image")
        for p in content
    )


def _summarised_content(message: dict[str, Any], calls: dict[str, tuple[str, Any]]) -> str:
    name, args = calls.get(str(message.get("tool_call_id")), (message.get("name") or "tool", {}))
    # The line quotes the arguments (clipped: redacted before, as a cut could leave a
    # credential too short to recognise) and only counts the output (lines, characters,
    # matches, the exit code), so the output itself needs no redaction; the line is
    # redacted again, cheaply, in case a summariser ever quotes it.
    line = redact_credentials(
        summarize_tool_result(name, redact_value(args), message.get("content"))
    )
    if _has_image(message.get("content")):
        line += "\n" + SCREENSHOT_PLACEHOLDER
    return line


def is_prune_placeholder(text: str) -> bool:
    """Whether ``text`` is already a prune product (so pruning is idempotent)."""
    text = text.removesuffix("\n" + SCREENSHOT_PLACEHOLDER)
    if text == DUPLICATE_PLACEHOLDER:
        return True
    return len(text) < _SUMMARY_LINE_MAX and "\n" not in text and bool(_SUMMARY_LINE_RE.match(text))


def _dedupe(out: list[dict[str, Any]], pruned: set[int], min_chars: int) -> None:
    seen: set[str] = set()
    for i in range(len(out) - 1, -1, -1):
        m = out[i]
        if m.get("role") != "tool":
            continue
        text = content_text(m.get("content"))
        if len(text) < min_chars:
            continue
        if text in seen:
            out[i] = {**m, "content": DUPLICATE_PLACEHOLDER}
            pruned.add(i)
        else:
            seen.add(text)


def _summarise_old(
    out: list[dict[str, Any]], pruned: set[int], end: int, min_chars: int, calls: dict
) -> None:
    for i in range(end):
        m = out[i]
        if m.get("role") != "tool":
            continue
        text = content_text(m.get("content"))
        if len(text) <= min_chars and not _has_image(m.get("content")):
            continue
        if is_prune_placeholder(text) and not _has_image(m.get("content")):
            continue
        out[i] = {**m, "content": _summarised_content(m, calls)}
        pruned.add(i)


def _truncate_leaves(value: Any) -> Any:
    if isinstance(value, str) and len(value) > ARG_LEAF_MAX_CHARS:
        return redact_credentials(value)[:ARG_LEAF_MAX_CHARS] + ARG_TRUNCATED_SUFFIX
    if isinstance(value, dict):
        return {k: _truncate_leaves(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_truncate_leaves(v) for v in value]
    return value


def _shrink_arguments(args: Any) -> Any:
    if not isinstance(args, str) or len(args) <= ARGS_MAX_CHARS:
        return args
    parsed = json_loads_or_none(args)
    if parsed is None:
        return args  # not JSON (or nested too deep): leave it exactly as the model wrote it
    shrunk = json.dumps(_truncate_leaves(parsed), ensure_ascii=False)
    if without_lone_surrogates(shrunk) != shrunk:
        shrunk = json.dumps(_truncate_leaves(parsed))  # keep escapes that UTF-8 cannot carry
    return shrunk if len(shrunk) < len(args) else args


def _shrink_calls(out: list[dict[str, Any]], pruned: set[int], end: int) -> None:
    for i in range(end):
        m = out[i]
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            continue
        new_calls = []
        changed = False
        for call in m["tool_calls"]:
            fn = call.get("function") or {}
            shrunk = _shrink_arguments(fn.get("arguments"))
            if shrunk is not fn.get("arguments"):
                call = {**call, "function": {**fn, "arguments": shrunk}}
                changed = True
            new_calls.append(call)
        if changed:
            out[i] = {**m, "tool_calls": new_calls}
            pruned.add(i)


def _demote_tail(
    out: list[dict[str, Any]], pruned: set[int], start: int, budget: int, calls: dict
) -> None:
    limit = int(budget * TAIL_OVERFLOW_FACTOR)
    used = sum(estimate_message_tokens_rough(m) for m in out[start:])
    if used <= limit:
        return
    last_kept = max(start, len(out) - TAIL_VERBATIM_LAST)
    bulky = [
        i
        for i in range(start, last_kept)
        if out[i].get("role") == "tool"
        and len(content_text(out[i].get("content"))) > MIN_PRUNE_CHARS
    ]
    for i in sorted(bulky, key=lambda j: -estimate_message_tokens_rough(out[j])):
        if used <= limit:
            break
        before = estimate_message_tokens_rough(out[i])
        out[i] = {**out[i], "content": _summarised_content(out[i], calls)}
        pruned.add(i)
        used -= before - estimate_message_tokens_rough(out[i])


def prune_messages(
    messages: Sequence[dict[str, Any]],
    *,
    tail_budget: int,
    tail_floor: int,
    min_prune_chars: int = MIN_PRUNE_CHARS,
    min_result_chars: int = 0,
    demote_tail: bool = True,
) -> PruneOutcome:
    """Run the prune passes and return a new list (the input is untouched).

    Args:
        messages: The conversation.
        tail_budget: Token budget of the protected tail.
        tail_floor: Minimum number of messages in the protected tail.
        min_prune_chars: Results longer than this outside the tail are summarised.
        min_result_chars: Only results at least this long are touched (proactive prune).
        demote_tail: Run pass 4 (bulky output inside an oversized tail).
    """
    out = list(messages)  # changed messages are replaced by new dicts, never edited
    pruned: set[int] = set()
    calls = _call_index(out)
    tail_start = tail_start_by_budget(out, tail_budget, tail_floor)
    _dedupe(out, pruned, max(DEDUPE_MIN_CHARS, min_result_chars))
    _summarise_old(out, pruned, tail_start, max(min_prune_chars, min_result_chars), calls)
    _shrink_calls(out, pruned, tail_start)
    if demote_tail:
        _demote_tail(out, pruned, tail_start, tail_budget, calls)
    before = sum(estimate_message_tokens_rough(messages[i]) for i in pruned)
    after = sum(estimate_message_tokens_rough(out[i]) for i in pruned)
    return PruneOutcome(out, max(0, before - after), pruned, after - before)
