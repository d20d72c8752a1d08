"""Keeping ``messages.search_text`` and the FTS5 index in step with the indexing rules.

The derived search text is computed in Python (``fts.search_text_for``), so
SQL alone cannot produce it: when the rules change, a numbered migration calls
``recompute_search_text`` in its transaction; ``sessions reindex`` calls it
before rebuilding the index; and rows another program (Hermes) wrote, which
the triggers indexed as plain content, get theirs from ``index_new_rows``.
Nothing here starts or ends a transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

from ..tokens import estimate_message_tokens_rough
from .fts import search_text_for
from .layout import SEARCH_COLUMN, SEARCH_TABLE
from .rows import MESSAGE_COLUMNS, row_to_message

# Rows read per round while recomputing: bounded memory on a large database.
RECOMPUTE_BATCH = 1_000
_SELECT = f"SELECT id, search_text, {', '.join(MESSAGE_COLUMNS)} FROM messages"


def _batches(conn: sqlite3.Connection, where: str) -> Iterator[list[tuple[Any, ...]]]:
    """Rows (id, search_text, message columns) matching ``where``, RECOMPUTE_BATCH at a time."""
    select = f"{_SELECT} WHERE id > ?{where} ORDER BY id LIMIT ?"
    last = 0
    while rows := conn.execute(select, (last, RECOMPUTE_BATCH)).fetchall():
        yield rows
        last = rows[-1][0]


def recompute_search_text(conn: sqlite3.Connection, *, only_own: bool = False) -> int:
    """Recompute the stored search text of every message; return how many rows changed.

    The update trigger re-indexes each changed row, removing its old text
    from the index first.

    Args:
        only_own: Only rows hermes-context wrote (another program's rows are
            indexed by ``index_new_rows``).
    """
    changed = 0
    for rows in _batches(conn, " AND is_summary IS NOT NULL" if only_own else ""):
        updates = []
        for row in rows:
            text = search_text_for(row_to_message(row[2:]))
            if text != row[1]:
                updates.append((text, row[0]))
        conn.executemany("UPDATE messages SET search_text = ? WHERE id = ?", updates)
        changed += len(updates)
    return changed


def has_new_rows(conn: sqlite3.Connection) -> bool:
    """Whether another program stored messages that are not in our index as we index them."""
    row = conn.execute("SELECT 1 FROM messages WHERE token_estimate IS NULL LIMIT 1").fetchone()
    return row is not None


def index_new_rows(conn: sqlite3.Connection) -> int:
    """Give rows another program wrote their search text and token estimate; return how many.

    Such rows (``token_estimate`` NULL) were indexed by the triggers as plain
    content; setting ``search_text`` re-indexes them as search expects
    (CJK bigrams, decoded tool output, folded text).
    """
    done = 0
    for rows in _batches(conn, " AND token_estimate IS NULL"):
        updates = []
        for row in rows:
            message = row_to_message(row[2:])
            updates.append(
                (search_text_for(message), estimate_message_tokens_rough(message), row[0])
            )
        conn.executemany(
            "UPDATE messages SET search_text = ?, token_estimate = ? WHERE id = ?", updates
        )
        done += len(updates)
    return done


def rebuild_index(conn: sqlite3.Connection) -> int:
    """Recompute the search text, then rebuild the FTS index from scratch; return rows indexed."""
    index_new_rows(conn)
    recompute_search_text(conn)
    conn.execute(f"INSERT INTO {SEARCH_TABLE}({SEARCH_TABLE}) VALUES ('delete-all')")
    conn.execute(
        f"INSERT INTO {SEARCH_TABLE}(rowid, {SEARCH_COLUMN}) "
        "SELECT id, coalesce(search_text, content, '') FROM messages"
    )
    return int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])


def build_temporary_index(conn: sqlite3.Connection, tokenizer: str) -> int:
    """Index every message in a per-connection (TEMP) index; return how many.

    For a file that cannot be written (a Hermes file whose own index needs a
    tokenizer this process lacks, a read-only folder) and has no index of
    ours: search then finds exactly what it finds in our own files. The
    messages are read through the ``hc_messages`` view (see ``views``).
    """
    conn.execute(
        f"CREATE VIRTUAL TABLE temp.{SEARCH_TABLE} USING fts5("
        f"{SEARCH_COLUMN}, content='', tokenize='{tokenizer}')"
    )
    cols = ", ".join(MESSAGE_COLUMNS)
    rows = conn.execute(f"SELECT id, {cols} FROM hc_messages ORDER BY id")
    count = 0
    insert = f"INSERT INTO temp.{SEARCH_TABLE}(rowid, {SEARCH_COLUMN}) VALUES (?, ?)"
    while batch := rows.fetchmany(RECOMPUTE_BATCH):
        values = []
        for row in batch:
            message = row_to_message(row[1:])
            text = search_text_for(message)
            values.append((row[0], text if text is not None else (row[2] or "")))
        conn.executemany(insert, values)
        count += len(values)
    return count
