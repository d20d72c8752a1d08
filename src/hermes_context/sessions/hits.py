"""Ranked full-text hits: candidate pools from FTS5, scope filters, scoring, snippets.

FTS5's ``bm25()`` reads the whole doclist of every query term to compute its
inverse document frequency, so at a million messages a query made of common
tokens (``src/billing/load_call.py``: ``src``, ``py``, ``load`` occur in
most tool output) costs 100 ms or more however few rows are wanted. So the
index is only asked for the newest ``CANDIDATE_POOL`` matching rowids (an
``ORDER BY rowid DESC`` walk that stops early), and those candidates are
ranked here with BM25 over the pool: term frequency in the indexed text,
document length, and term rarity within the pool. A query with fewer matches
than the pool (most specific queries) is ranked over all its matches; a very
common word is ranked over its newest matches — recency is part of what an
agent means by "the time we discussed X". Older pools are read only while too
few candidates survive the user / session filters.
"""

from __future__ import annotations

import math
import re
import sqlite3
import unicodedata
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import without_lone_surrogates
from .connection import is_busy
from .dialect import dialect_of
from .errors import SearchQueryError
from .fts import CJK_RUN_RE, bigrams, fold, indexed_text, query_terms, quote_query, raw_query
from .layout import SEARCH_TABLE
from .rows import MESSAGE_COLUMNS, row_to_message

# Newest matching rows ranked per round (see the module docstring).
CANDIDATE_POOL = 500
SNIPPET_CHARS = 200
# BM25 constants (the usual ones, as in FTS5's bm25()).
_K1 = 1.2
_B = 0.75
_MAX_ROWID = 2**63 - 1
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "es", "ed", "ly", "s")

_POOL = (
    f"SELECT rowid FROM {SEARCH_TABLE} WHERE {SEARCH_TABLE} MATCH ? AND rowid < ? "
    "ORDER BY rowid DESC LIMIT ?"
)
_POOL_ROWS = (
    "SELECT m.id, m.session_id, m.compacted, s.root_session_id, s.user_id, s.source, "
    "m.timestamp, coalesce(m.search_text, m.content, '') FROM hc_messages m "
    "JOIN hc_sessions s ON s.id = m.session_id WHERE m.id IN "
)
_DETAILS = (
    "SELECT m.id, m.session_id, m.role, m.timestamp, m.active, m.compacted, m.is_summary, "
    "m.tool_name, s.root_session_id, s.title, "
    + ", ".join("m." + c for c in MESSAGE_COLUMNS)
    + " FROM hc_messages m JOIN hc_sessions s ON s.id = m.session_id WHERE m.id IN "
)


