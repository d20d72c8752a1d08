"""``PgConnection``: a psycopg connection that speaks the part of ``sqlite3`` the session SQL uses.

The shared session modules write ``?`` and ``?N`` placeholders, ``main.``
table prefixes and SQLite's ``json_array_length(text)``; this adapter rewrites
those (placeholders only ever become bound parameters) and hands back
psycopg cursors, which already offer ``fetchone``, ``fetchall``, iteration,
``description`` and ``rowcount``. What cannot be rewritten (inserting message
rows, full-text matching) is the connection's ``dialect``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..indexing import RECOMPUTE_BATCH, recompute_search_text
from ..rows import INSERT_COLUMNS, is_storable_text
from . import search

if TYPE_CHECKING:
    import sqlite3

    import psycopg

# A string literal (left as it is, but for ``%``), a placeholder, or a lone ``%``.
_TOKEN_RE = re.compile(r"'(?:[^']|'')*'|\?(\d*)|%")
# SQLite spellings and what PostgreSQL says instead.
_REWRITES = (
    (re.compile(r"\bmain\."), ""),
    (re.compile(r"json_array_length\((\w+)\)"), r"json_array_length(\1::json)"),
)
_INSERT_MESSAGE = (
    f"INSERT INTO messages ({', '.join(INSERT_COLUMNS)}, search_vector) "
    f"VALUES ({', '.join(['%s'] * len(INSERT_COLUMNS))}, "
    f"to_tsvector('{search.CONFIG}', %s)) RETURNING id"
)
# Tables whose ``id`` is an identity column: a copy keeps its ids, then moves the sequence on.
_IDENTITY_TABLES = ("messages", "compactions")
# Never backwards: an id a deleted row had is not handed out again.
_ADVANCE = (
    "SELECT setval(s.seq, greatest(coalesce((SELECT max(id) FROM {table}), 1), "
    "coalesce(pg_sequence_last_value(s.seq::regclass), 1))) "
    "FROM pg_get_serial_sequence(%s, 'id') AS s(seq)"
)
_REINDEX_SELECT = "SELECT id, search_text, content FROM messages WHERE id > %s ORDER BY id LIMIT %s"
_REINDEX = f"UPDATE messages SET search_vector = to_tsvector('{search.CONFIG}', %s) WHERE id = %s"
_SEARCH_TEXT = INSERT_COLUMNS.index("search_text")
_CONTENT = INSERT_COLUMNS.index("content")


@functools.lru_cache(maxsize=512)
def translate(sql: str) -> tuple[str, tuple[int | None, ...]]:
    """``sql`` for psycopg, and which parameter each ``%s`` takes (None: the next one)."""
    order: list[int | None] = []

    def replace(m: re.Match[str]) -> str:
        token = m.group(0)
        if token.startswith("'"):
            return token.replace("%", "%%")
        if token == "%":
            return "%%"
        order.append(int(m.group(1)) if m.group(1) else None)
        return "%s"

    out = _TOKEN_RE.sub(replace, sql)
    for pattern, replacement in _REWRITES:
        out = pattern.sub(replacement, out)
    return out, tuple(order)


def _arrange(order: tuple[int | None, ...], params: Sequence[Any]) -> list[Any]:
    """The parameters in the order the ``%s`` of a translated statement take them."""
    if all(n is None for n in order):
        return list(params)
    nxt = iter(params)
    return [next(nxt) if n is None else params[n - 1] for n in order]


def storable_text(text: str) -> bool:
    """Whether a PostgreSQL text column holds ``text`` exactly: no lone surrogate, no NUL."""
    return is_storable_text(text) and "\x00" not in text


def index_source(content_and_search_text: Sequence[Any]) -> str:
    """The words a message is indexed by: of its search text, else of its content."""
    content, search_text = content_and_search_text
    text = search_text if search_text is not None else content
    return search.index_words(text or "")


class PgConnection:
    """A psycopg connection seen through ``sqlite3.Connection``'s ``execute`` / ``executemany``."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.raw = conn
        self.dialect = self

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        """Run one statement; the cursor holds its rows."""
        text, order = translate(sql)
        return self.raw.execute(text, _arrange(order, params))

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> None:
        """Run one statement once per parameter sequence."""
        text, order = translate(sql)
        with self.raw.cursor() as cur:
            cur.executemany(text, [_arrange(order, p) for p in seq])

    # -- the dialect (see ``sessions.dialect``) -------------------------------

    def storable_text(self, text: str) -> bool:
        """Whether a text column holds ``text`` exactly."""
        return storable_text(text)

    def insert_message_rows(self, rows: Sequence[tuple[Any, ...]]) -> list[int]:
        """Insert message rows with their search vectors; return their ids in order."""
        ids: list[int] = []
        with self.raw.cursor() as cur:
            cur.executemany(
                _INSERT_MESSAGE,
                [(*r, index_source((r[_CONTENT], r[_SEARCH_TEXT]))) for r in rows],
                returning=True,
            )
            while True:
                ids.append(cur.fetchone()[0])  # type: ignore[index]
                if not cur.nextset():
                    break
        return ids

    def copy_rows(
        self, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        """Insert rows copied from another store with their ids; ``messages`` get search vectors."""
        names = list(columns)
        values = [list(r) for r in rows]
        marks = ["%s"] * len(names)
        if table == "messages":
            content, text = names.index("content"), names.index("search_text")
            names.append("search_vector")
            marks.append(f"to_tsvector('{search.CONFIG}', %s)")
            for v in values:
                v.append(index_source((v[content], v[text])))
        overriding = " OVERRIDING SYSTEM VALUE" if table in _IDENTITY_TABLES else ""
        sql = f"INSERT INTO {table} ({', '.join(names)}){overriding} VALUES ({', '.join(marks)})"
        with self.raw.cursor() as cur:
            cur.executemany(sql, values)

    def advance_ids(self) -> None:
        """Move the identity sequences past the largest ids (a copy inserted its own)."""
        for table in _IDENTITY_TABLES:
            self.raw.execute(_ADVANCE.format(table=table), (table,))

    def match_expressions(self, query: str, raw: bool) -> list[tuple[str, str]]:
        """``tsquery`` texts to try: all words, then any word; or the raw query translated."""
        return search.expressions(query, raw)

    def match_ids(self, expression: str, upper: int, limit: int) -> list[int]:
        """Ids below ``upper`` of the newest ``limit`` messages matching a ``tsquery`` text."""
        cur = self.raw.execute(search.MATCH_IDS, (expression, upper, limit))
        return [row[0] for row in cur]

    def rebuild_index(self) -> int:
        """Recompute every message's search text and vector; return how many rows there are."""
        recompute_search_text(cast("sqlite3.Connection", self))
        last, done = 0, 0
        while rows := self.raw.execute(_REINDEX_SELECT, (last, RECOMPUTE_BATCH)).fetchall():
            with self.raw.cursor() as cur:
                cur.executemany(_REINDEX, [(index_source((c, t)), i) for i, t, c in rows])
            last, done = rows[-1][0], done + len(rows)
        return done
