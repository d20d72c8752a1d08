"""Full-text search over stored messages and the four modes of ``session_search``.

No LLM is called: discover ranks FTS5 hits (bm25) and groups them by lineage
root, scroll shows the messages around one message, read shows a session
(its head and tail when long), browse lists recent conversations.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from ..messages import content_text
from . import queries
from .errors import SessionNotFoundError
from .hits import Candidate, Within, hydrate, ranked
from .rows import MESSAGE_COLUMNS, row_to_message
from .semantic import SEMANTIC_CANDIDATES, SessionVectors, fuse
from .views import ORDER, ORDER_DESC, POSITION

SORTS = ("newest", "oldest")
DEFAULT_LIMIT = 3
MAX_LIMIT = 10  # results an agent gets at once; more floods its context
DEFAULT_WINDOW = 5
MAX_WINDOW = 20
MAX_QUERY_CHARS = 1_000  # a search is a question: words, not a pasted document
MAX_OFFSET = 90  # conversations a caller may page past: ten pages of the largest limit
HITS_PER_GROUP = 3  # hits shown per conversation in discover mode
READ_HEAD = 20  # a long session is read as its first READ_HEAD ...
READ_TAIL = 10  # ... and last READ_TAIL messages
MESSAGE_CHARS = 1_500  # per message in scroll/read; recall gives the full text
PREVIEW_CHARS = 160


def iso(ts: float | None) -> str | None:
    """Unix time as ISO-8601 UTC with seconds, for tool results."""
    if ts is None:
        return None
    try:
        return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")
    except (ValueError, OverflowError, OSError, TypeError):
        return None  # a time no date can show (another program wrote it): none rather than fail


def check_query(query: str) -> None:
    """Refuse a query longer than ``MAX_QUERY_CHARS`` (a question, not a document).

    Raises:
        ValueError: it is longer; the message says by how much.
    """
    if isinstance(query, str) and len(query) > MAX_QUERY_CHARS:
        raise ValueError(
            f"query is {len(query):,} characters; at most {MAX_QUERY_CHARS:,} "
            "(search with the few words that matter)"
        )


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" … [{len(text) - limit} more characters]"


def search(
    conn: sqlite3.Connection,
    query: str,
    *,
    limit: int = DEFAULT_LIMIT,
    exclude_session_id: str | None = None,
    user_id: str | None = None,
    raw: bool = False,
    vectors: SessionVectors | None = None,
    within: Within | None = None,
) -> list[dict[str, Any]]:
    """Best-ranked matching messages (see ``SessionDB.search``)."""
    queries.check_limit(limit)
    check_query(query)
    excluded = queries.ancestors(conn, exclude_session_id) if exclude_session_id else []
    scope = (within or Within()).scope(user_id=user_id, excluded=frozenset(excluded))
    found, _ = ranked(conn, query, scope=scope, enough=lambda c: len(c) >= limit, raw=raw)
    if vectors is not None and not raw:
        found = fuse(found, vectors.nearest(conn, query, scope=scope, k=SEMANTIC_CANDIDATES))
    return hydrate(conn, found[:limit], query)


def _enough_roots(limit: int) -> Callable[[list[Candidate]], bool]:
    return lambda found: len({c.root_session_id for c in found}) >= limit


def _choose(found: Sequence[Candidate], limit: int) -> list[Candidate]:
    """The best hits of the best ``limit`` lineages, at most HITS_PER_GROUP each."""
    per_root: dict[str, int] = {}
    chosen = []
    for c in found:
        if c.root_session_id not in per_root:
            if len(per_root) == limit:
                continue
            per_root[c.root_session_id] = 0
        if per_root[c.root_session_id] < HITS_PER_GROUP:
            per_root[c.root_session_id] += 1
            chosen.append(c)
    return chosen


def _group(hits: Sequence[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for hit in hits:
        root = hit["root_session_id"]
        if root not in groups:
            groups[root] = {
                "root_session_id": root,
                "title": hit["title"],
                "best_score": hit["score"],
                "session_ids": [],
                "hits": [],
            }
        group = groups[root]
        if hit["session_id"] not in group["session_ids"]:
            group["session_ids"].append(hit["session_id"])
        group["hits"].append(_tool_hit(hit))
    for group in groups.values():
        group["hits"].sort(key=lambda h: h["time"] or "", reverse=sort == "newest")
    return list(groups.values())


def _tool_hit(hit: dict[str, Any]) -> dict[str, Any]:
    out = {k: hit[k] for k in ("session_id", "message_id", "role", "snippet", "score")}
    out["time"] = iso(hit["timestamp"])
    if hit["tool_name"]:
        out["tool_name"] = hit["tool_name"]
    if hit["compacted"]:
        out["compacted"] = True  # summarised away; session_recall on its summary gets it back
    if hit["is_summary"]:
        out["is_summary"] = True
    return out


def discover(
    conn: sqlite3.Connection,
    query: str,
    *,
    limit: int,
    sort: str,
    session_id: str | None,
    current_session_id: str | None,
    user_id: str | None,
    raw: bool = False,
    vectors: SessionVectors | None = None,
    within: Within | None = None,
    offset: int = 0,
) -> dict[str, Any]:
    """Discover mode: ranked hits grouped by lineage root, the current context excluded.

    With ``vectors`` the messages nearest in meaning are fused with the BM25
    hits (``semantic.fuse``); ``match`` says ``semantic`` when only they matched.
    ``offset`` skips that many of the best conversations (to page on).
    """
    only = None
    if session_id is not None:
        queries.require_session(conn, session_id, user_id=user_id)
        only = frozenset(queries.ancestors(conn, session_id))
    excluded = queries.ancestors(conn, current_session_id) if current_session_id else []
    scope = (within or Within()).scope(user_id=user_id, excluded=frozenset(excluded), only=only)
    wanted = offset + limit
    found, kind = ranked(conn, query, scope=scope, enough=_enough_roots(wanted), raw=raw)
    by_words = {c.message_id for c in found}
    if vectors is not None and not raw:
        near = vectors.nearest(conn, query, scope=scope, k=SEMANTIC_CANDIDATES)
        if near and not found:
            kind = "semantic"
        found = fuse(found, near)
    chosen = _choose(found, wanted)
    if offset:
        skipped = set(list(dict.fromkeys(c.root_session_id for c in chosen))[:offset])
        chosen = [c for c in chosen if c.root_session_id not in skipped]
    results = _group(hydrate(conn, chosen, query), sort)
    for group in results:
        for hit in group["hits"]:
            if hit["message_id"] not in by_words:
                hit["by_meaning"] = True  # no word of the query matched it
    for group in results:
        group["root_session_id"] = queries.visible_root(conn, group["root_session_id"], user_id)
    return {
        "mode": "discover",
        "query": query,
        "match": kind,
        "count": len(results),
        "results": results,
    }


def message_entry(record: dict[str, Any], *, chars: int = MESSAGE_CHARS) -> dict[str, Any]:
    """A stored message as a tool result shows it: ids, flags, clipped text."""
    message = record["message"]
    out: dict[str, Any] = {"message_id": record["id"], "role": message["role"]}
    out["content"] = _clip(content_text(message.get("content")), chars)
    calls = []
    for call in message.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            args = fn.get("arguments")
            calls.append({"name": fn.get("name"), "arguments": _clip(str(args or ""), chars)})
    if calls:
        out["tool_calls"] = calls
    if record["tool_name"]:
        out["tool_name"] = record["tool_name"]
    out["time"] = iso(record["timestamp"])
    if record["compacted"]:
        out["compacted"] = True
    if record["is_summary"]:
        out["is_summary"] = True
    return out


def _neighbours(
    conn: sqlite3.Connection, record: dict[str, Any], window: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool, bool]:
    # A live message is shown among live ones; a compacted one in write order.
    if record["active"]:
        key, live, order, order_desc = POSITION, " AND m.active = 1", ORDER, ORDER_DESC
        value: tuple[Any, ...] = position_of(conn, record["id"])
    else:
        key, live, order, order_desc = "(m.id)", "", "m.id", "m.id DESC"
        value = (record["id"],)
    marks = ", ".join("?" * len(value))
    base = f"{queries.RECORD_SELECT} WHERE m.session_id = ?{live} AND {key}"
    before = conn.execute(
        f"{base} < ({marks}) ORDER BY {order_desc} LIMIT ?",
        (record["session_id"], *value, window + 1),
    ).fetchall()
    after = conn.execute(
        f"{base} > ({marks}) ORDER BY {order} LIMIT ?", (record["session_id"], *value, window + 1)
    ).fetchall()
    more_before, more_after = len(before) > window, len(after) > window
    prior = [queries.record_to_dict(r) for r in reversed(before[:window])]
    later = [queries.record_to_dict(r) for r in after[:window]]
    return prior, later, more_before, more_after


def position_of(conn: sqlite3.Connection, message_id: int) -> tuple[Any, ...]:
    """Where a message sits in its session, as the row value ``POSITION`` compares."""
    row = conn.execute(f"SELECT {POSITION[1:-1]} FROM hc_messages m WHERE m.id = ?", (message_id,))
    return tuple(row.fetchone())


def scroll(
    conn: sqlite3.Connection,
    around_message_id: int,
    *,
    session_id: str | None,
    window: int,
    user_id: str | None,
) -> dict[str, Any]:
    """Scroll mode: ``window`` messages either side of one message."""
    if session_id is not None:
        queries.require_session(conn, session_id, user_id=user_id)
    row = conn.execute(f"{queries.RECORD_SELECT} WHERE m.id = ?", (around_message_id,)).fetchone()
    record = queries.record_to_dict(row) if row else None
    owner = queries.fetch_session(conn, record["session_id"]) if record else None
    if (
        record is None
        or not queries.owned_by(owner, user_id)
        or (session_id is not None and record["session_id"] != session_id)
    ):
        # Names no session: the message may exist in another user's one.
        raise SessionNotFoundError(None, message_id=around_message_id)
    prior, later, more_before, more_after = _neighbours(conn, record, window)
    return {
        "mode": "scroll",
        "session_id": record["session_id"],
        "around_message_id": around_message_id,
        "window": window,
        "messages": [message_entry(r) for r in (*prior, record, *later)],
        "more_before": more_before,
        "more_after": more_after,
    }


def session_entry(
    conn: sqlite3.Connection, session: dict[str, Any], user_id: str | None
) -> dict[str, Any]:
    """A session as a tool result shows it; lineage links to other users' sessions left out."""
    out = {
        "session_id": session["id"],
        "title": session["title"],
        "source": session["source"],
        "model": session["model"],
        "started_at": iso(session["started_at"]),
        "ended_at": iso(session["ended_at"]),
        "end_reason": session["end_reason"],
        "message_count": session["message_count"],
    }
    parent = session["parent_session_id"]
    if parent and queries.owned_by(queries.fetch_session(conn, parent), user_id):
        out["parent_session_id"] = parent
    root = queries.visible_root(conn, session["root_session_id"], user_id)
    if root != session["id"]:
        out["root_session_id"] = root
    return out


