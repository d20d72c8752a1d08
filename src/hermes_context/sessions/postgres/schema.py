"""The PostgreSQL schema of the session store: numbered, idempotent migrations.

``hc_schema_versions`` records the version reached (component ``sessions``);
opening a store applies the missing migrations in one transaction, holding
an advisory lock so that two processes opening a new schema at once migrate
it once. The tables mirror
``state.db`` (``sessions``, ``messages``, ``compactions``, ``message_sources``)
and the ``hc_*`` views are the names the shared SQL reads, as the SQLite
store's per-connection views are (here the tables are always ours).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from ... import pgsql
from ..rows import INSERT_COLUMNS
from .search import CONFIG

if TYPE_CHECKING:
    import psycopg

# Key of the advisory lock every writer of one schema takes (see ``lock_key``).
LOCK_NAMESPACE = "hermes-context sessions"
LOCK = "SELECT pg_advisory_xact_lock(hashtext(%s || current_schema()))"
# One session's writes (the two-key form: a key space apart from the one above).
SESSION_LOCK = "SELECT pg_advisory_xact_lock(hashtext(%s || current_schema()), hashtext(%s))"

_V1 = (
    """CREATE TABLE sessions (
        rowid bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
        id text PRIMARY KEY,
        parent_session_id text REFERENCES sessions(id) ON DELETE SET NULL,
        root_session_id text,
        source text NOT NULL,
        model text,
        title text,
        user_id text,
        started_at double precision NOT NULL,
        ended_at double precision,
        end_reason text,
        message_count integer DEFAULT 0,
        tool_call_count integer DEFAULT 0,
        compression_count integer NOT NULL DEFAULT 0,
        compressor_state text,
        system_prompt text,
        input_tokens integer DEFAULT 0,
        output_tokens integer DEFAULT 0)""",
    "CREATE INDEX sessions_parent ON sessions (parent_session_id)",
    "CREATE INDEX sessions_root ON sessions (root_session_id)",
    "CREATE INDEX sessions_started ON sessions (started_at)",
    "CREATE INDEX sessions_title ON sessions (title)",
    """CREATE TABLE compactions (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id text NOT NULL REFERENCES sessions(id),
        child_session_id text,
        mode text NOT NULL,
        created_at double precision NOT NULL,
        tokens_before integer,
        tokens_after integer,
        dropped integer,
        used_fallback integer,
        report text)""",
    "CREATE INDEX compactions_session ON compactions (session_id)",
    """CREATE TABLE messages (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id text NOT NULL REFERENCES sessions(id),
        seq bigint,
        role text NOT NULL,
        content text,
        content_parts text,
        tool_calls text,
        tool_call_id text,
        tool_name text,
        timestamp double precision NOT NULL,
        token_estimate integer,
        active integer NOT NULL DEFAULT 1,
        compacted integer NOT NULL DEFAULT 0,
        is_summary integer,
        extra text,
        key_order text,
        search_text text,
        compaction_id bigint REFERENCES compactions(id),
        search_vector tsvector NOT NULL)""",
    "CREATE INDEX messages_session ON messages (session_id, seq)",
    "CREATE INDEX messages_search ON messages USING gin (search_vector)",
    """CREATE TABLE message_sources (
        message_id bigint NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        position integer NOT NULL,
        source_id bigint NOT NULL,
        PRIMARY KEY (message_id, position))""",
    "CREATE INDEX message_sources_source ON message_sources (source_id)",
    # English stems without stop words, as FTS5's porter tokenizer: every word counts.
    "CREATE TEXT SEARCH DICTIONARY hc_english_stem (TEMPLATE = snowball, Language = english)",
    f"CREATE TEXT SEARCH CONFIGURATION {CONFIG} (COPY = simple)",
    f"ALTER TEXT SEARCH CONFIGURATION {CONFIG} ALTER MAPPING FOR asciiword, word, numword, "
    "asciihword, hword, numhword, hword_asciipart, hword_part, hword_numpart "
    "WITH hc_english_stem",
    """CREATE VIEW hc_sessions AS SELECT rowid, id, parent_session_id, root_session_id, source,
        model, title, user_id, started_at, ended_at, end_reason,
        coalesce(message_count, 0) AS message_count,
        coalesce(tool_call_count, 0) AS tool_call_count, compression_count, compressor_state,
        system_prompt, input_tokens, output_tokens FROM sessions""",
    f"""CREATE VIEW hc_messages AS SELECT id, {", ".join(c for c in INSERT_COLUMNS)},
        active, compacted, compaction_id FROM messages""",
    "CREATE VIEW hc_compactions AS SELECT * FROM compactions",
    "CREATE VIEW hc_message_sources AS SELECT * FROM message_sources",
)

# Migration N is MIGRATIONS[N - 1]; append only, never edit one that shipped.
MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1,)
SCHEMA_VERSION = len(MIGRATIONS)


COMPONENT = "sessions"


def migrate(conn: psycopg.Connection[Any]) -> int:
    """Apply the missing migrations in one transaction; return the version reached.

    The version is recorded in ``hc_schema_versions`` (component ``sessions``),
    beside the other PostgreSQL stores', under their shared advisory lock.

    Raises:
        StoreError: a newer hermes-context migrated this schema.
        psycopg.Error: the database refused a statement (the store reports it).
    """
    steps = [functools.partial(_apply, statements) for statements in MIGRATIONS]
    with conn.transaction():
        return pgsql.migrate(conn, COMPONENT, steps)


def _apply(statements: tuple[str, ...], conn: psycopg.Connection[Any]) -> None:
    for statement in statements:
        conn.execute(statement)
