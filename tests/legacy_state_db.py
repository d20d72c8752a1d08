"""The ``state.db`` of earlier hermes-context releases, built as they built it.

Released schema steps 1 to 3, verbatim (step 4 only recomputed search text),
so tests can open what an existing user has on disk and see it upgraded.
"""

from __future__ import annotations

import sqlite3
import time

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

_M002 = """
CREATE VIRTUAL TABLE messages_fts USING fts5(
    body, content='', tokenize='porter unicode61 remove_diacritics 2'
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


_STEPS = ((1, "sessions_and_messages", _M001), (2, "messages_fts", _M002),
          (3, "compactions_and_lineage", _M003))  # fmt: skip


def build(path, version: int) -> sqlite3.Connection:
    """A database at ``version`` (1 to 3) as that release left it; an autocommit connection."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for number, name, script in _STEPS[:version]:
        conn.executescript(script)
        conn.execute(
            "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
            (number, name, time.time()),
        )
        conn.execute(f"PRAGMA user_version = {number}")
    return conn