def read(conn: sqlite3.Connection, session_id: str, *, user_id: str | None) -> dict[str, Any]:
    """Read mode: a whole session, or its first and last messages when it is long."""
    session = queries.require_session(conn, session_id, user_id=user_id)
    records = queries.load_records(conn, session_id)
    omitted = 0
    if len(records) > READ_HEAD + READ_TAIL:
        omitted = len(records) - READ_HEAD - READ_TAIL
        records = records[:READ_HEAD] + records[-READ_TAIL:]
    return {
        "mode": "read",
        "session": session_entry(conn, session, user_id),
        "messages": [message_entry(r) for r in records],
        "omitted": omitted,
        "omitted_after_message_id": records[READ_HEAD - 1]["id"] if omitted else None,
    }


def _preview(conn: sqlite3.Connection, session_id: str) -> str:
    row = conn.execute(
        f"SELECT {', '.join('m.' + c for c in MESSAGE_COLUMNS)} FROM hc_messages m "
        "WHERE m.session_id = ? AND m.role = 'user' AND m.active = 1 AND m.is_summary = 0 "
        f"ORDER BY {ORDER} LIMIT 1",
        (session_id,),
    ).fetchone()
    if row is None:
        return ""
    text = content_text(row_to_message(row).get("content"))
    return _clip(" ".join(text.split()), PREVIEW_CHARS)


