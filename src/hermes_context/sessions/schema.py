"""The tables of ``state.db``: what a new file gets, and what an existing one must have.

One file serves two programs: hermes-context and NousResearch's Hermes agent.
A file we create holds Hermes's columns too (its schema 25 layout of
``sessions`` and ``messages``), so Hermes can write to it; a file Hermes
created gets our columns added, every one of them nullable or with a
constant default, so that an ``INSERT`` naming only Hermes's columns still
succeeds. Hermes's own objects are never renamed, dropped or rewritten.
"""

from __future__ import annotations

# A column: (name, declaration as in ``ALTER TABLE ... ADD COLUMN``).
Column = tuple[str, str]

# Columns a table must have to be read as sessions / messages at all; they
# cannot be added afterwards (NOT NULL without a default, or the key).
SESSION_BASE = ("id", "source", "started_at")
MESSAGE_BASE = ("id", "session_id", "role", "content", "timestamp")

# Columns both programs use under the same name and meaning, with Hermes's own
# declaration: added when an early Hermes file lacks them (schema 2 has no title).
SHARED_SESSION_COLUMNS: tuple[Column, ...] = (
    ("user_id", "TEXT"),
    ("model", "TEXT"),
    ("parent_session_id", "TEXT REFERENCES sessions(id) ON DELETE SET NULL"),
    ("ended_at", "REAL"),
    ("end_reason", "TEXT"),
    ("message_count", "INTEGER DEFAULT 0"),
    ("tool_call_count", "INTEGER DEFAULT 0"),
    ("title", "TEXT"),
)
SHARED_MESSAGE_COLUMNS: tuple[Column, ...] = (
    ("tool_call_id", "TEXT"),
    ("tool_calls", "TEXT"),
    ("tool_name", "TEXT"),
    ("active", "INTEGER NOT NULL DEFAULT 1"),
    ("compacted", "INTEGER NOT NULL DEFAULT 0"),
)

# hermes-context's own columns. NULL in a row another program wrote:
# ``root_session_id`` is then derived from the parent chain, ``seq`` assigned
# when we next append to the session, ``token_estimate`` (with ``search_text``)
# computed when the row is indexed, and ``is_summary`` NULL marks the row as
# written by another program for good.
OWN_SESSION_COLUMNS: tuple[Column, ...] = (
    ("root_session_id", "TEXT"),
    ("compression_count", "INTEGER NOT NULL DEFAULT 0"),
    ("compressor_state", "TEXT"),
)
OWN_MESSAGE_COLUMNS: tuple[Column, ...] = (
    ("seq", "INTEGER"),
    ("content_parts", "TEXT"),
    ("token_estimate", "INTEGER"),
    ("is_summary", "INTEGER"),
    ("extra", "TEXT"),
    ("key_order", "TEXT"),
    ("search_text", "TEXT"),
    # The compaction that replaced this row (NULL while it is live).
    ("compaction_id", "INTEGER REFERENCES compactions(id)"),
)

# Hermes's other columns (schema 25), in a file we create so Hermes can write
# every field it knows. We never read or write them, except where noted in
# ``views`` (system prompt, token counts, reasoning).
HERMES_SESSION_COLUMNS: tuple[Column, ...] = (
    ("session_key", "TEXT"),
    ("chat_id", "TEXT"),
    ("chat_type", "TEXT"),
    ("thread_id", "TEXT"),
    ("display_name", "TEXT"),
    ("origin_json", "TEXT"),
    ("expiry_finalized", "INTEGER DEFAULT 0"),
    ("model_config", "TEXT"),
    ("system_prompt", "TEXT"),
    ("system_prompt_hash", "TEXT"),
    ("input_tokens", "INTEGER DEFAULT 0"),
    ("output_tokens", "INTEGER DEFAULT 0"),
    ("cache_read_tokens", "INTEGER DEFAULT 0"),
    ("cache_write_tokens", "INTEGER DEFAULT 0"),
    ("reasoning_tokens", "INTEGER DEFAULT 0"),
    ("cwd", "TEXT"),
    ("git_branch", "TEXT"),
    ("git_repo_root", "TEXT"),
    ("billing_provider", "TEXT"),
    ("billing_base_url", "TEXT"),
    ("billing_mode", "TEXT"),
    ("estimated_cost_usd", "REAL"),
    ("actual_cost_usd", "REAL"),
    ("cost_status", "TEXT"),
    ("cost_source", "TEXT"),
    ("pricing_version", "TEXT"),
    ("last_activity_at", "REAL"),
    ("last_activity_description", "TEXT"),
    ("last_activity_provenance", "TEXT"),
    ("api_call_count", "INTEGER DEFAULT 0"),
    ("handoff_state", "TEXT"),
    ("handoff_platform", "TEXT"),
    ("handoff_error", "TEXT"),
    ("compression_failure_cooldown_until", "REAL"),
    ("compression_failure_error", "TEXT"),
    ("compression_fallback_streak", "INTEGER NOT NULL DEFAULT 0"),
    ("compression_ineffective_count", "INTEGER NOT NULL DEFAULT 0"),
    ("profile_name", "TEXT"),
    ("rewind_count", "INTEGER NOT NULL DEFAULT 0"),
    ("archived", "INTEGER NOT NULL DEFAULT 0"),
    ("pinned", "INTEGER NOT NULL DEFAULT 0"),
    ("last_read_at", "REAL"),
)
HERMES_MESSAGE_COLUMNS: tuple[Column, ...] = (
    ("effect_disposition", "TEXT"),
    ("token_count", "INTEGER"),
    ("finish_reason", "TEXT"),
    ("reasoning", "TEXT"),
    ("reasoning_content", "TEXT"),
    ("reasoning_details", "TEXT"),
    ("codex_reasoning_items", "TEXT"),
    ("codex_message_items", "TEXT"),
    ("platform_message_id", "TEXT"),
    ("observed", "INTEGER DEFAULT 0"),
    ("api_content", "TEXT"),
    ("display_kind", "TEXT"),
    ("display_metadata", "TEXT"),
)


