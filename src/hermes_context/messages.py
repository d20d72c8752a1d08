"""Helpers for OpenAI chat-completions message lists.

Messages are plain dicts. Keys starting with ``_`` are in-process metadata and
never go on the wire (``to_wire``).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import InvalidMessagesError

VALID_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
# Roles that must not appear twice in a row (system/developer messages aside).
_ALTERNATING_ROLES = frozenset({"user", "assistant"})

# Reasoning block tags that thinking models (DeepSeek, QwQ, MiniMax, ...) emit.
THINK_TAGS = ("think", "thinking", "reasoning", "REASONING_SCRATCHPAD", "thought")
_TAG_ALT = "|".join(THINK_TAGS)
_CLOSED_BLOCK_RE = re.compile(rf"<({_TAG_ALT})\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
_UNTERMINATED_RE = re.compile(rf"<({_TAG_ALT})\b[^>]*>.*\Z", re.DOTALL | re.IGNORECASE)
_STRAY_TAG_RE = re.compile(rf"</?({_TAG_ALT})\b[^>]*>", re.IGNORECASE)


def strip_think_blocks(text: str | None) -> str:
    """Remove reasoning blocks: closed ones, an unterminated tail, and stray tags.

    Args:
        text: Model output, possibly holding ``<think>...</think>`` blocks.

    Returns:
        The text without reasoning, stripped of surrounding whitespace.
    """
    if not text:
        return ""
    out = _CLOSED_BLOCK_RE.sub("", text)
    out = _UNTERMINATED_RE.sub("", out)
    out = _STRAY_TAG_RE.sub("", out)
    return out.strip()


_LONE_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# JSON nested deeper than Python's recursion allows is treated as not JSON at all.
_JSON_ERRORS = (ValueError, RecursionError)


def json_loads_or_none(text: str | bytes) -> Any | None:
    """``json.loads`` that answers None for invalid or pathologically nested JSON.

    Untrusted text (tool output, a model's arguments, a tampered file) may nest
    thousands of levels deep; ``json.loads`` then raises ``RecursionError``,
    which is not a ``ValueError``.
    """
    try:
        return json.loads(text)
    except _JSON_ERRORS:
        return None


def without_lone_surrogates(text: str) -> str:
    """``text`` with unpaired surrogates (from escapes like ``\\ud83d``) replaced by U+FFFD.

    Such strings cannot be encoded as UTF-8: written to a file, a database or a
    terminal they raise ``UnicodeEncodeError``.
    """
    if text.isascii() or not _LONE_SURROGATE_RE.search(text):
        return text
    return _LONE_SURROGATE_RE.sub("\ufffd", text)


def to_wire(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return copies of ``messages`` without in-process ``_`` metadata keys."""
    return [
        {k: _copied(v) for k, v in m.items() if not (isinstance(k, str) and k.startswith("_"))}
        for m in messages
    ]


_IMMUTABLE = (str, int, float, bool, type(None))


def _copied(value: Any) -> Any:
    """A deep copy of JSON-like ``value``: dicts and lists copied, immutable scalars shared.

    ``copy.deepcopy`` took ~35 ms for 1,000 messages (its memo and dispatch);
    every model request copies the whole conversation.
    """
    if isinstance(value, _IMMUTABLE):
        return value
    if type(value) is dict:
        return {k: _copied(v) for k, v in value.items()}
    if type(value) is list:
        return [_copied(v) for v in value]
    return copy.deepcopy(value)


def content_text(content: Any) -> str:
    """Return the text of a message ``content`` (string or parts), images ignored."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif isinstance(part, str):
                texts.append(part)
        return "\n".join(texts)
    return str(content)


def tool_call_ids(message: Mapping[str, Any]) -> list[str]:
    """Ids of the tool calls an assistant message makes (empty when none)."""
    ids = []
    for call in message.get("tool_calls") or ():
        if isinstance(call, Mapping) and call.get("id"):
            ids.append(str(call["id"]))
    return ids


def is_summary(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` carries a compression summary."""
    return bool(message.get("_compressed_summary"))


def is_real_user(message: Mapping[str, Any]) -> bool:
    """A user message typed by a person, not a standalone compression summary."""
    if message.get("role") != "user":
        return False
    return not is_summary(message) or bool(message.get("_compressed_summary_merged"))


def _fail(index: int, rule: str, problem: str) -> InvalidMessagesError:
    return InvalidMessagesError(f"message {index}: {problem}", index=index, rule=rule)


def check_message_shape(i: int, m: Any) -> str:
    """Check one message's structure; return its role or raise ``InvalidMessagesError``."""
    if not isinstance(m, Mapping):
        raise _fail(i, "not_object", f"expected an object, got {type(m).__name__}")
    role = m.get("role")
    if role not in VALID_ROLES:
        raise _fail(i, "bad_role", f"role {role!r} is not one of {', '.join(sorted(VALID_ROLES))}")
    content = m.get("content")
    if content is not None and not isinstance(content, (str, list)):
        raise _fail(
            i,
            "bad_content",
            f"content must be a string, a list of parts or null, got {type(content).__name__}",
        )
    if isinstance(content, list):
        for j, part in enumerate(content):
            if not isinstance(part, Mapping) or "type" not in part:
                raise _fail(i, "bad_content", f"content part {j} must be an object with a 'type'")
    calls = m.get("tool_calls")
    if calls is not None:
        if role != "assistant":
            raise _fail(
                i, "bad_tool_calls", f"only assistant messages may carry tool_calls, not {role}"
            )
        if not isinstance(calls, list):
            raise _fail(i, "bad_tool_calls", "tool_calls must be a list")
        for j, call in enumerate(calls):
            fn = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(call, Mapping) or not call.get("id") or not isinstance(fn, Mapping):
                raise _fail(
                    i, "bad_tool_calls", f"tool call {j} needs an 'id' and a 'function' object"
                )
            if not isinstance(fn.get("name"), str) or not fn.get("name"):
                raise _fail(i, "bad_tool_calls", f"tool call {j} has no function name")
    if role == "tool" and not m.get("tool_call_id"):
        raise _fail(i, "missing_tool_call_id", "tool message has no tool_call_id")
    return role


def validate_messages(
    messages: Sequence[Mapping[str, Any]],
    *,
    allow_consecutive_roles: bool = False,
    allow_pending_tool_calls: bool = False,
) -> None:
    """Check that ``messages`` is a valid chat-completions message list.

    Rules: every message has a known role and well-formed content; every
    ``tool`` message answers a ``tool_calls`` id of the assistant message that
    opens its run of tool results; every tool call id is answered exactly once;
    no two adjacent messages (system aside) are both ``user`` or both
    ``assistant`` unless ``allow_consecutive_roles`` is set. With
    ``allow_pending_tool_calls`` the calls of the last assistant message may be
    unanswered when only its tool results follow it (a transcript saved while
    tools were running).

    Raises:
        InvalidMessagesError: naming the index and the rule broken.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise InvalidMessagesError("messages must be a list of message objects", rule="not_list")
    pending: dict[str, int] = {}  # call id -> index of the assistant message
    answered: set[str] = set()
    prev_role: str | None = None
    for i, m in enumerate(messages):
        role = check_message_shape(i, m)
        if role == "tool":
            cid = str(m["tool_call_id"])
            if cid in answered:
                raise _fail(i, "duplicate_tool_result", f"tool_call_id {cid!r} is answered twice")
            if cid not in pending:
                raise _fail(
                    i,
                    "orphan_tool_result",
                    f"tool result {cid!r} does not answer a tool call of the assistant "
                    "message right before its run of tool results",
                )
            answered.add(cid)
            del pending[cid]
            prev_role = role
            continue
        if pending:
            cid, owner = next(iter(pending.items()))
            raise _fail(owner, "unanswered_tool_call", f"tool call {cid!r} has no tool result")
        if role in ("system", "developer"):
            continue
        if not allow_consecutive_roles and role == prev_role and role in _ALTERNATING_ROLES:
            raise _fail(
                i, "consecutive_roles", f"two {role} messages in a row (merge them, or allow it)"
            )
        for cid in tool_call_ids(m):
            if cid in pending or cid in answered:
                raise _fail(i, "duplicate_tool_call_id", f"tool call id {cid!r} is used twice")
            pending[cid] = i
        prev_role = role
    if pending:
        cid, owner = next(iter(pending.items()))
        last_run = all(m.get("role") == "tool" for m in messages[owner + 1 :])
        if not (allow_pending_tool_calls and last_run):
            raise _fail(owner, "unanswered_tool_call", f"tool call {cid!r} has no tool result")
