"""What the agent adds to a request on the wire, and helpers for its persistence.

The stored conversation stays as it was; these are applied to the copy sent:
recall hints on stored summaries, the provider's recall block, the
pre-compaction notice. Also: reading a window size from a provider's
"context length exceeded" message, and a prune as a persistable result.
"""

from __future__ import annotations

import re
from typing import Any

from ..compression import SUMMARY_END_MARKER, SUMMARY_KEY, CompressionResult
from ..tokens import estimate_messages_tokens_rough

NOTICE_TEXT = (
    "[System note, not from the user: this conversation is at {percent:.0%} of the size "
    "that triggers compaction. Older turns will soon be replaced by a summary. If you "
    "learned durable facts worth keeping beyond this session, save them with the memory "
    "tool now; then carry on with the task.]"
)
RECALL_HINT = (
    "(This summary is stored as message {id}; session_recall with summary_message_id={id} "
    "returns the original messages it replaced.)"
)
# "maximum context length is 8192 tokens", "context window of 32,768 tokens"...
_WINDOW_RE = re.compile(r"(?:context|window|maximum)[^0-9]{0,40}?(\d[\d,]{2,})\s*tokens", re.I)


def with_recall_block(messages: list[dict[str, Any]], block: str) -> list[dict[str, Any]]:
    """The provider's recall appended to this turn's user message, on the wire only."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "user" and not m.get(SUMMARY_KEY) and isinstance(m.get("content"), str):
            out = list(messages)
            out[i] = {**m, "content": f"{m['content']}\n\n{block}"}
            return out
    return messages


def joined_runs(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two user (or two plain assistant) messages in a row joined into one, on the wire.

    A history written by another program may hold them (Hermes opens a
    session it split off with a summary and then the user's message, both
    ``user``); providers that require turns to alternate refuse that. The
    text is joined with a blank line; the stored conversation is unchanged.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        prev = out[-1] if out else None
        if prev is not None and _joinable(prev, m):
            out[-1] = {**prev, "content": f"{prev['content']}\n\n{m['content']}"}
        else:
            out.append(m)
    return out


def _joinable(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (
        a.get("role") == b.get("role")
        and a.get("role") in ("user", "assistant")
        and not a.get("tool_calls")
        and not b.get("tool_calls")
        and isinstance(a.get("content"), str)
        and isinstance(b.get("content"), str)
    )


def window_from_error(text: str) -> int | None:
    match = _WINDOW_RE.search(text)
    return int(match.group(1).replace(",", "")) if match else None


def with_recall_hint(message: dict[str, Any], message_id: int | None) -> dict[str, Any]:
    content = message.get("content")
    if not isinstance(content, str) or message_id is None:
        return message
    hint = RECALL_HINT.format(id=message_id)
    if SUMMARY_END_MARKER in content:
        content = content.replace(SUMMARY_END_MARKER, f"{hint}\n\n{SUMMARY_END_MARKER}", 1)
    else:
        content = f"{content}\n\n{hint}"
    return {**message, "content": content}


def prune_outcome(
    before: list[dict[str, Any]], pruned: list[dict[str, Any]], reclaimed: int
) -> CompressionResult:
    """A prune as a ``CompressionResult`` the session store can persist losslessly."""
    tokens_before = estimate_messages_tokens_rough(before)
    result = CompressionResult(
        messages=pruned,
        tokens_before=tokens_before,
        tokens_after=tokens_before - reclaimed,
        lineage=[[i] for i in range(len(pruned))],
    )
    result.report.pruned = [
        i for i, (a, b) in enumerate(zip(before, pruned, strict=True)) if a != b
    ]
    result.report.summariser = "none"
    return result
