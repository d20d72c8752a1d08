"""Status events as one line for people (stderr of ``chat``/``run``, ``quiet_mode=False``)."""

from __future__ import annotations

import json
from typing import Any

from ..memory import visible

# Characters of a tool call's arguments shown on its progress line.
MAX_ARGUMENT_CHARS = 100


def describe_event(event: str, data: dict[str, Any]) -> str | None:
    """The line for a status event, or None for events people need not see.

    Text from the model or a tool goes through ``visible``: control
    characters and escapes are shown, never run by the terminal.
    """
    if event == "tool_call":
        args = data.get("arguments") or ""
        shown = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        if len(shown) > MAX_ARGUMENT_CHARS:
            shown = shown[: MAX_ARGUMENT_CHARS - 3] + "..."
        return f"  -> {visible(str(data.get('name')))}({visible(shown)})"
    if event == "progress_notice":  # compression.progress_notices
        return f"  [{visible(str(data.get('message')))}]"
    if event == "compaction_notice":
        return "  [" + compaction_notice(data) + "]"
    if event == "session_rotated":
        return f"  [continuing in session {data.get('session_id')}]"
    if event == "retry":
        return f"  [retrying in {data.get('delay', 0):g}s: {data.get('error_kind')}]"
    if event == "stream_reset":
        chars, kind = data.get("discarded_chars"), data.get("error_kind")
        return f"  [dropped {chars} characters of a broken answer ({kind})]"
    if event == "warning":
        return f"  warning: {visible(str(data.get('message')))}"
    return None


def compaction_notice(data: dict[str, Any]) -> str:
    """One line on a compaction: tokens before and after, and what went where."""
    parts = [
        f"compacted {data.get('tokens_before', 0):,} -> {data.get('tokens_after', 0):,} tokens"
    ]
    if data.get("summarised"):
        parts.append(f"{data['summarised']} messages summarised")
    if data.get("pruned"):
        parts.append(f"{data['pruned']} tool results shortened")
    if data.get("left_out"):
        parts.append(f"{data['left_out']} summary items left out for room")
    if data.get("shortened"):
        parts.append(f"{data['shortened']} statements condensed")
    return "; ".join(parts)