def _browse_entry(conn: sqlite3.Connection, root: str, user_id: str | None) -> dict[str, Any]:
    """A lineage as browse shows it: its newest session, previewed by its first one.

    Both are the user's own: a lineage may hold other users' sessions too
    (children of a session without a user).
    """
    mine, args = ("", ()) if user_id is None else (" AND user_id = ?", (user_id,))
    base = (
        f"{queries.LINEAGE} {queries.SESSION_SELECT} WHERE id IN (SELECT id FROM lineage)"
        f"{mine} ORDER BY started_at"
    )
    latest = conn.execute(f"{base} DESC, rowid DESC LIMIT 1", (root, *args)).fetchone()
    first = conn.execute(f"{base}, rowid LIMIT 1", (root, *args)).fetchone()
    entry = session_entry(conn, queries.session_to_dict(latest), user_id)
    entry["preview"] = _preview(conn, first[0])
    return entry


def browse(
    conn: sqlite3.Connection,
    *,
    limit: int,
    sort: str,
    current_session_id: str | None,
    user_id: str | None,
    within: Within | None = None,
    offset: int = 0,
) -> dict[str, Any]:
    """Browse mode: recent conversations (one entry per lineage), the current one excluded.

    ``within`` keeps the sessions of its sources started in its time range;
    ``offset`` skips that many conversations (to page on).
    """
    where: list[str] = []
    args: list[Any] = []
    if user_id is not None:
        where.append("user_id = ?")
        args.append(user_id)
    if within is not None:
        if within.sources is not None:
            where.append(f"source IN ({', '.join('?' * len(within.sources))})")
            args.extend(sorted(within.sources))
        if within.since is not None:
            where.append("started_at >= ?")
            args.append(within.since)
        if within.until is not None:
            where.append("started_at < ?")
            args.append(within.until)
    current = queries.fetch_session(conn, current_session_id) if current_session_id else None
    if current is not None:
        where.append("root_session_id != ?")
        args.append(current["root_session_id"])
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    order = "max(started_at) DESC" if sort == "newest" else "min(started_at) ASC"
    roots = conn.execute(
        f"SELECT root_session_id, count(*) FROM hc_sessions {clause} "
        f"GROUP BY root_session_id ORDER BY {order} LIMIT ? OFFSET ?",
        (*args, limit, offset),
    ).fetchall()
    sessions = []
    for root, count in roots:
        entry = _browse_entry(conn, root, user_id)
        entry["sessions_in_lineage"] = count
        sessions.append(entry)
    return {"mode": "browse", "sort": sort, "count": len(sessions), "sessions": sessions}


