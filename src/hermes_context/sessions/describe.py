"""What a ``state.db`` is, for ``hermes-context doctor``: read without changing anything.

Whose schema it has (Hermes's version, our migrations), its journal mode, its
full-text indexes with their tokenizers and whether this process can use
them, and whether this process could write to it.
"""

from __future__ import annotations

import sqlite3
import warnings
from pathlib import Path
from typing import Any

from ..errors import StoreError
from . import connection
from .layout import SEARCH_COLUMN, Layout, inspect
from .migrations import MIGRATIONS, pending


def _owner(columns: tuple[str, ...]) -> str:
    return "hermes-context" if columns == (SEARCH_COLUMN,) else "other (Hermes)"


def _count(conn: sqlite3.Connection, found: Layout, table: str) -> int | None:
    if not found.has(table):
        return None
    return int(conn.execute(f"SELECT count(*) FROM main.{table}").fetchone()[0])


def _writable(path: Path, found: Layout) -> tuple[bool, str | None]:
    if not connection.is_writable(path):
        return False, "the file or its folder is not writable by this process"
    if found.unusable_fts:
        table = found.unusable_fts[0]
        return False, (
            f"index {table.name!r} needs the tokenizer {table.tokenizer!r}, which this process "
            "cannot load"
        )
    return True, None


def describe_state_db(path: Path) -> dict[str, Any]:
    """A JSON-ready description of the database at ``path`` (``{"exists": False}`` when missing).

    Raises:
        StoreError: the file is not an SQLite database or cannot be read.
    """
    if not path.is_file():
        return {"path": str(path), "exists": False}
    connection.check_file(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            conn = connection.connect(path, read_only=True)
        except sqlite3.DatabaseError as exc:
            raise connection.damaged(path, exc) from exc
    try:
        found = inspect(conn)
        writable, why = _writable(path, found)
        known = {m.version for m in MIGRATIONS}
        return {
            "path": str(path),
            "exists": True,
            "size_bytes": path.stat().st_size,
            "hermes_schema_version": found.hermes_version,
            "migrations_applied": [
                {"version": v, "name": n, "known": v in known} for v, n in found.applied.items()
            ],
            "migrations_pending": [m.name for m in pending(found)],
            "journal_mode": found.journal_mode,
            "writable": writable,
            "read_only_reason": why,
            "fts": [
                {
                    "name": t.name,
                    "columns": list(t.columns),
                    "tokenizer": t.tokenizer,
                    "owner": _owner(t.columns),
                    "usable": t.usable,
                    "error": t.error,
                }
                for t in found.fts.values()
            ],
            "sessions": _count(conn, found, "sessions"),
            "messages": _count(conn, found, "messages"),
        }
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path} cannot be read ({exc})", path=str(path)) from exc
    finally:
        conn.close()
