"""Ranked full-text hits: candidate windows from FTS5, scope filters, snippets.

Ranking every match of a common word costs time in proportion to how often
it occurs (bm25 is computed for each matching row), which at a million
messages is far over an agent's latency budget. So candidates are read from
the index newest first, ``CANDIDATE_WINDOW`` rows at a time, and ranked by
bm25 within what was read: a query with fewer matches than the window (most
specific queries) is ranked over all its matches exactly; a very common word
is ranked over its newest matches. Older windows are read only while too few
candidates survive the user / session filters.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from .connection import is_busy
from .errors import SearchQueryError
from .fts import indexed_text, query_terms, quote_query, raw_query
from .rows import MESSAGE_COLUMNS, row_to_message

# Newest matching rows ranked per round (see the module docstring).
CANDIDATE_WINDOW = 2_000
# Best-ranked rows of the first window checked against the scope before the
# whole window is (almost always enough: most searches have no filter that bites).
FAST_TOP = 200
SNIPPET_CHARS = 200
_MAX_ROWID = 2**63 - 1

_CANDIDATES = (
    "SELECT f.rowid, f.score, m.session_id, m.compacted, s.root_session_id, s.user_id "
    "FROM (SELECT rowid, bm25(messages_fts) AS score FROM messages_fts "
    "WHERE messages_fts MATCH ? AND rowid < ? ORDER BY rowid DESC LIMIT ?) f "
    "JOIN messages m ON m.id = f.rowid JOIN sessions s ON s.id = m.session_id"
)
_FAST = (
    "SELECT w.rowid, w.score, m.session_id, m.compacted, s.root_session_id, s.user_id "
    "FROM (SELECT rowid, score FROM (SELECT rowid, bm25(messages_fts) AS score "
    "FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid DESC LIMIT ?) "
    "ORDER BY score LIMIT ?) w "
    "JOIN messages m ON m.id = w.rowid JOIN sessions s ON s.id = m.session_id"
)
_DETAILS = (
    "SELECT m.id, m.session_id, m.role, m.timestamp, m.active, m.compacted, m.is_summary, "
    "m.tool_name, s.root_session_id, s.title, "
    + ", ".join("m." + c for c in MESSAGE_COLUMNS)
    + " FROM messages m JOIN sessions s ON s.id = m.session_id WHERE m.id IN "
)


@dataclass(frozen=True)
class Candidate:
    """One matching message before its text is loaded."""

    message_id: int
    score: float  # bm25: lower is better
    session_id: str
    root_session_id: str


@dataclass(frozen=True)
class Scope:
    """Which matches a search may return.

    Attributes:
        user_id: Only this user's sessions (None: everyone's).
        excluded: Sessions whose uncompacted messages are left out (the
            current conversation and what it was rotated from).
        only: When set, only these sessions.
    """

    user_id: str | None = None
    excluded: Collection[str] = ()
    only: Collection[str] | None = None

    def keeps(self, row: Sequence[Any]) -> bool:
        """Whether a ``_CANDIDATES`` row is in scope."""
        _, _, session_id, compacted, _, user_id = row
        if self.user_id is not None and user_id != self.user_id:
            return False
        if self.only is not None and session_id not in self.only:
            return False
        return not (session_id in self.excluded and not compacted)


def _expressions(query: str, raw: bool) -> list[tuple[str, str]]:
    """(kind, FTS expression) to try in order: all words, then any word."""
    if raw:
        return [("raw", raw_query(query))]
    first = quote_query(query)
    if first is None:
        return []
    second = quote_query(query, any_term=True)
    out = [("all", first)]
    if second != first:
        out.append(("any", second or first))
    return out


def _execute(
    conn: sqlite3.Connection, sql: str, params: tuple[Any, ...], query: str, raw: bool
) -> list[tuple[Any, ...]]:
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        # Quoted expressions always parse; a raw one the user typed may not.
        if raw and not is_busy(exc):
            raise SearchQueryError(query, str(exc)) from exc
        raise


def _candidates(
    conn: sqlite3.Connection,
    expr: str,
    scope: Scope,
    enough: Callable[[list[Candidate]], bool],
    query: str,
    raw: bool,
) -> list[Candidate]:
    def keep(rows: list[tuple[Any, ...]]) -> list[Candidate]:
        return [Candidate(r[0], r[1], r[2], r[4]) for r in rows if scope.keeps(r)]

    # Fast path: only the best FAST_TOP rows of the newest window are looked up.
    rows = _execute(conn, _FAST, (expr, CANDIDATE_WINDOW, FAST_TOP), query, raw)
    found = keep(rows)
    # Fewer rows than asked for means the index holds no other match.
    if not (len(rows) < min(FAST_TOP, CANDIDATE_WINDOW) or enough(found)):
        found, upper = [], _MAX_ROWID
        while True:
            rows = _execute(conn, _CANDIDATES, (expr, upper, CANDIDATE_WINDOW), query, raw)
            found += keep(rows)
            if len(rows) < CANDIDATE_WINDOW or enough(found):
                break
            upper = min(r[0] for r in rows)
    found.sort(key=lambda c: (c.score, -c.message_id))
    return found


def ranked(
    conn: sqlite3.Connection,
    query: str,
    *,
    scope: Scope,
    enough: Callable[[list[Candidate]], bool],
    raw: bool = False,
) -> tuple[list[Candidate], str]:
    """Candidates best first, and which expression matched (``all``, ``any`` or ``raw``)."""
    for kind, expr in _expressions(query, raw):
        found = _candidates(conn, expr, scope, enough, query, raw)
        if found:
            return found, kind
    return [], "raw" if raw else "all"


def _find(text_lower: str, term: str) -> int:
    """Where ``term`` (or the longest prefix of it, down to 3 letters) starts a word."""
    term = term.lower()
    if not term.isascii():
        return text_lower.find(term)
    for size in range(len(term), min(len(term), 3) - 1, -1):
        m = re.search(r"\b" + re.escape(term[:size]), text_lower)
        if m:
            return m.start()
    return -1


def make_snippet(text: str, terms: Sequence[str], *, width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` around the first match of ``terms``."""
    lower = text.lower()
    found = [p for p in (_find(lower, t) for t in terms) if p >= 0]
    at = min(found) if found else 0
    start = max(0, at - width // 3)
    end = min(len(text), start + width)
    body = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + body + ("…" if end < len(text) else "")


def hydrate(
    conn: sqlite3.Connection, chosen: Sequence[Candidate], query: str
) -> list[dict[str, Any]]:
    """Hit dicts (snippet, flags, session) for the chosen candidates, in their order."""
    if not chosen:
        return []
    terms = query_terms(query)
    ids = [c.message_id for c in chosen]
    rows = conn.execute(_DETAILS + f"({', '.join('?' * len(ids))})", ids).fetchall()
    by_id = {r[0]: r for r in rows}
    hits = []
    for c in chosen:
        r = by_id[c.message_id]
        message = row_to_message(r[10:])
        hits.append(
            {
                "session_id": r[1],
                "message_id": r[0],
                "role": r[2],
                "snippet": make_snippet(indexed_text(message), terms),
                "score": float(f"{-c.score:.4g}"),
                "timestamp": r[3],
                "active": bool(r[4]),
                "compacted": bool(r[5]),
                "is_summary": bool(r[6]),
                "tool_name": r[7],
                "root_session_id": r[8],
                "title": r[9],
            }
        )
    return hits
