"""SQL over one connection: the building blocks ``SessionDB`` puts in transactions.

Nothing here starts or ends a transaction; the caller (``SessionDB``) does.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import StoreError
from .dialect import dialect_of
from .errors import SessionNotFoundError
from .rows import (
    INSERT_COLUMNS,
    MESSAGE_COLUMNS,
    is_storable_text,
    message_to_row,
    row_to_message,
    tool_names_of,
)
from .views import MAX_LINEAGE_DEPTH, ORDER, ORDER_DESC

SESSION_COLUMNS = (
    "id",
    "parent_session_id",
    "root_session_id",
    "source",
    "model",
    "title",
    "user_id",
    "started_at",
    "ended_at",
    "end_reason",
    "message_count",
    "tool_call_count",
    "compression_count",
    "compressor_state",
    # Hermes's, when its session carries them (None otherwise).
    "system_prompt",
    "input_tokens",
    "output_tokens",
)
SESSION_SELECT = f"SELECT {', '.join(SESSION_COLUMNS)} FROM hc_sessions"
_INSERT_MESSAGE = (
    f"INSERT INTO messages ({', '.join(INSERT_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(INSERT_COLUMNS))})"
)
# Columns of a message record (``get_message_records``), before the message columns.
RECORD_COLUMNS = (
    "id",
    "session_id",
    "seq",
    "timestamp",
    "token_estimate",
    "active",
    "compacted",
    "is_summary",
    "tool_name",
    "compaction_id",
)
RECORD_SELECT = (
    f"SELECT {', '.join('m.' + c for c in RECORD_COLUMNS + MESSAGE_COLUMNS)} FROM hc_messages m"
)
# Largest rowid / integer SQLite stores; bigger Python ints overflow when bound.
MAX_ID = 2**63 - 1
# Integers up to this size are shown whole in error messages (128 bits: 39 digits).
_SHOWN_BITS = 128
# The number a continued conversation's title ends with (" #2").
_NUMBERED_TITLE_RE = re.compile(r" #\d+$")
# How much earlier than a session's first message a prepended one is timed.
PREPEND_GAP_SECONDS = 0.001
# How many messages one ``executemany`` gets while importing, between progress calls.
IMPORT_CHUNK = 500


def new_session_id() -> str:
    """A sortable, unique session id: ``YYYYmmdd_HHMMSS_<8 hex>`` (UTC)."""
    return time.strftime("%Y%m%d_%H%M%S", time.gmtime()) + "_" + uuid.uuid4().hex[:8]


def session_to_dict(row: Sequence[Any]) -> dict[str, Any]:
    """A sessions row as a plain dict; the compressor state parsed from JSON."""
    data = dict(zip(SESSION_COLUMNS, row, strict=True))
    state = data["compressor_state"]
    data["compressor_state"] = json.loads(state) if state else None
    return data


def record_to_dict(row: Sequence[Any]) -> dict[str, Any]:
    """A ``RECORD_SELECT`` row as a record: ids, flags and the message itself."""
    n = len(RECORD_COLUMNS)
    data = dict(zip(RECORD_COLUMNS, row[:n], strict=True))
    for flag in ("active", "compacted", "is_summary"):
        data[flag] = bool(data[flag])
    data["message"] = row_to_message(row[n:])
    return data


def fetch_session(conn: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    """The session row as a dict, or None."""
    if not isinstance(session_id, str) or not is_storable_text(session_id):
        return None  # no stored id is like that (and binding it would raise)
    row = conn.execute(f"{SESSION_SELECT} WHERE id = ?", (session_id,)).fetchone()
    return session_to_dict(row) if row else None


def require_session(
    conn: sqlite3.Connection,
    session_id: str,
    *,
    user_id: str | None = None,
    path: str | None = None,
) -> dict[str, Any]:
    """The session row; missing, or owned by another user than ``user_id``, is not found."""
    session = fetch_session(conn, session_id)
    if session is None or (user_id is not None and session["user_id"] != user_id):
        raise SessionNotFoundError(session_id, path=path)
    return session


def describe(value: Any) -> str:
    """``repr(value)`` for an error message, short even for a 5,000-digit integer."""
    if isinstance(value, int) and value.bit_length() > _SHOWN_BITS:
        # repr() of a huge int is slow, and refused past 4,300 digits.
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_integer(value: Any, name: str, low: int, high: int = MAX_ID) -> int:
    """An integer argument bound for SQLite: ``low`` to ``high`` (at most 2**63-1).

    Raises:
        ValueError: not an integer (bools are not), or out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        upper = "2**63-1" if high == MAX_ID else str(high)
        raise ValueError(f"{name} must be an integer from {low} to {upper}, got {describe(value)}")
    return value


