"""The seam between the shared session SQL and a database that is not SQLite.

The session modules (``queries``, ``compaction``, ``search``, ``hits``) are
written against ``sqlite3``'s connection API, and most of their SQL is plain
enough to run elsewhere. Where it is not — inserting message rows, full-text
matching, which text a column can hold — they ask the connection for its
``Dialect``: an SQLite connection has none (the modules' own code runs), the
PostgreSQL adapter (``postgres.connection``) carries one.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, Protocol


class Dialect(Protocol):
    """What the shared session code asks of a database other than SQLite."""

    def storable_text(self, text: str) -> bool:
        """Whether a text column can hold ``text`` exactly (else it goes to ``extra`` JSON)."""
        ...

    def insert_message_rows(self, rows: Sequence[tuple[Any, ...]]) -> list[int]:
        """Insert ``rows.INSERT_COLUMNS`` rows into ``messages``; return their ids in order."""
        ...

    def copy_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        """Insert rows copied from another store, ids included (``messages`` indexed too)."""
        ...

    def advance_ids(self) -> None:
        """Move the id sequences past the ids ``copy_rows`` inserted."""
        ...

    def match_expressions(self, query: str, raw: bool) -> list[tuple[str, str]]:
        """(kind, expression) to try in order: ``all`` words, then ``any``; or ``raw``.

        Raises:
            SearchQueryError: a raw query cannot be read.
        """
        ...

    def match_ids(self, expression: str, upper: int, limit: int) -> list[int]:
        """Ids below ``upper`` of the newest ``limit`` messages matching ``expression``."""
        ...


def dialect_of(conn: sqlite3.Connection) -> Dialect | None:
    """The dialect ``conn`` carries; None for an SQLite connection."""
    return getattr(conn, "dialect", None)
