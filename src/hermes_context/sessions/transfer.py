"""Copying one session, whole, from one session store to another (SQLite or PostgreSQL).

``read_copy`` takes everything stored of a session through the ``hc_`` views:
its row (lineage, user, titles, end reason, compressor state), every message
row (compacted originals and summaries included, with their flags), its
compactions and which rows each summary stands for. ``write_copy`` writes it
into another store *with the same ids*, so a summary still recalls its
originals, a child still points at its parent and a ``summary_message_id``
someone kept still works. Copying twice changes nothing: a session already
there with the same digest is left alone; one that differs, or an id another
session holds, is refused with ``StoreConflictError``.

Nothing here starts or ends a transaction: the store runs ``write_copy`` in
one write transaction, so a session lands whole or not at all.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import StoreConflictError
from .dialect import dialect_of
from .queries import SESSION_COLUMNS  # copied as they are (every store has them)
from .rows import (
    INSERT_COLUMNS,
    MESSAGE_COLUMNS,
    canonical,
    is_storable_text,
    message_to_row,
    row_to_message,
)
from .views import COMPACTION_COLUMNS as ALL_COMPACTION_COLUMNS
from .views import MAX_LINEAGE_DEPTH

# Message columns copied: the id, what ``append`` writes, and the compaction flags.
COPY_MESSAGE_COLUMNS = ("id", *INSERT_COLUMNS, "active", "compacted", "compaction_id")
# Compaction columns copied; ``child_session_id`` is set once the child is there.
COMPACTION_COLUMNS = tuple(c for c in ALL_COMPACTION_COLUMNS if c != "child_session_id")
# Message columns a digest counts besides the message itself (not the ones a store
# derives for display and search: token estimate, search text, tool name).
_DIGEST_COLUMNS = (
    "id",
    "session_id",
    "seq",
    "timestamp",
    "is_summary",
    "active",
    "compacted",
    "compaction_id",
)
# Ids looked up per query when checking that the target holds none of them.
_ID_CHUNK = 500
_MESSAGE_POSITION = {c: i for i, c in enumerate(COPY_MESSAGE_COLUMNS)}


@dataclass(frozen=True)
class SessionCopy:
    """Everything stored of one session, as ``read_copy`` found it.

    Attributes:
        session: The session row (``SESSION_COLUMNS``).
        messages: Every message row (``COPY_MESSAGE_COLUMNS``), in id order.
        compactions: Its compactions (``COMPACTION_COLUMNS``), in id order.
        sources: ``(message_id, position, source_id)`` of its summaries and stand-ins.
        rotated_from: Ids of the compactions (of its parent) that made this session.
    """

    session: dict[str, Any]
    messages: list[tuple[Any, ...]]
    compactions: list[tuple[Any, ...]]
    sources: list[tuple[int, int, int]]
    rotated_from: list[int]

    @property
    def session_id(self) -> str:
        return str(self.session["id"])

    def message(self, row: Sequence[Any]) -> dict[str, Any]:
        """The message dict a row of ``messages`` holds."""
        return row_to_message([row[_MESSAGE_POSITION[c]] for c in MESSAGE_COLUMNS])

    def digest(self) -> str:
        """SHA-256 of what the session holds, the same in any store that holds it.

        Messages count by their dicts, ids, positions, times and flags (not the
        columns a store derives for search), so a copy from SQLite to
        PostgreSQL has the digest of its original.
        """
        messages = [
            [*(row[_MESSAGE_POSITION[c]] for c in _DIGEST_COLUMNS), canonical(self.message(row))]
            for row in self.messages
        ]
        data = [self.session, messages, self.compactions, sorted(self.sources)]
        text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def all_session_ids(conn: sqlite3.Connection) -> list[str]:
    """Every session id, each parent before its children, else oldest first."""
    rows = conn.execute(
        "SELECT id, parent_session_id FROM hc_sessions ORDER BY started_at, rowid"
    ).fetchall()
    parents = {sid: parent for sid, parent in rows}
    ordered: list[str] = []
    seen: set[str] = set()
    for sid, _ in rows:
        chain: list[str] = []
        while sid is not None and sid not in seen and len(chain) < MAX_LINEAGE_DEPTH:
            seen.add(sid)
            chain.append(sid)
            sid = parents.get(sid)
        ordered.extend(reversed(chain))
    return ordered


def read_copy(conn: sqlite3.Connection, session_id: str) -> SessionCopy | None:
    """Everything stored of ``session_id``, or None when there is no such session."""
    row = conn.execute(
        f"SELECT {', '.join(SESSION_COLUMNS)} FROM hc_sessions WHERE id = ?", (session_id,)
    ).fetchone()
    if row is None:
        return None
    messages = conn.execute(
        f"SELECT {', '.join(COPY_MESSAGE_COLUMNS)} FROM hc_messages WHERE session_id = ? "
        "ORDER BY id",
        (session_id,),
    ).fetchall()
    compactions = conn.execute(
        f"SELECT {', '.join(COMPACTION_COLUMNS)} FROM hc_compactions WHERE session_id = ? "
        "ORDER BY id",
        (session_id,),
    ).fetchall()
    sources = conn.execute(
        "SELECT s.message_id, s.position, s.source_id FROM hc_message_sources s "
        "JOIN hc_messages m ON m.id = s.message_id WHERE m.session_id = ? "
        "ORDER BY s.message_id, s.position",
        (session_id,),
    ).fetchall()
    rotated = conn.execute(
        "SELECT id FROM hc_compactions WHERE child_session_id = ? ORDER BY id", (session_id,)
    ).fetchall()
    return SessionCopy(
        session=dict(zip(SESSION_COLUMNS, row, strict=True)),
        messages=[tuple(m) for m in messages],
        compactions=[tuple(c) for c in compactions],
        sources=[(int(a), int(b), int(c)) for a, b, c in sources],
        rotated_from=[int(r[0]) for r in rotated],
    )


def write_copy(conn: sqlite3.Connection, copy: SessionCopy, *, where: str) -> bool:
    """Store ``copy`` here with its ids; True when copied, False when it was here already.

    Raises:
        StoreConflictError: a session with its id but other content is here, or
            one of its titles or message / compaction ids belongs to another session.
    """
    sid = copy.session_id
    here = read_copy(conn, sid)
    if here is not None:
        if here.digest() != copy.digest():
            raise StoreConflictError(
                f"session {sid!r} is already in {where} with other content; nothing of it "
                "was copied. Delete it there (hermes-context sessions delete) or migrate "
                "into an empty store",
                what=f"session {sid!r}",
                path=where,
            )
        _link_child(conn, copy)
        return False
    _check_free(conn, copy, where)
    _insert_session(conn, copy)
    _insert_compactions(conn, copy)
    _insert_messages(conn, copy)
    if copy.sources:
        conn.executemany(
            "INSERT INTO message_sources (message_id, position, source_id) VALUES (?, ?, ?)",
            copy.sources,
        )
    _link_child(conn, copy)
    dialect = dialect_of(conn)
    if dialect is not None:
        dialect.advance_ids()
    return True


def _taken(conn: sqlite3.Connection, table: str, ids: Sequence[int]) -> tuple[int, str] | None:
    """The first of ``ids`` that ``table`` (a view) already holds, with its session."""
    for start in range(0, len(ids), _ID_CHUNK):
        chunk = list(ids[start : start + _ID_CHUNK])
        marks = ", ".join("?" * len(chunk))
        row = conn.execute(
            f"SELECT id, session_id FROM {table} WHERE id IN ({marks}) ORDER BY id LIMIT 1", chunk
        ).fetchone()
        if row is not None:
            return int(row[0]), str(row[1])
    return None


def _check_free(conn: sqlite3.Connection, copy: SessionCopy, where: str) -> None:
    """Refuse a copy whose ids or title another session here already has."""
    sid = copy.session_id
    for table, what, ids in (
        ("hc_messages", "message", [m[0] for m in copy.messages]),
        ("hc_compactions", "compaction", [c[0] for c in copy.compactions]),
    ):
        taken = _taken(conn, table, ids)
        if taken is not None:
            raise StoreConflictError(
                f"{what} id {taken[0]} of session {sid!r} is taken in {where} by session "
                f"{taken[1]!r}; ids are kept when copying, so migrate into an empty store",
                what=f"session {sid!r}",
                path=where,
            )
    title = copy.session["title"]
    if title is not None:
        row = conn.execute("SELECT id FROM hc_sessions WHERE title = ?", (title,)).fetchone()
        if row is not None:
            raise StoreConflictError(
                f"the title {title!r} of session {sid!r} is taken in {where} by session "
                f"{row[0]!r}; rename one of them (titles are unique)",
                what=f"session {sid!r}",
                path=where,
            )


def _insert_session(conn: sqlite3.Connection, copy: SessionCopy) -> None:
    row = dict(copy.session)
    parent = row["parent_session_id"]
    if parent is not None and not _exists(conn, parent):
        row["parent_session_id"] = None  # the source lost it too: a dangling link
    conn.execute(
        f"INSERT INTO sessions ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
        list(row.values()),
    )


def _exists(conn: sqlite3.Connection, session_id: str) -> bool:
    return (
        conn.execute("SELECT 1 FROM hc_sessions WHERE id = ?", (session_id,)).fetchone() is not None
    )


def _insert_compactions(conn: sqlite3.Connection, copy: SessionCopy) -> None:
    if not copy.compactions:
        return
    dialect = dialect_of(conn)
    if dialect is not None:
        dialect.copy_rows("compactions", COMPACTION_COLUMNS, copy.compactions)
        return
    conn.executemany(
        f"INSERT INTO compactions ({', '.join(COMPACTION_COLUMNS)}) "
        f"VALUES ({', '.join('?' * len(COMPACTION_COLUMNS))})",
        copy.compactions,
    )


def _insert_messages(conn: sqlite3.Connection, copy: SessionCopy) -> None:
    if not copy.messages:
        return
    dialect = dialect_of(conn)
    storable = dialect.storable_text if dialect is not None else is_storable_text
    rows = [_storable_row(copy, row, i, storable) for i, row in enumerate(copy.messages)]
    if dialect is not None:
        dialect.copy_rows("messages", COPY_MESSAGE_COLUMNS, rows)
        return
    conn.executemany(
        f"INSERT INTO messages ({', '.join(COPY_MESSAGE_COLUMNS)}) "
        f"VALUES ({', '.join('?' * len(COPY_MESSAGE_COLUMNS))})",
        rows,
    )


def _storable_row(
    copy: SessionCopy, row: tuple[Any, ...], index: int, storable: Any
) -> tuple[Any, ...]:
    """``row`` as it is, or rebuilt from its message where this store cannot hold a text.

    PostgreSQL's text columns hold no NUL, which SQLite's do; a message's text
    that cannot stay in its column goes to ``extra`` as ``append`` would put it.
    """
    if all(storable(v) for v in row if isinstance(v, str)):
        return row
    rebuilt = message_to_row(
        copy.message(row),
        index,
        session_id=copy.session_id,
        seq=row[_MESSAGE_POSITION["seq"]],
        tool_names={},
        storable=storable,
    )
    out = list(row)
    for i, column in enumerate(INSERT_COLUMNS):
        if column not in ("session_id", "seq", "timestamp", "is_summary", "token_estimate"):
            out[_MESSAGE_POSITION[column]] = rebuilt[i]
    name = row[_MESSAGE_POSITION["tool_name"]]
    if isinstance(name, str):
        out[_MESSAGE_POSITION["tool_name"]] = name.replace("\x00", "\ufffd")
    return tuple(out)


def _link_child(conn: sqlite3.Connection, copy: SessionCopy) -> None:
    """Point the compactions that made this session (its parent's) at it."""
    conn.executemany(
        "UPDATE compactions SET child_session_id = ? WHERE id = ? AND child_session_id IS NULL",
        [(copy.session_id, cid) for cid in copy.rotated_from],
    )