def check_limit(limit: Any) -> int:
    """A result limit: a positive integer (SQLite reads a negative LIMIT as "no limit")."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_ID:
        raise ValueError(f"limit must be a positive integer up to 2**63-1, got {describe(limit)}")
    return limit


def _check_session_text(fields: Mapping[str, Any], path: str | None) -> None:
    for name, value in fields.items():
        if value is not None and not isinstance(value, str):
            raise StoreError(f"{name} must be a string, got {describe(value)}", path=path)
        if isinstance(value, str) and not is_storable_text(value):
            raise StoreError(
                f"{name} {value!r} holds a lone surrogate, which is not valid Unicode text and "
                "cannot be stored; pass valid text",
                path=path,
            )


def owned_by(session: dict[str, Any] | None, user_id: str | None) -> bool:
    """Whether ``user_id`` may see ``session`` (no user given: everyone may)."""
    return session is not None and (user_id is None or session["user_id"] == user_id)


# The sessions of the lineage whose root is the first parameter: found down the
# parent links (an index), where the root column of a session another program
# wrote is derived and cannot be looked up by index.
LINEAGE = (
    "WITH RECURSIVE lineage(id, depth) AS (SELECT ?, 0 UNION ALL "
    "SELECT s.id, l.depth + 1 FROM main.sessions s JOIN lineage l ON s.parent_session_id = l.id "
    f"WHERE l.depth < {MAX_LINEAGE_DEPTH})"
)


def visible_root(conn: sqlite3.Connection, root_session_id: str, user_id: str | None) -> str:
    """The lineage root as ``user_id`` may see it.

    A child may be created under a parent without a user, so one lineage can
    hold several users' sessions; a user then sees their own oldest session
    of it as its root, never another user's (or an unowned) one.
    """
    if user_id is None:
        return root_session_id
    row = conn.execute(
        f"{LINEAGE} SELECT id FROM hc_sessions WHERE id IN (SELECT id FROM lineage) "
        "AND user_id = ? ORDER BY started_at, rowid LIMIT 1",
        (root_session_id, user_id),
    ).fetchone()
    return row[0] if row else root_session_id


def list_sessions(
    conn: sqlite3.Connection,
    *,
    limit: int,
    source: str | None = None,
    user_id: str | None = None,
    exclude: str | None = None,
    oldest_first: bool = False,
) -> list[dict[str, Any]]:
    """Sessions, newest first (or oldest), filtered by source, user and one excluded id."""
    check_limit(limit)
    where, args = [], []
    for column, value in (("source", source), ("user_id", user_id)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    if exclude is not None:
        where.append("id != ?")
        args.append(exclude)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    order = "ASC" if oldest_first else "DESC"
    sql = f"{SESSION_SELECT}{clause} ORDER BY started_at {order}, rowid {order} LIMIT ?"
    return [session_to_dict(r) for r in conn.execute(sql, (*args, limit))]


def insert_session(
    conn: sqlite3.Connection,
    session_id: str | None,
    *,
    source: str,
    model: str | None,
    parent_session_id: str | None,
    title: str | None,
    user_id: str | None,
    path: str | None = None,
) -> str:
    """Insert a session row; a child inherits its parent's lineage root and user."""
    _check_session_text(
        {"session id": session_id, "source": source, "model": model, "title": title,
         "user_id": user_id},
        path,
    )  # fmt: skip
    sid = session_id or new_session_id()
    root = sid
    if parent_session_id is not None:
        parent = require_session(conn, parent_session_id, path=path)
        root = parent["root_session_id"]
        if user_id is None:
            user_id = parent["user_id"]
        elif parent["user_id"] not in (None, user_id):
            raise StoreError(
                f"session {parent_session_id!r} belongs to another user; a child session "
                "must have the same user_id as its parent",
                path=path,
            )
    if conn.execute("SELECT 1 FROM hc_sessions WHERE id = ?", (sid,)).fetchone():
        raise StoreError(f"session {sid!r} already exists; pass another id or none", path=path)
    try:
        conn.execute(
            "INSERT INTO sessions (id, parent_session_id, root_session_id, source, model, title,"
            " user_id, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (sid, parent_session_id, root, source, model, free_title(conn, title), user_id,
             time.time()),
        )  # fmt: skip
    except sqlite3.IntegrityError as exc:
        raise StoreError(
            f"session {sid!r} already exists; pass another id or none", path=path
        ) from exc
    return sid


