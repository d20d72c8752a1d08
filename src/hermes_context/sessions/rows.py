"""Mapping between OpenAI message dicts and rows of the ``messages`` table.

A message is stored as its standard keys in their own columns (``role``,
``content`` as text or as JSON parts, ``tool_calls``, ``tool_call_id``) plus
every other key, ``_`` metadata included, as JSON in ``extra``; a key whose
value has an unexpected type also goes to ``extra``, and an unusual key order
is kept in ``key_order``. Rebuilding from those columns gives back exactly the
dict that went in, keys in the same order.

Text with a lone surrogate (``"\\ud800"`` decoded from JSON) is valid in Python
but cannot be bound to SQLite as UTF-8. Such a string is kept exactly all the
same: a standard key holding one goes to ``extra``, and JSON columns write the
surrogate as its ``\\uXXXX`` escape, which decodes back to the same string.
``tool_name``,
``timestamp``, ``token_estimate``, ``is_summary`` and ``search_text`` are
derived columns for queries and display only.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import InvalidMessagesError
from ..messages import VALID_ROLES, is_summary, without_lone_surrogates
from ..tokens import estimate_message_tokens_rough
from .fts import search_text_for

# Columns written for a message, in the order ``message_to_row`` returns them.
INSERT_COLUMNS = (
    "session_id",
    "seq",
    "role",
    "content",
    "content_parts",
    "tool_calls",
    "tool_call_id",
    "tool_name",
    "timestamp",
    "token_estimate",
    "is_summary",
    "extra",
    "key_order",
    "search_text",
)
# Columns read back to rebuild the message dict.
MESSAGE_COLUMNS = (
    "role",
    "content",
    "content_parts",
    "tool_calls",
    "tool_call_id",
    "extra",
    "key_order",
)
# The order ``row_to_message`` rebuilds the standard keys in.
_STANDARD_ORDER = ("role", "content", "tool_calls", "tool_call_id")
# Metadata keys whose numeric value is taken as the message's wall-clock time.
_TIMESTAMP_KEYS = ("timestamp", "_timestamp")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
# A high surrogate followed by a low one: JSON would read the two back as one character.
_SPLIT_PAIR_RE = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def is_storable_text(text: str) -> bool:
    """Whether SQLite can take ``text`` as it is (no lone surrogate)."""
    return text.isascii() or not _SURROGATE_RE.search(text)


def json_text(text: str) -> str:
    """JSON text safe to encode as UTF-8: each lone surrogate written as its ``\\uXXXX`` escape.

    A raw surrogate can only sit inside a JSON string, where the escape means
    the same character, so the text still decodes to the same value.
    """
    if is_storable_text(text):
        return text
    return _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _escape_surrogates(encoded: str, index: int, key: str) -> str:
    if not is_storable_text(encoded) and _SPLIT_PAIR_RE.search(encoded):
        raise InvalidMessagesError(
            f"message {index}: key {key!r} holds a surrogate pair as two separate characters, "
            "which cannot be stored exactly; join it into one character (or drop it) first",
            index=index,
            rule="not_unicode",
        )
    return json_text(encoded)


def _dumps(value: Any, index: int, key: str) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidMessagesError(
            f"message {index}: key {key!r} cannot be stored as JSON ({exc})",
            index=index,
            rule="not_json",
        ) from exc
    except RecursionError as exc:
        raise InvalidMessagesError(
            f"message {index}: key {key!r} is nested too deeply to be stored as JSON; "
            "flatten it or store it as a JSON string",
            index=index,
            rule="not_json",
        ) from exc
    return _escape_surrogates(text, index, key)


def _dumps_extra(extra: Mapping[str, Any], index: int) -> str:
    """``extra`` as JSON; a refusal names the message's own key, not ``extra``."""
    try:
        return _dumps(extra, index, "extra")
    except InvalidMessagesError:
        for key, value in extra.items():
            _dumps({key: value}, index, key)
        raise


def check_message(message: Any, index: int) -> None:
    """Refuse what cannot be a chat message: not a mapping, or no known role."""
    if not isinstance(message, Mapping):
        raise InvalidMessagesError(
            f"message {index}: expected an object, got {type(message).__name__}",
            index=index,
            rule="not_object",
        )
    role = message.get("role")
    if role not in VALID_ROLES:
        raise InvalidMessagesError(
            f"message {index}: role {role!r} is not one of {', '.join(sorted(VALID_ROLES))}",
            index=index,
            rule="bad_role",
        )
    for key in message:
        if not isinstance(key, str):
            raise InvalidMessagesError(
                f"message {index}: key {key!r} is not a string", index=index, rule="bad_key"
            )


