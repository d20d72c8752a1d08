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
