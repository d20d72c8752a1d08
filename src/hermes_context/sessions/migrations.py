"""Numbered, additive schema migrations of ``state.db``, decided by what the file holds.

The file may be new, one of ours, or one of NousResearch's Hermes agent (any
schema version; it leaves ``PRAGMA user_version`` at 0). So no migration is
chosen by a version number: each one looks at the tables, columns and
indexes found (``layout``) and does only what is missing. Migrations only add
(tables, nullable columns or columns with a constant default, indexes, our
own triggers); they never rename, drop or rewrite another program's objects,
and never change the journal mode. All the migrations a file needs run in
one ``BEGIN IMMEDIATE`` transaction, so a crash leaves it as it was.

A step that only recomputes data cannot be seen in the schema: it is
recorded by number and name in ``schema_migrations`` (which also tells
``doctor`` what was applied). Never edit a released migration: add one.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import StoreError
from . import schema
from .fts import FTS_TOKENIZER
from .indexing import recompute_search_text
from .layout import (
    FOREIGN_IMPORTS_TABLE,
    MIGRATIONS_TABLE,
    SEARCH_COLUMN,
    SEARCH_TABLE,
    Layout,
    inspect,
)


@dataclass(frozen=True)
class Migration:
    """One step: its number, a name for the log, when it is needed, what it does.

    Attributes:
        needed: Whether the file lacks what this step adds.
        run: Adds it (inside the migration transaction).
    """

    version: int
    name: str
    needed: Callable[[Layout], bool]
    run: Callable[[sqlite3.Connection, Layout], object]


_MIGRATIONS_LOG = f"""
CREATE TABLE {MIGRATIONS_TABLE} (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at REAL NOT NULL
)
"""

_COLUMNS = {
    "sessions": schema.SHARED_SESSION_COLUMNS + schema.OWN_SESSION_COLUMNS,
    "messages": schema.SHARED_MESSAGE_COLUMNS + schema.OWN_MESSAGE_COLUMNS,
}
_BASE = {"sessions": schema.SESSION_BASE, "messages": schema.MESSAGE_BASE}
_NEW = {"sessions": schema.NEW_SESSIONS, "messages": schema.NEW_MESSAGES}


def _missing_columns(layout: Layout, table: str) -> list[schema.Column]:
    return [(n, d) for n, d in _COLUMNS[table] if not layout.has(table, n)]


def _missing_indexes(layout: Layout) -> list[str]:
    out = []
    for name, table, columns, unique, where in schema.INDEXES:
        present = (
            name in layout.indexes if where else layout.has_index_on(table, columns, unique=unique)
        )
        if not present:
            out.append(schema.index_sql(name, table, columns, unique, where))
    return out


def _tables_needed(layout: Layout) -> bool:
    return any(not layout.has(t) or _missing_columns(layout, t) for t in _COLUMNS) or bool(
        _missing_indexes(layout)
    )


def _tables(conn: sqlite3.Connection, layout: Layout) -> None:
    """Create ``sessions`` / ``messages`` when missing, else add our missing columns."""
    new_file = layout.is_empty
    for table in ("sessions", "messages"):
        if not layout.has(table):
            conn.execute(_NEW[table])
            continue
        lacking = layout.missing(table, _BASE[table])
        if lacking:
            raise StoreError(
                f"the table {table!r} has no column {lacking[0]!r}: this is not a session "
                "database; point HERMES_HOME (or the path argument) at another file"
            )
        for name, declaration in _missing_columns(layout, table):
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")
    if new_file:
        conn.execute(schema.UNIQUE_TITLES)
        for statement in split_statements(schema.HERMES_FTS):
            conn.execute(statement)
    for statement in _missing_indexes(inspect(conn)):
        conn.execute(statement)


_SEARCH_TRIGGERS = f"""
CREATE TRIGGER {SEARCH_TABLE}_insert AFTER INSERT ON messages BEGIN
    INSERT INTO {SEARCH_TABLE}(rowid, {SEARCH_COLUMN})
    VALUES (new.id, coalesce(new.search_text, new.content, ''));
END;
CREATE TRIGGER {SEARCH_TABLE}_delete AFTER DELETE ON messages BEGIN
    INSERT INTO {SEARCH_TABLE}({SEARCH_TABLE}, rowid, {SEARCH_COLUMN})
    VALUES ('delete', old.id, coalesce(old.search_text, old.content, ''));
END;
CREATE TRIGGER {SEARCH_TABLE}_update AFTER UPDATE OF content, search_text ON messages BEGIN
    INSERT INTO {SEARCH_TABLE}({SEARCH_TABLE}, rowid, {SEARCH_COLUMN})
    VALUES ('delete', old.id, coalesce(old.search_text, old.content, ''));
    INSERT INTO {SEARCH_TABLE}(rowid, {SEARCH_COLUMN})
    VALUES (new.id, coalesce(new.search_text, new.content, ''));