def _bounded(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"{name} must be an integer from {low} to {high}, got {queries.describe(value)}"
        )
    return min(max(value, low), high)


def _message_id(value: Any, name: str) -> int:
    # Refused, not clamped: a clamped id would show some other message.
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= queries.MAX_ID:
        raise ValueError(
            f"{name} must be a message id (an integer from 1 to 2**63-1), "
            f"got {queries.describe(value)}"
        )
    return value


def session_search(
    conn: sqlite3.Connection,
    *,
    query: str | None = None,
    session_id: str | None = None,
    around_message_id: int | None = None,
    window: int = DEFAULT_WINDOW,
    limit: int = DEFAULT_LIMIT,
    sort: str = "newest",
    current_session_id: str | None = None,
    user_id: str | None = None,
    raw: bool = False,
    vectors: SessionVectors | None = None,
    within: Within | None = None,
    offset: int = 0,
) -> dict[str, Any]:
    """The ``session_search`` tool; the mode follows from the arguments given.

    ``query`` -> discover (within ``session_id`` when given); ``around_message_id``
    -> scroll; ``session_id`` alone -> read; nothing -> browse. ``limit`` is
    clamped to 1-10 and ``window`` to 1-20. ``within`` (sources, time range) and
    ``offset`` (conversations to skip) apply to discover and browse.

    Raises:
        ValueError: ``sort`` is not newest/oldest, a number is not an integer, or
            ``around_message_id`` is not a message id (1 to 2**63-1).
        SessionNotFoundError: the session or message does not exist for this user
            (a message is reported as ``message N not found``, naming no session).
        SearchQueryError: a raw query is malformed.
    """
    for key, value in (("query", query), ("session_id", session_id)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{key} must be a string, got {value!r}")
    if query is not None:
        check_query(query)
    if sort not in SORTS:
        raise ValueError(f"sort must be 'newest' or 'oldest', got {sort!r}")
    limit = _bounded(limit, "limit", 1, MAX_LIMIT)
    window = _bounded(window, "window", 1, MAX_WINDOW)
    offset = _bounded(offset, "offset", 0, MAX_OFFSET)
    if query is not None and query.strip():
        return discover(
            conn,
            query,
            limit=limit,
            sort=sort,
            session_id=session_id,
            current_session_id=current_session_id,
            user_id=user_id,
            raw=raw,
            vectors=vectors,
            within=within,
            offset=offset,
        )
    if around_message_id is not None:
        around = _message_id(around_message_id, "around_message_id")
        return scroll(conn, around, session_id=session_id, window=window, user_id=user_id)
    if session_id is not None:
        return read(conn, session_id, user_id=user_id)
    return browse(
        conn,
        limit=limit,
        sort=sort,
        current_session_id=current_session_id,
        user_id=user_id,
        within=within,
        offset=offset,
    )
