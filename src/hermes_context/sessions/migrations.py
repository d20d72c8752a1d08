"""Numbered, append-only, transactional schema migrations of ``state.db``.

``PRAGMA user_version`` holds the number of the last migration applied; each
migration runs in its own ``BEGIN IMMEDIATE`` transaction together with the
bump of that number, so a crash leaves the database at a whole version. Never
edit a released migration: add a new one at the end. A migration is an SQL
script, a Python step (for data only Python can compute, such as the derived
search text), or both.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import StoreError
from .fts import FTS_TOKENIZER
from .indexing import recompute_search_text


@dataclass(frozen=True)
class Migration:
    """One schema step: its number, a name for the log, the SQL script and a Python step.

    Attributes:
        run: Called with the connection after the script, in the same transaction.
        changes_schema: False for a step that only recomputes data: a database
            that cannot be upgraded (read-only) is still readable before it.
    """

    version: int
    name: str
    sql: str = ""
    run: Callable[[sqlite3.Connection], object] | None = None
    changes_schema: bool = True


_M001 = """
CREATE TABLE schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at REAL NOT NULL
);
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    parent_session_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
    root_session_id TEXT NOT NULL,
    source TEXT NOT NULL,
    model TEXT,
    title TEXT,
    user_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER NOT NULL DEFAULT 0,
    tool_call_count INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX idx_sessions_started ON sessions(started_at);
CREATE INDEX idx_sessions_user ON sessions(user_id, started_at);
CREATE INDEX idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX idx_sessions_root ON sessions(root_session_id);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    role TEXT NOT NULL,
    content TEXT,
    content_parts TEXT,
    tool_calls TEXT,
    tool_call_id TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_estimate INTEGER NOT NULL,
    active INTEGER NOT NULL DEFAULT 1,
    compacted INTEGER NOT NULL DEFAULT 0,
    is_summary INTEGER NOT NULL DEFAULT 0,
    extra TEXT,
    key_order TEXT,
    search_text TEXT
);
CREATE UNIQUE INDEX idx_messages_session ON messages(session_id, seq);
"""

_M002 = f"""
CREATE VIRTUAL TABLE messages_fts USING fts5(
    body, content='', tokenize='{FTS_TOKENIZER}'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, body)
    VALUES (new.id, coalesce(new.search_text, new.content, ''));
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, body)
    VALUES ('delete', old.id, coalesce(old.search_text, old.content, ''));
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, search_text ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, body)
    VALUES ('delete', old.id, coalesce(old.search_text, old.content, ''));
    INSERT INTO messages_fts(rowid, body)
    VALUES (new.id, coalesce(new.search_text, new.content, ''));
END;
INSERT INTO messages_fts(rowid, body)
SELECT id, coalesce(search_text, content, '') FROM messages;
"""

_M003 = """
CREATE TABLE compactions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    child_session_id TEXT REFERENCES sessions(id) ON DELETE SET NULL,
    mode TEXT NOT NULL CHECK (mode IN ('in_place', 'rotate')),
    created_at REAL NOT NULL,
    tokens_before INTEGER NOT NULL,
    tokens_after INTEGER NOT NULL,
    dropped INTEGER NOT NULL,
    used_fallback INTEGER NOT NULL,
    report TEXT
);
CREATE INDEX idx_compactions_session ON compactions(session_id);
ALTER TABLE sessions ADD COLUMN compression_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN compressor_state TEXT;
-- The compaction that replaced this row (NULL while it is live).
ALTER TABLE messages ADD COLUMN compaction_id INTEGER REFERENCES compactions(id);
-- Which stored messages a summary or stand-in row replaced, in order (recall).
CREATE TABLE message_sources (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    source_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    PRIMARY KEY (message_id, position)
) WITHOUT ROWID;
CREATE INDEX idx_message_sources_source ON message_sources(source_id);
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "sessions_and_messages", _M001),
    Migration(2, "messages_fts", _M002),
    Migration(3, "compactions_and_lineage", _M003),
    # Search text of JSON tool results and arguments decoded, NFKC-folded, lone
    # surrogates replaced: recomputed in Python for every stored message.
    Migration(4, "search_text_decoded_and_folded", run=recompute_search_text, changes_schema=False),
)
SCHEMA_VERSION = MIGRATIONS[-1].version
# The oldest version whose tables this code reads (later steps only recompute data).
READABLE_VERSION = max(m.version for m in MIGRATIONS if m.changes_schema)


def schema_version(conn: sqlite3.Connection) -> int:
    """The number of the last migration applied to the database (0 when new)."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _split_statements(script: str) -> list[str]:
    """Split a script on statement ends, keeping trigger bodies whole."""
    statements, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    return statements


def migrate(
    conn: sqlite3.Connection,
    *,
    target: int = SCHEMA_VERSION,
    begin: Callable[[sqlite3.Connection], None] | None = None,
) -> int:
    """Apply the pending migrations up to ``target``; return the version reached.

    Args:
        conn: A connection in autocommit mode (``isolation_level=None``).
        target: Last migration to apply (tests build old databases with it).
        begin: Starts a write transaction (retrying on a busy database).

    Raises:
        StoreError: the database was written by a newer version of hermes-context.
    """
    start = begin or (lambda c: c.execute("BEGIN IMMEDIATE"))
    for migration in MIGRATIONS:
        if migration.version > target:
            break
        if schema_version(conn) >= migration.version:
            continue
        start(conn)
        try:
            # Another process may have migrated between the check and the lock.
            if schema_version(conn) < migration.version:
                for statement in _split_statements(migration.sql):
                    conn.execute(statement)
                if migration.run is not None:
                    migration.run(conn)
                conn.execute(
                    "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, time.time()),
                )
                conn.execute(f"PRAGMA user_version = {migration.version:d}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return schema_version(conn)


def check_not_newer(conn: sqlite3.Connection, *, path: str) -> None:
    """Refuse a database whose schema is newer than this code knows."""
    found = schema_version(conn)
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {found}, but this hermes-context only knows up to "
            f"{SCHEMA_VERSION}; upgrade hermes-context (pip install -U hermes-context) to open it",
            path=path,
            schema_version=found,
            supported_version=SCHEMA_VERSION,
        )


def check_readable(conn: sqlite3.Connection, *, path: str) -> None:
    """Refuse a database that must be upgraded before it can be read but cannot be written."""
    found = schema_version(conn)
    if found < READABLE_VERSION:
        raise StoreError(
            f"{path} is read-only and at schema version {found}, older than this "
            f"hermes-context can read ({READABLE_VERSION}); open it once with write access "
            "(make the file and its folder writable) so it can be upgraded",
            path=path,
            schema_version=found,
            read_only=True,
        )