def _timestamp(message: Mapping[str, Any], now: float) -> float:
    for key in _TIMESTAMP_KEYS:
        value = message.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                seconds = float(value)
            except OverflowError:  # an int too big for a float is no time either
                continue
            if math.isfinite(seconds):
                return seconds
    return now


def tool_names_of(message: Mapping[str, Any]) -> dict[str, str]:
    """Tool call id -> function name, for the calls an assistant message makes."""
    names: dict[str, str] = {}
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return names
    for call in calls:
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping) and call.get("id") and isinstance(fn.get("name"), str):
            names[str(call["id"])] = fn["name"]
    return names


def message_to_row(
    message: Mapping[str, Any],
    index: int,
    *,
    session_id: str,
    seq: int,
    tool_names: Mapping[str, str],
    now: float | None = None,
    storable: Callable[[str], bool] = is_storable_text,
) -> tuple[Any, ...]:
    """The ``INSERT_COLUMNS`` values for one message.

    Args:
        message: The OpenAI message dict (any extra keys are kept).
        index: Its position in the caller's list, for error messages.
        session_id: Session the row belongs to.
        seq: Its position in the session.
        tool_names: Tool call id -> function name, to name a tool result.
        now: Time to record when the message carries none.
        storable: Whether the database's text columns hold a string exactly
            (PostgreSQL's hold no NUL either); one that is not goes to ``extra``.
    """
    check_message(message, index)
    content = message.get("content")
    # A string SQLite cannot take goes to ``extra`` (JSON), which keeps it exactly.
    text = content if isinstance(content, str) and storable(content) else None
    parts = _dumps(content, index, "content") if isinstance(content, list) else None
    calls = message.get("tool_calls")
    calls_json = _dumps(calls, index, "tool_calls") if isinstance(calls, list) else None
    call_id = message.get("tool_call_id")
    call_id = call_id if isinstance(call_id, str) and storable(call_id) else None
    columns = {"role"}  # keys held by their own column; the rest goes to ``extra``
    if text is not None or parts is not None:
        columns.add("content")
    if calls_json is not None:
        columns.add("tool_calls")
    if call_id is not None:
        columns.add("tool_call_id")
    extra = {k: v for k, v in message.items() if k not in columns}
    tool_name = None
    if message["role"] == "tool":
        name = message.get("name")
        tool_name = name if isinstance(name, str) else tool_names.get(call_id or "")
        # Derived, for display and queries only: a lone surrogate may be replaced.
        tool_name = without_lone_surrogates(tool_name) if tool_name else tool_name
        if tool_name and not storable(tool_name):
            tool_name = tool_name.replace("\x00", "\ufffd")
    row = (
        session_id,
        seq,
        message["role"],
        text,
        parts,
        calls_json,
        call_id,
        tool_name,
        _timestamp(message, time.time() if now is None else now),
        estimate_message_tokens_rough(message),
        1 if is_summary(message) else 0,
        _dumps_extra(extra, index) if extra else None,
        _key_order(message, columns, index),
        search_text_for(message),
    )
    _check_storable(row, index, storable)
    return row


def _check_storable(
    row: tuple[Any, ...], index: int, storable: Callable[[str], bool] = is_storable_text
) -> None:
    """Fail before binding, not mid-insert, should any text column still hold a surrogate."""
    for value in row:
        if isinstance(value, str) and not storable(value):
            bad = _SURROGATE_RE.search(value)
            code = ord(bad.group()) if bad else 0
            raise InvalidMessagesError(
                f"message {index}: holds a lone surrogate (U+{code:04X}) in a column that "
                "cannot keep it; this is a bug in hermes-context, please report it",
                index=index,
                rule="not_unicode",
            )


def _key_order(message: Mapping[str, Any], columns: set[str], index: int) -> str | None:
    """The key order, when rebuilding would not give it back (NULL for the usual order)."""
    keys = list(message)
    rebuilt = [k for k in _STANDARD_ORDER if k in columns] + [k for k in keys if k not in columns]
    return None if keys == rebuilt else _dumps(keys, index, "key order")


def row_to_message(row: Sequence[Any]) -> dict[str, Any]:
    """Rebuild the message dict from the ``MESSAGE_COLUMNS`` values of a row."""
    role, content, parts, calls, call_id, extra, key_order = row[:7]
    message: dict[str, Any] = {"role": role}
    if content is not None:
        message["content"] = content
    elif parts is not None:
        message["content"] = json.loads(parts)
    if calls is not None:
        message["tool_calls"] = json.loads(calls)
    if call_id is not None:
        message["tool_call_id"] = call_id
    if extra is not None:
        message.update(json.loads(extra))
    if key_order is not None:
        message = {k: message[k] for k in json.loads(key_order)}
    return message


def canonical(message: Mapping[str, Any]) -> str:
    """A stable JSON form of a message, to tell whether two messages are the same."""
    return json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)