def _create_table(name: str, head: tuple[str, ...], columns: tuple[Column, ...]) -> str:
    body = ",\n    ".join((*head, *(f"{n} {decl}" for n, decl in columns)))
    return f"CREATE TABLE {name} (\n    {body}\n)"


NEW_SESSIONS = _create_table(
    "sessions",
    ("id TEXT PRIMARY KEY", "source TEXT NOT NULL", "started_at REAL NOT NULL"),
    SHARED_SESSION_COLUMNS + HERMES_SESSION_COLUMNS + OWN_SESSION_COLUMNS,
)
NEW_MESSAGES = _create_table(
    "messages",
    (
        "id INTEGER PRIMARY KEY AUTOINCREMENT",
        "session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE",
        "role TEXT NOT NULL",
        "content TEXT",
        "timestamp REAL NOT NULL",
    ),
    SHARED_MESSAGE_COLUMNS + HERMES_MESSAGE_COLUMNS + OWN_MESSAGE_COLUMNS,
)

# Hermes searches ``messages_fts`` (content, tool name, tool-call arguments,
# kept in step with ``messages`` by triggers). A file we create gets it, so
# Hermes finds the rows we write from its first open.
HERMES_FTS = """
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, tool_name, tool_calls, content='messages', content_rowid='id'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
    VALUES (new.id, new.content, new.tool_name, new.tool_calls);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls)
    VALUES ('delete', old.id, old.content, old.tool_name, old.tool_calls);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, tool_name, tool_calls ON messages
BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_name, tool_calls)
    VALUES ('delete', old.id, old.content, old.tool_name, old.tool_calls);
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
    VALUES (new.id, new.content, new.tool_name, new.tool_calls);
END;
"""

# Our indexes: (name, table, columns, unique, WHERE clause). One is created
# only when no index of the table already starts with those columns (Hermes
# has some of them under its own names).
INDEXES: tuple[tuple[str, str, tuple[str, ...], bool, str], ...] = (
    ("sessions_by_started", "sessions", ("started_at",), False, ""),
    ("sessions_by_user", "sessions", ("user_id", "started_at"), False, ""),
    ("sessions_by_parent", "sessions", ("parent_session_id",), False, ""),
    ("sessions_by_root", "sessions", ("root_session_id",), False, ""),
    ("messages_by_position", "messages", ("session_id", "seq"), True, ""),
    # Rows another program wrote that are not in our search index yet.
    ("messages_unindexed", "messages", ("id",), False, "token_estimate IS NULL"),
)
# A new file keeps titles unique, as Hermes requires: Hermes's own unique
# index could not be created on it otherwise.
UNIQUE_TITLES = "CREATE UNIQUE INDEX sessions_by_title ON sessions(title) WHERE title IS NOT NULL"


def index_sql(name: str, table: str, columns: tuple[str, ...], unique: bool, where: str) -> str:
    """``CREATE INDEX`` for one row of ``INDEXES``."""
    kind = "UNIQUE INDEX" if unique else "INDEX"
    clause = f" WHERE {where}" if where else ""
    return f"CREATE {kind} {name} ON {table}({', '.join(columns)}){clause}"