@dataclass(frozen=True)
class Candidate:
    """One matching message before its text is loaded."""

    message_id: int
    score: float  # higher is better
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
        sources: When set, only sessions whose ``source`` (the agent or front
            end that wrote them: ``cli``, ``bridge``, ``claude-code``...) is one of these.
        since: Only messages written at or after this time (epoch seconds).
        until: Only messages written before this time (epoch seconds).
    """

    user_id: str | None = None
    excluded: Collection[str] = ()
    only: Collection[str] | None = None
    sources: Collection[str] | None = None
    since: float | None = None
    until: float | None = None

    def keeps(self, row: Sequence[Any]) -> bool:
        """Whether a row is in scope: its first seven columns are ``_POOL_ROWS``'s
        (id, session, compacted, root, user, source, timestamp)."""
        _, session_id, compacted, _, user_id, source, timestamp = row[:7]
        if self.user_id is not None and user_id != self.user_id:
            return False
        if self.only is not None and session_id not in self.only:
            return False
        if self.sources is not None and source not in self.sources:
            return False
        if self.since is not None and (timestamp is None or timestamp < self.since):
            return False
        if self.until is not None and (timestamp is None or timestamp >= self.until):
            return False
        return not (session_id in self.excluded and not compacted)


@dataclass(frozen=True)
class Within:
    """What a caller narrows a search to: the sessions' sources and a time range.

    Attributes:
        sources: Only sessions written by these (``cli``, ``bridge``,
            ``claude-code``, ``codex``...); None: all.
        since: Only messages written at or after this time (epoch seconds).
        until: Only messages written before this time (epoch seconds).
    """

    sources: frozenset[str] | None = None
    since: float | None = None
    until: float | None = None

    def scope(self, **kwargs: Any) -> Scope:
        """A ``Scope`` with these filters and ``kwargs`` (user, excluded, only)."""
        return Scope(sources=self.sources, since=self.since, until=self.until, **kwargs)

    @classmethod
    def parse(cls, sources: Any = None, since: Any = None, until: Any = None) -> Within | None:
        """The filters as a person or a model writes them; None when there are none.

        Args:
            sources: A source name or a list of them.
            since, until: ISO 8601 dates or times (``2026-11-30``,
                ``2026-11-30T14:00Z``); UTC unless they say otherwise.

        Raises:
            ValueError: one of them cannot be read, or ``until`` is not later
                than ``since``; the message says which and how to write it.
        """
        if isinstance(sources, str):
            sources = [sources]
        if sources is not None and (
            not isinstance(sources, (list, tuple))
            or not all(isinstance(s, str) and s.strip() for s in sources)
        ):
            raise ValueError("source must be agent names such as claude-code, codex or cli")
        start = None if since is None else parse_time(since, "since")
        end = None if until is None else parse_time(until, "until")
        if start is not None and end is not None and end <= start:
            raise ValueError("until must be later than since")
        if not sources and start is None and end is None:
            return None
        return cls(frozenset(s.strip() for s in sources) if sources else None, start, end)


def parse_time(value: Any, name: str) -> float:
    """An ISO 8601 date or time as epoch seconds (UTC unless it says otherwise).

    Raises:
        ValueError: it is not one; the message names ``name`` and shows the forms.
    """
    import datetime as dt

    forms = "2026-11-30, 2026-11-30T14:00Z or 2026-11-30T14:00+02:00"
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be an ISO 8601 date or time such as {forms}")
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{name} {value.strip()[:40]!r} is not an ISO 8601 date or time ({forms})"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


def _expressions(conn: sqlite3.Connection, query: str, raw: bool) -> list[tuple[str, str]]:
    """(kind, FTS expression) to try in order: all words, then any word."""
    dialect = dialect_of(conn)
    if dialect is not None:
        return dialect.match_expressions(query, raw)
    if raw:
        return [("raw", raw_query(query))]
    return all_then_any(quote_query, query)


def all_then_any(build: Callable[..., str | None], query: str) -> list[tuple[str, str]]:
    """(kind, expression) for every word (``all``), then, when it differs, any word (``any``).

    Args:
        build: Makes the expression of ``query``, ORing the words with
            ``any_term=True``; None when the query holds no searchable word.
    """
    first = build(query)
    if first is None:
        return []
    second = build(query, any_term=True)
    out = [("all", first)]
    if second != first:
        out.append(("any", second or first))
    return out


def _execute(
    conn: sqlite3.Connection, sql: str, params: Sequence[Any], query: str, raw: bool
) -> list[tuple[Any, ...]]:
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        # Quoted expressions always parse; a raw one the user typed may not.
        if raw and not is_busy(exc):
            raise SearchQueryError(query, str(exc)) from exc
        raise


def needles(query: str) -> list[str]:
    """Lower-case substrings whose counts stand for the query terms' frequencies."""
    out = []
    for term in query_terms(query):
        term = term.lower()
        run = CJK_RUN_RE.search(term)
        if run:
            out.append(bigrams(run.group())[0])  # the indexed text holds CJK as bigrams
            continue
        for suffix in _SUFFIXES:
            if term.endswith(suffix) and len(term) - len(suffix) >= 3:
                term = term[: -len(suffix)]
                break
        out.append(term)
    return list(dict.fromkeys(out))