def free_title(conn: sqlite3.Connection, title: str | None) -> str | None:
    """``title``, or when a session has it already, the first free ``<title> #N`` (N >= 2).

    Titles name conversations (Hermes resumes one by title and refuses
    duplicates), so they are kept unique: a child carrying on its parent gets
    ``#2``, as Hermes names it.
    """
    if title is None or not _title_taken(conn, title):
        return title
    base = _NUMBERED_TITLE_RE.sub("", title) or title
    number = 2
    while _title_taken(conn, f"{base} #{number}"):
        number += 1
    return f"{base} #{number}"


def _title_taken(conn: sqlite3.Connection, title: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM hc_sessions WHERE title = ?", (title,)).fetchone() is not None
    )


def _known_tool_names(conn: sqlite3.Connection, session_id: str) -> dict[str, str]:
    """Tool call names of the session's latest assistant message that made calls."""
    row = conn.execute(
        "SELECT m.tool_calls FROM hc_messages m WHERE m.session_id = ? "
        f"AND m.tool_calls IS NOT NULL ORDER BY {ORDER_DESC} LIMIT 1",
        (session_id,),
    ).fetchone()
    return tool_names_of({"tool_calls": json.loads(row[0])}) if row else {}


def next_seq(conn: sqlite3.Connection, session_id: str) -> int:
    """The position after the last row of the session (compacted rows included).

    Rows another program appended (no position yet) get theirs first, after
    ours, in their own order: what is appended now comes after them.
    """
    last = conn.execute("SELECT max(seq) FROM messages WHERE session_id = ?", (session_id,))
    base = last.fetchone()[0]
    base = 0 if base is None else int(base) + 1
    unplaced = conn.execute(
        f"SELECT m.id FROM messages m WHERE m.session_id = ? AND m.seq IS NULL ORDER BY {ORDER}",
        (session_id,),
    ).fetchall()
    conn.executemany(
        "UPDATE messages SET seq = ? WHERE id = ?",
        [(base + i, row[0]) for i, row in enumerate(unplaced)],
    )
    return base + len(unplaced)


def build_rows(
    conn: sqlite3.Connection,
    session_id: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    start_seq: int,
    tool_names: Mapping[str, str] | None = None,
    now: float | None = None,
) -> list[tuple[Any, ...]]:
    """Rows for ``messages`` (validated), tool results named after their calls.

    ``tool_names`` (call id -> name) seeds the lookup; otherwise a tool result
    whose call is not in ``messages`` is named from the session's latest call.
    ``now`` is the time recorded for messages that carry none (default: now).
    """
    names: dict[str, str] = dict(tool_names or {})
    looked_up = tool_names is not None
    now = time.time() if now is None else now
    dialect = dialect_of(conn)
    storable = dialect.storable_text if dialect is not None else is_storable_text
    rows = []
    for i, message in enumerate(messages):
        if isinstance(message, Mapping):
            call_id = str(message.get("tool_call_id"))
            if message.get("role") == "tool" and not looked_up and call_id not in names:
                names = {**_known_tool_names(conn, session_id), **names}
                looked_up = True
            names.update(tool_names_of(message))
        rows.append(
            message_to_row(
                message,
                i,
                session_id=session_id,
                seq=start_seq + i,
                tool_names=names,
                now=now,
                storable=storable,
            )
        )
    return rows


