"""What a ``state.db`` holds, read from the file itself: tables, columns, full-text indexes.

The same file may have been written by hermes-context, by NousResearch's
Hermes agent (any of its schema versions), or by both. Nothing here trusts a
version number: the store decides what to create, what to read and whether
it can write from the objects it finds. Inspecting writes nothing.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field

# Our own full-text index over the derived search text (see ``fts``).
SEARCH_TABLE = "message_search"
# Its one column; an FTS5 table with exactly this column is ours, whatever its name.
SEARCH_COLUMN = "body"
# Hermes keeps its schema version in this table (``PRAGMA user_version`` stays 0).
HERMES_VERSION_TABLE = "schema_version"
# Our log of applied migrations.
MIGRATIONS_TABLE = "schema_migrations"
# Where each session imported from another agent's transcripts stands (``foreign_sync``).
FOREIGN_IMPORTS_TABLE = "foreign_imports"
# Tokenizers every SQLite with FTS5 has; anything else must be loaded into the process.
BUILTIN_TOKENIZERS = ("unicode61", "ascii", "porter", "trigram")
_USING_FTS5_RE = re.compile(r"\bUSING\s+fts5\s*\(", re.IGNORECASE)


@dataclass(frozen=True)
class FtsTable:
    """One FTS5 table: its columns and options as declared, and whether this process can use it.

    Attributes:
        tokenizer: The ``tokenize=`` option (``unicode61`` when none is given).
        content: The ``content=`` option: ``''`` contentless, a table or view
            name for external content, None when the index stores its own copy.
        usable: False when this process lacks the tokenizer: the table can be
            neither read nor written, and neither can a table whose triggers
            write to it.
        error: SQLite's reason when not usable.
    """

    name: str
    columns: tuple[str, ...]
    tokenizer: str
    content: str | None
    usable: bool
    error: str | None = None


@dataclass(frozen=True)
class Layout:
    """The objects of one database file, as found.

    Attributes:
        tables: Ordinary table name -> its column names, in order.
        fts: FTS5 table name -> what it is.
        triggers: Trigger name -> the table it is on.
        indexes: Index name -> (table, indexed columns, unique).
        hermes_version: The number in Hermes's ``schema_version`` table, if any.
        applied: Our migrations recorded in the file: version -> name.
        user_version: ``PRAGMA user_version`` (hermes-context's own files only).
        journal_mode: ``PRAGMA journal_mode`` as found (``wal``, ``delete``, ...).
    """

    tables: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    fts: Mapping[str, FtsTable] = field(default_factory=dict)
    triggers: Mapping[str, str] = field(default_factory=dict)
    indexes: Mapping[str, tuple[str, tuple[str, ...], bool]] = field(default_factory=dict)
    hermes_version: int | None = None
    applied: Mapping[int, str] = field(default_factory=dict)
    user_version: int = 0
    journal_mode: str = "delete"

    @property
    def is_empty(self) -> bool:
        """No table at all: a file this process is creating."""
        return not self.tables and not self.fts

    def has(self, table: str, column: str | None = None) -> bool:
        """Whether ``table`` exists (and has ``column``)."""
        columns = self.tables.get(table)
        return columns is not None and (column is None or column in columns)

    def missing(self, table: str, columns: tuple[str, ...]) -> list[str]:
        """Which of ``columns`` the table lacks (all of them when it does not exist)."""
        found = self.tables.get(table, ())
        return [c for c in columns if c not in found]

    @property
    def search_table(self) -> str | None:
        """Our full-text index: the FTS5 table over the single column ``body``."""
        for table in self.fts.values():
            if table.columns == (SEARCH_COLUMN,):
                return table.name
        return None

    @property
    def unusable_fts(self) -> list[FtsTable]:
        """FTS tables this process cannot open (a tokenizer it lacks)."""
        return [t for t in self.fts.values() if not t.usable]

    def has_index_on(self, table: str, columns: tuple[str, ...], *, unique: bool = False) -> bool:
        """Whether some index of ``table`` starts with ``columns`` (and is unique, if asked)."""
        for on, cols, is_unique in self.indexes.values():
            if on == table and cols[: len(columns)] == columns and (is_unique or not unique):
                return True
        return False


def _split_args(text: str) -> list[str]:
    """Split the argument list of ``fts5(...)`` on top-level commas (quotes respected)."""
    args, buf, depth, quote = [], "", 0, ""
    for ch in text:
        if quote:
            buf += ch
            if ch == quote:
                quote = ""
            continue
        if ch in "'\"`[":
            quote = "]" if ch == "[" else ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(buf.strip())
            buf = ""
            continue
        buf += ch
    if buf.strip():
        args.append(buf.strip())
    return args


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"`":
        return value[1:-1]
    return value


def parse_fts5(sql: str) -> tuple[tuple[str, ...], str, str | None] | None:
    """(columns, tokenizer, content option) of a ``CREATE VIRTUAL TABLE ... USING fts5``."""
    match = _USING_FTS5_RE.search(sql or "")
    if match is None:
        return None
    columns: list[str] = []
    tokenizer, content = "unicode61", None
    for arg in _split_args(sql[match.end() :]):
        key, sep, value = arg.partition("=")
        if sep:
            option = key.strip().lower()
            if option == "tokenize":
                tokenizer = _unquote(value).split()[0] if _unquote(value).split() else tokenizer
            elif option == "content":
                content = _unquote(value)
        else:
            columns.append(_unquote(arg.split()[0]))
    return tuple(columns), tokenizer, content


def _probe(conn: sqlite3.Connection, name: str) -> str | None:
    """Why the FTS table cannot be opened by this process, or None when it can."""
    try:
        conn.execute(f'SELECT rowid FROM "{name}" WHERE 0').fetchall()
    except sqlite3.OperationalError as exc:
        return str(exc)
    return None


def _columns(conn: sqlite3.Connection, table: str) -> tuple[str, ...]:
    return tuple(r[1] for r in conn.execute(f'PRAGMA table_info("{table}")'))


def _index_columns(conn: sqlite3.Connection, index: str) -> tuple[str, ...]:
    return tuple(r[2] or "" for r in conn.execute(f'PRAGMA index_info("{index}")'))


def _hermes_version(conn: sqlite3.Connection, tables: Mapping[str, tuple[str, ...]]) -> int | None:
    if "version" not in tables.get(HERMES_VERSION_TABLE, ()):
        return None
    row = conn.execute(f"SELECT max(version) FROM {HERMES_VERSION_TABLE}").fetchone()
    return int(row[0]) if row and isinstance(row[0], int) else None


def _applied(conn: sqlite3.Connection, tables: Mapping[str, tuple[str, ...]]) -> dict[int, str]:
    if not {"version", "name"} <= set(tables.get(MIGRATIONS_TABLE, ())):
        return {}
    rows = conn.execute(f"SELECT version, name FROM {MIGRATIONS_TABLE} ORDER BY version")
    return {int(v): str(n) for v, n in rows}


def inspect(conn: sqlite3.Connection) -> Layout:
    """Read the layout of the main database of ``conn`` (writes nothing)."""
    tables: dict[str, tuple[str, ...]] = {}
    fts: dict[str, FtsTable] = {}
    triggers: dict[str, str] = {}
    indexes: dict[str, tuple[str, tuple[str, ...], bool]] = {}
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM main.sqlite_master").fetchall()
    shadows = {f"{n}_{s}" for t, n, _, q in rows if parse_fts5(q or "") for s in _SHADOW}
    for kind, name, on, sql in rows:
        if kind == "table" and parse_fts5(sql or ""):
            columns, tokenizer, content = parse_fts5(sql) or ((), "", None)
            error = _probe(conn, name)
            fts[name] = FtsTable(name, columns, tokenizer, content, error is None, error)
        elif kind == "table" and not name.startswith("sqlite_") and name not in shadows:
            tables[name] = _columns(conn, name)
        elif kind == "trigger":
            triggers[name] = on
        elif kind == "index" and sql:
            unique = sql.lstrip().upper().startswith("CREATE UNIQUE")
            indexes[name] = (on, _index_columns(conn, name), unique)
    return Layout(
        tables=tables,
        fts=fts,
        triggers=triggers,
        indexes=indexes,
        hermes_version=_hermes_version(conn, tables),
        applied=_applied(conn, tables),
        user_version=int(conn.execute("PRAGMA user_version").fetchone()[0]),
        journal_mode=str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower(),
    )


# Shadow tables FTS5 keeps next to each index (not tables of anyone's schema).
_SHADOW = ("data", "idx", "docsize", "config", "content")