def _bm25(rows: Sequence[Sequence[Any]], terms: Sequence[str]) -> list[float]:
    """BM25 of each row's indexed text (last column), with the pool as the collection."""
    texts = [r[-1].lower() for r in rows]
    if not texts or not terms:
        return [0.0] * len(texts)
    lengths = [len(t) + 1 for t in texts]
    avg = sum(lengths) / len(lengths)
    counts = [[t.count(term) for term in terms] for t in texts]
    n = len(texts)
    idf = []
    for j in range(len(terms)):
        df = sum(1 for c in counts if c[j])
        idf.append(math.log(1 + (n - df + 0.5) / (df + 0.5)))
    scores = []
    for c, length in zip(counts, lengths, strict=True):
        norm = _K1 * (1 - _B + _B * length / avg)
        scores.append(sum(w * tf * (_K1 + 1) / (tf + norm) for w, tf in zip(idf, c, strict=True)))
    return scores


def _pool(
    conn: sqlite3.Connection, expr: str, upper: int, query: str, raw: bool
) -> tuple[list[tuple[Any, ...]], int]:
    """In-scope-checkable rows of the newest matches below ``upper``, and how many matched."""
    dialect = dialect_of(conn)
    if dialect is not None:
        ids = dialect.match_ids(expr, upper, CANDIDATE_POOL)
    else:
        ids = [r[0] for r in _execute(conn, _POOL, (expr, upper, CANDIDATE_POOL), query, raw)]
    if not ids:
        return [], 0
    rows = conn.execute(_POOL_ROWS + f"({', '.join('?' * len(ids))})", ids).fetchall()
    return rows, len(ids)


def _candidates(
    conn: sqlite3.Connection,
    expr: str,
    scope: Scope,
    enough: Callable[[list[Candidate]], bool],
    query: str,
    raw: bool,
) -> list[Candidate]:
    terms = needles(query)
    found: list[Candidate] = []
    upper = _MAX_ROWID
    while True:
        rows, matched = _pool(conn, expr, upper, query, raw)
        kept = [r for r in rows if scope.keeps(r)]
        found += [
            Candidate(r[0], score, r[1], r[3])
            for r, score in zip(kept, _bm25(kept, terms), strict=True)
        ]
        if matched < CANDIDATE_POOL or enough(found):
            break
        upper = min(r[0] for r in rows)
    found.sort(key=lambda c: (-c.score, -c.message_id))
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
    for kind, expr in _expressions(conn, query, raw):
        found = _candidates(conn, expr, scope, enough, query, raw)
        if found:
            return found, kind
    return [], "raw" if raw else "all"


# A snippet is placed by at most this many of the query's words, each looked for by at
# most this many of its first characters (and their prefixes): a query of thousands of
# characters must not cost seconds per hit.
MAX_SNIPPET_TERMS = 16
MAX_TERM_CHARS = 40


def _find(text_lower: str, term: str) -> int:
    """Where ``term`` (or the longest prefix of it, down to 3 letters) starts a word."""
    term = term.lower()[:MAX_TERM_CHARS]
    if not term.isascii():
        return text_lower.find(term)
    for size in range(len(term), min(len(term), 3) - 1, -1):
        m = re.search(r"\b" + re.escape(term[:size]), text_lower)
        if m:
            return m.start()
    return -1


def _folded_lower(text: str) -> tuple[str, list[int] | None]:
    """``text`` folded as the index folds it, lower-cased, and where each character came from.

    The positions are None when folding keeps every character in place.
    """
    lower = text.lower()
    if text.isascii() or (len(lower) == len(text) and unicodedata.is_normalized("NFKC", text)):
        return lower, None
    chars: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        folded = fold(ch).lower()
        chars.append(folded)
        origin.extend([i] * len(folded))
    return "".join(chars), origin


def make_snippet(text: str, terms: Sequence[str], *, width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` around the first match of ``terms``.

    Terms are located as search matches them (NFKC-folded), the snippet shows
    the stored text; a lone surrogate in it is replaced.
    """
    text = without_lone_surrogates(text)
    lower, origin = _folded_lower(text)
    terms = list(dict.fromkeys(terms))[:MAX_SNIPPET_TERMS]
    found = [p for p in (_find(lower, t) for t in terms) if p >= 0]
    at = min(found) if found else 0
    if origin is not None and found:
        at = origin[at]
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
                "score": float(f"{c.score:.4g}"),
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
