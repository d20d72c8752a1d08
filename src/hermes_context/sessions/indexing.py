"""Keeping ``messages.search_text`` and the FTS5 index in step with the indexing rules.

The derived search text is computed in Python (``fts.search_text_for``), so
SQL alone cannot redo it: when the rules change, a numbered migration calls
``recompute_search_text`` in its transaction, and ``sessions reindex`` calls
it before rebuilding the index. Nothing here starts or ends a transaction.
"""

from __future__ import annotations

import sqlite3

from .fts import search_text_for
from .rows import MESSAGE_COLUMNS, row_to_message

# Rows read per round while recomputing: bounded memory on a large database.
RECOMPUTE_BATCH = 1_000


def recompute_search_text(conn: sqlite3.Connection) -> int:
    """Recompute the stored search text of every message; return how many rows changed.

    The update trigger re-indexes each changed row, removing its old text
    from the index first.
    """
    select = (
        f"SELECT id, search_text, {', '.join(MESSAGE_COLUMNS)} FROM messages "
        "WHERE id > ? ORDER BY id LIMIT ?"
    )
    changed, last = 0, 0
    while True:
        rows = conn.execute(select, (last, RECOMPUTE_BATCH)).fetchall()
        if not rows:
            return changed
        updates = []
        for row in rows:
            text = search_text_for(row_to_message(row[2:]))
            if text != row[1]:
                updates.append((text, row[0]))
        conn.executemany("UPDATE messages SET search_text = ? WHERE id = ?", updates)
        changed += len(updates)
        last = rows[-1][0]


def rebuild_index(conn: sqlite3.Connection) -> int:
    """Recompute the search text, then rebuild the FTS index from scratch; return rows indexed."""
    recompute_search_text(conn)
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('delete-all')")
    conn.execute(
        "INSERT INTO messages_fts(rowid, body) "
        "SELECT id, coalesce(search_text, content, '') FROM messages"
    )
    return int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])