def insert_rows(conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> list[int]:
    """Insert message rows; return their ids (contiguous: the write lock is held)."""
    if not rows:
        return []
    dialect = dialect_of(conn)
    if dialect is not None:
        return dialect.insert_message_rows(rows)
    found = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
    first = (found[0] if found else 0) + 1
    conn.executemany(_INSERT_MESSAGE, rows)
    return list(range(first, first + len(rows)))


def append(
    conn: sqlite3.Connection,
    session_id: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    progress: Callable[[int], None] | None = None,
) -> list[int]:
    """Append messages at the end of a session and update its counters."""
    rows = build_rows(conn, session_id, messages, start_seq=next_seq(conn, session_id))
    ids: list[int] = []
    step = IMPORT_CHUNK if progress else max(len(rows), 1)
    for start in range(0, len(rows), step):
        ids.extend(insert_rows(conn, rows[start : start + step]))
        if progress:
            progress(len(ids))
    _count(conn, session_id, messages)
    return ids


def prepend(
    conn: sqlite3.Connection, session_id: str, messages: Sequence[Mapping[str, Any]]
) -> list[int]:
    """Store messages before the first message of a session and update its counters.

    They are placed (and timed, a millisecond earlier) before the first
    message, so programs that order a session by time agree with ours.
    """
    next_seq(conn, session_id)  # every row gets its position first
    first_seq, first_time = conn.execute(
        "SELECT min(seq), min(timestamp) FROM messages WHERE session_id = ?", (session_id,)
    ).fetchone()
    start = (first_seq if first_seq is not None else 0) - len(messages)
    when = first_time - PREPEND_GAP_SECONDS if first_time is not None else None
    rows = build_rows(conn, session_id, messages, start_seq=start, now=when)
    ids = insert_rows(conn, rows)
    _count(conn, session_id, messages)
    return ids


def _count(conn: sqlite3.Connection, session_id: str, added: Sequence[Mapping[str, Any]]) -> None:
    """Add stored messages (and their tool calls) to the session's counters."""
    calls = sum(len(m["tool_calls"]) for m in added if isinstance(m.get("tool_calls"), list))
    conn.execute(
        "UPDATE sessions SET message_count = coalesce(message_count, 0) + ?, "
        "tool_call_count = coalesce(tool_call_count, 0) + ? WHERE id = ?",
        (len(added), calls, session_id),
    )


def refresh_counts(conn: sqlite3.Connection, session_id: str) -> None:
    """Recount a session's live messages and tool calls (after a compaction)."""
    conn.execute(
        "UPDATE sessions SET "
        "message_count = (SELECT count(*) FROM hc_messages WHERE session_id = ?1 AND active = 1), "
        "tool_call_count = (SELECT coalesce(sum(json_array_length(tool_calls)), 0) "
        "FROM hc_messages WHERE session_id = ?1 AND active = 1 AND tool_calls LIKE '[%') "
        "WHERE id = ?1",
        (session_id,),
    )


def load_records(
    conn: sqlite3.Connection, session_id: str, *, include_compacted: bool = False
) -> list[dict[str, Any]]:
    """A session's message records: live ones in order, or every row in write order."""
    if include_compacted:
        sql = f"{RECORD_SELECT} WHERE m.session_id = ? ORDER BY m.id"
    else:
        sql = f"{RECORD_SELECT} WHERE m.session_id = ? AND m.active = 1 ORDER BY {ORDER}"
    return [record_to_dict(r) for r in conn.execute(sql, (session_id,))]


def load_messages(
    conn: sqlite3.Connection, session_id: str, *, include_compacted: bool = False
) -> list[dict[str, Any]]:
    """A session's messages as the dicts that were stored."""
    cols = ", ".join("m." + c for c in MESSAGE_COLUMNS)
    if include_compacted:
        sql = f"SELECT {cols} FROM hc_messages m WHERE m.session_id = ? ORDER BY m.id"
    else:
        sql = (
            f"SELECT {cols} FROM hc_messages m WHERE m.session_id = ? AND m.active = 1 "
            f"ORDER BY {ORDER}"
        )
    return [row_to_message(r) for r in conn.execute(sql, (session_id,))]


def subtree(conn: sqlite3.Connection, session_id: str) -> list[str]:
    """The session and all its descendants, children before their parents."""
    rows = conn.execute(
        "WITH RECURSIVE t(id, depth) AS (SELECT ?, 0 UNION ALL "
        "SELECT s.id, t.depth + 1 FROM hc_sessions s JOIN t ON s.parent_session_id = t.id "
        f"WHERE t.depth < {MAX_LINEAGE_DEPTH}) "
        "SELECT id FROM t ORDER BY depth DESC",
        (session_id,),
    )
    return [r[0] for r in rows]


def delete_sessions(conn: sqlite3.Connection, session_ids: Sequence[str]) -> int:
    """Delete sessions (children first) with their messages; return messages deleted."""
    deleted = 0
    for sid in session_ids:
        deleted += conn.execute("DELETE FROM messages WHERE session_id = ?", (sid,)).rowcount
        conn.execute("DELETE FROM compactions WHERE session_id = ?", (sid,))
        conn.execute("DELETE FROM sessions WHERE id = ?", (sid,))
    return deleted


def ancestors(conn: sqlite3.Connection, session_id: str) -> list[str]:
    """The session and the sessions it was rotated from, nearest first."""
    rows = conn.execute(
        "WITH RECURSIVE t(id, parent, depth) AS ("
        "SELECT id, parent_session_id, 0 FROM hc_sessions WHERE id = ? UNION ALL "
        "SELECT s.id, s.parent_session_id, t.depth + 1 FROM hc_sessions s JOIN t ON s.id = t.parent "
        f"WHERE t.depth < {MAX_LINEAGE_DEPTH})"
        " SELECT id FROM t ORDER BY depth",
        (session_id,),
    )
    return [r[0] for r in rows]