END;
"""


def _search_needed(layout: Layout) -> bool:
    return layout.search_table != SEARCH_TABLE


def _search_index(conn: sqlite3.Connection, layout: Layout) -> None:
    """Our full-text index ``message_search`` and its triggers.

    Rows already stored are indexed as they are; rows another program wrote
    get their derived search text when they are next indexed
    (``indexing.index_new_rows``). An index of ours under the name early
    releases used (``messages_fts``, the name Hermes searches) is renamed and
    its triggers are recreated under our names, freeing Hermes's names.
    """
    old = layout.search_table
    if old is not None:
        for trigger, on in layout.triggers.items():
            if on == "messages" and trigger.startswith(f"{old}_"):
                conn.execute(f'DROP TRIGGER "{trigger}"')
        conn.execute(f'ALTER TABLE "{old}" RENAME TO {SEARCH_TABLE}')
    else:
        conn.execute(
            f"CREATE VIRTUAL TABLE {SEARCH_TABLE} USING fts5("
            f"{SEARCH_COLUMN}, content='', tokenize='{FTS_TOKENIZER}')"
        )
        conn.execute(
            f"INSERT INTO {SEARCH_TABLE}(rowid, {SEARCH_COLUMN}) "
            "SELECT id, coalesce(search_text, content, '') FROM messages"
        )
    for statement in split_statements(_SEARCH_TRIGGERS):
        conn.execute(statement)


_COMPACTIONS = """
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
"""
_MESSAGE_SOURCES = """
-- Which stored messages a summary or stand-in row replaced, in order (recall).
CREATE TABLE message_sources (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    source_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    PRIMARY KEY (message_id, position)
) WITHOUT ROWID;
CREATE INDEX idx_message_sources_source ON message_sources(source_id);
"""


def _lineage_needed(layout: Layout) -> bool:
    return not (layout.has("compactions") and layout.has("message_sources"))


def _lineage(conn: sqlite3.Connection, layout: Layout) -> None:
    for table, script in (("compactions", _COMPACTIONS), ("message_sources", _MESSAGE_SOURCES)):
        if not layout.has(table):
            for statement in split_statements(script):
                conn.execute(statement)


def _recompute_needed(layout: Layout) -> bool:
    return 4 not in layout.applied


def _recompute(conn: sqlite3.Connection, layout: Layout) -> int:
    # Search text of JSON tool results and arguments decoded, NFKC-folded, lone
    # surrogates replaced: recomputed for the rows we wrote under older rules
    # (rows of other programs are indexed by the newest rules when first indexed).
    return recompute_search_text(conn, only_own=True)


# What each session imported from another agent's transcript was built from
# (``foreign_sync``): the file, how much of it was read, how many of its
# messages are stored for good and which rows stand for its still-open last
# turn, so importing again adds only what is new.
_FOREIGN_IMPORTS = f"""
CREATE TABLE {FOREIGN_IMPORTS_TABLE} (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
    format TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime REAL NOT NULL,
    messages INTEGER NOT NULL,
    provisional TEXT NOT NULL DEFAULT '[]',
    compactions INTEGER NOT NULL DEFAULT 0,
    last_hash TEXT,
    updated_at REAL NOT NULL
);
CREATE INDEX idx_{FOREIGN_IMPORTS_TABLE}_path ON {FOREIGN_IMPORTS_TABLE}(path);
"""


def _foreign_imports_needed(layout: Layout) -> bool:
    return not layout.has(FOREIGN_IMPORTS_TABLE)


def _foreign_imports(conn: sqlite3.Connection, layout: Layout) -> None:
    for statement in split_statements(_FOREIGN_IMPORTS):
        conn.execute(statement)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "sessions_and_messages", _tables_needed, _tables),
    Migration(2, "messages_fts", _search_needed, _search_index),
    Migration(3, "compactions_and_lineage", _lineage_needed, _lineage),
    Migration(4, "search_text_decoded_and_folded", _recompute_needed, _recompute),
    Migration(5, "foreign_imports", _foreign_imports_needed, _foreign_imports),
)
SCHEMA_VERSION = MIGRATIONS[-1].version


def split_statements(script: str) -> list[str]:
    """Split a script on statement ends, keeping trigger bodies whole."""
    statements, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    return statements


def pending(layout: Layout) -> list[Migration]:
    """The migrations ``layout`` lacks, in order."""
    return [m for m in MIGRATIONS if m.needed(layout)]


def migrate(
    conn: sqlite3.Connection,
    *,
    begin: Callable[[sqlite3.Connection], None] | None = None,
) -> Layout:
    """Bring the file up to what this code needs, in one transaction; return its layout.

    Nothing is written when nothing is missing. ``PRAGMA user_version`` is
    set only on files that are new or were already ours (non-zero).

    Args:
        conn: A connection in autocommit mode (``isolation_level=None``).
        begin: Starts a write transaction (retrying on a busy database).
    """
    if not pending(inspect(conn)):
        return inspect(conn)
    (begin or (lambda c: c.execute("BEGIN IMMEDIATE")))(conn)
    try:
        # Another process may have migrated between the check and the lock.
        layout = inspect(conn)
        ours = layout.is_empty or layout.user_version > 0
        applied = []
        for migration in MIGRATIONS:
            layout = inspect(conn)
            if migration.needed(layout):
                migration.run(conn, layout)
                applied.append((migration.version, migration.name, time.time()))
        if not layout.has(MIGRATIONS_TABLE):
            conn.execute(_MIGRATIONS_LOG)
        conn.executemany(
            f"INSERT OR IGNORE INTO {MIGRATIONS_TABLE}(version, name, applied_at) VALUES (?, ?, ?)",
            applied,
        )
        if ours:
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return inspect(conn)


def check_not_newer(layout: Layout, *, path: str) -> None:
    """Refuse a database a newer hermes-context has migrated further than this code knows."""
    found = max((layout.user_version, *layout.applied), default=0)
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has schema version {found}, but this hermes-context only knows up to "
            f"{SCHEMA_VERSION}; upgrade hermes-context (pip install -U hermes-context) to open it",
            path=path,
            schema_version=found,
            supported_version=SCHEMA_VERSION,
        )


def check_readable(layout: Layout, *, path: str) -> None:
    """Refuse a file without session tables (read-only: nothing can be created)."""
    for table, base in _BASE.items():
        lacking = layout.missing(table, base)
        if lacking:
            raise StoreError(
                f"{path} is read-only and has no usable {table!r} table (no column "
                f"{lacking[0]!r}); open it once with write access (make the file and its "
                "folder writable) so it can be set up",
                path=path,
                read_only=True,
            )
