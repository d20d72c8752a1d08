"""Storing the sessions read from other agents' transcripts (``foreign``); idempotent.

Each session is stored under its ``foreign`` key (``claude-code:<id>``), and
the ``foreign_imports`` table records how far it got: the file and how many
bytes of it were read, how many of its messages are stored for good, which
rows hold its last turn while that may still change, and how many of its
compaction boundaries were applied. Importing again therefore adds only what
is new: a file that grew gets its new messages appended (its last turn
replaced when it changed), an unchanged one adds nothing, and one that
changed otherwise (rewritten, shortened) is left alone and reported.

A compaction boundary is replayed with the store's own machinery
(``compaction.persist``, in place): the messages before it are stored first,
then the agent's summary replaces them, recording them as its sources, so
``recall`` on the summary returns them.

Nothing here starts or ends a transaction: ``SessionDB.import_foreign`` runs
one file in one write transaction.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..tokens import estimate_message_tokens_rough, estimate_messages_tokens_rough
from . import compaction, queries
from .foreign import ParsedFile, ParsedSession
from .history import TIMESTAMP_KEY, Compaction
from .layout import FOREIGN_IMPORTS_TABLE
from .rows import MESSAGE_COLUMNS, canonical, row_to_message

# Session columns set from a transcript when the file has them (Hermes's schema does).
_SESSION_FACTS = ("cwd", "git_branch")
# The number a title gets when another session holds it already (``queries.free_title``).
_NUMBERED_TITLE_RE = re.compile(r" #\d+$")
# What a summary row carries, beside its text: it is a compaction summary.
SUMMARY_KEY = "_compressed_summary"


@dataclass
class ForeignImportReport:
    """What importing one transcript file did.

    Attributes:
        added: Sessions stored for the first time.
        extended: Sessions that got new messages (or their last turn updated).
        unchanged: Sessions with nothing new.
        diverged: (session id, reason) of sessions left as they are.
        messages: Messages added (net: a replaced last turn counts its growth).
        compactions: Compaction boundaries applied.
    """

    path: str
    added: list[str] = field(default_factory=list)
    extended: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    diverged: list[tuple[str, str]] = field(default_factory=list)
    messages: int = 0
    compactions: int = 0


@dataclass(frozen=True)
class FileMark:
    """Where a transcript file stood when it was last imported.

    Attributes:
        size: Bytes read (complete lines).
        mtime: Its modification time then.
        sessions: The sessions stored from it.
    """

    size: int
    mtime: float
    sessions: tuple[str, ...]


@dataclass(frozen=True)
class _State:
    """A ``foreign_imports`` row: how far a session's import got."""

    path: str | None = None
    messages: int = 0
    provisional: tuple[int, ...] = ()
    compactions: int = 0
    last_hash: str | None = None


@dataclass(frozen=True)
class _Context:
    parsed: ParsedFile
    mtime: float
    user_id: str | None
    db_path: str
    session_columns: frozenset[str]


@dataclass(frozen=True)
class _Report:
    data: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


@dataclass(frozen=True)
class _ImportedCompaction:
    """A compaction the agent made, in the shape ``compaction.persist`` takes."""

    messages: Sequence[Mapping[str, Any]]
    lineage: Sequence[Sequence[int]]
    tokens_before: int
    tokens_after: int
    report: _Report
    dropped: int = 0
    used_fallback: bool = False
    aborted: bool = False
    compressor_state: Mapping[str, Any] | None = None


def file_marks(conn: sqlite3.Connection) -> dict[str, FileMark]:
    """Transcript files imported -> their size and time when last read, and their sessions."""
    rows = conn.execute(
        f"SELECT f.path, f.size, f.mtime, f.session_id FROM main.{FOREIGN_IMPORTS_TABLE} f "
        "JOIN main.sessions s ON s.id = f.session_id ORDER BY f.updated_at"
    )
    marks: dict[str, FileMark] = {}
    for path, size, mtime, session_id in rows:
        known = marks.get(path)
        ids = (*known.sessions, session_id) if known else (session_id,)
        marks[path] = FileMark(int(size), float(mtime), ids)
    return marks


def store_file(
    conn: sqlite3.Connection,
    parsed: ParsedFile,
    *,
    mtime: float,
    user_id: str | None,
    path: str,
) -> ForeignImportReport:
    """Store every session of one parsed transcript file (see the module doc).

    Args:
        mtime: The file's modification time when it was read.
        user_id: Owner of the sessions created; a stored session of another user is left alone.
        path: The database file, for error messages.
    """
    columns = frozenset(r[1] for r in conn.execute("PRAGMA main.table_info(sessions)"))
    ctx = _Context(parsed, mtime, user_id, path, columns)
    report = ForeignImportReport(parsed.path)
    for session in parsed.sessions:
        _store_session(conn, session, ctx, report)
    return report


def _store_session(
    conn: sqlite3.Connection, ps: ParsedSession, ctx: _Context, report: ForeignImportReport
) -> None:
    state = _load_state(conn, ps.key)
    session = queries.fetch_session(conn, ps.key)
    if session is None:
        conn.execute(f"DELETE FROM main.{FOREIGN_IMPORTS_TABLE} WHERE session_id = ?", (ps.key,))
        _create(conn, ps, ctx)
        state, status = _State(), "added"
    else:
        why = _refusal(conn, session, state, ps, ctx)
        if why is not None:
            report.diverged.append((ps.key, why))
            return
        assert state is not None
        status = "unchanged" if _same(conn, ps, state) else "extended"
    provisional = state.provisional
    if status != "unchanged":
        provisional = _apply(conn, ps, state, ctx, report)
        report.messages += max(0, len(ps.messages) - state.messages - len(state.provisional))
    if session is not None:
        _update_facts(conn, session, ps, ctx)
    _save_state(conn, ps, ctx, provisional)
    getattr(report, status).append(ps.key)


def _load_state(conn: sqlite3.Connection, key: str) -> _State | None:
    row = conn.execute(
        "SELECT path, messages, provisional, compactions, last_hash "
        f"FROM main.{FOREIGN_IMPORTS_TABLE} WHERE session_id = ?",
        (key,),
    ).fetchone()
    if row is None:
        return None
    ids = tuple(int(i) for i in json.loads(row[2] or "[]"))
    return _State(row[0], int(row[1]), ids, int(row[3]), row[4])


def _message_hash(message: Mapping[str, Any]) -> str:
    return hashlib.sha1(canonical(message).encode("utf-8", "surrogatepass")).hexdigest()


def _refusal(
    conn: sqlite3.Connection,
    session: Mapping[str, Any],
    state: _State | None,
    ps: ParsedSession,
    ctx: _Context,
) -> str | None:
    """Why a stored session must be left as it is, or None when it can be brought up to date."""
    if state is None:
        return (
            f"a session with this id exists that was not imported from {ps.source} "
            "transcripts into this store; delete it to import the transcript again"
        )
    if ctx.user_id is not None and session["user_id"] != ctx.user_id:
        return "it belongs to another user"
    n = state.messages
    shrank = len(ps.messages) < n or ps.stable < n or len(ps.compactions) < state.compactions
    if shrank or (n and _message_hash(ps.messages[n - 1]) != state.last_hash):
        return (
            f"{ctx.parsed.path} changed (not only grew) since it was imported; delete the "
            "session to import it afresh"
        )
    if not _intact(conn, ps.key, state.provisional):
        return "its last turn was changed in this store since it was imported"
    return None


def _intact(conn: sqlite3.Connection, key: str, ids: Sequence[int]) -> bool:
    """Whether the rows of the open last turn are still live, uncompacted rows of the session."""
    if not ids:
        return True
    marks = ", ".join("?" * len(ids))
    found = conn.execute(
        f"SELECT count(*) FROM main.messages WHERE session_id = ? AND id IN ({marks}) "
        "AND coalesce(active, 1) = 1 AND coalesce(compacted, 0) = 0",
        (key, *ids),
    ).fetchone()[0]
    return int(found) == len(ids)


def _same(conn: sqlite3.Connection, ps: ParsedSession, state: _State) -> bool:
    """Whether the transcript holds exactly what is stored."""
    if ps.stable != state.messages or len(ps.compactions) != state.compactions:
        return False
    tail = ps.messages[state.messages :]
    if len(tail) != len(state.provisional):
        return False
    stored = _load_by_id(conn, state.provisional)
    return [canonical(m) for m in stored] == [canonical(m) for m in tail]


def _load_by_id(conn: sqlite3.Connection, ids: Sequence[int]) -> list[dict[str, Any]]:
    if not ids:
        return []
    cols = ", ".join(f"m.{c}" for c in MESSAGE_COLUMNS)
    marks = ", ".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT m.id, {cols} FROM hc_messages m WHERE m.id IN ({marks}) ORDER BY m.id", tuple(ids)
    )
    return [row_to_message(r[1:]) for r in rows]


def _create(conn: sqlite3.Connection, ps: ParsedSession, ctx: _Context) -> None:
    queries.insert_session(
        conn,
        ps.key,
        source=ps.source,
        model=ps.model,
        parent_session_id=None,
        title=ps.title,
        user_id=ctx.user_id,
        path=ctx.db_path,
    )
    if ps.started_at is not None:
        conn.execute("UPDATE sessions SET started_at = ? WHERE id = ?", (ps.started_at, ps.key))
    facts = {"cwd": ps.cwd, "git_branch": ps.git_branch}
    for column in _SESSION_FACTS:
        if column in ctx.session_columns and facts[column] is not None:
            conn.execute(f"UPDATE sessions SET {column} = ? WHERE id = ?", (facts[column], ps.key))


def _update_facts(
    conn: sqlite3.Connection, session: Mapping[str, Any], ps: ParsedSession, ctx: _Context
) -> None:
    """Fill what the session lacked; the format's own title replaces another title."""
    conn.execute("UPDATE sessions SET model = coalesce(model, ?) WHERE id = ?", (ps.model, ps.key))
    facts = {"cwd": ps.cwd, "git_branch": ps.git_branch}
    for column in _SESSION_FACTS:
        if column in ctx.session_columns and facts[column] is not None:
            conn.execute(
                f"UPDATE sessions SET {column} = coalesce({column}, ?) WHERE id = ?",
                (facts[column], ps.key),
            )
    stored = session["title"]
    base = _NUMBERED_TITLE_RE.sub("", stored) if stored else None
    if ps.title and (stored is None or (ps.own_title and base != ps.title)):
        title = queries.free_title(conn, ps.title)
        conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, ps.key))


def _apply(
    conn: sqlite3.Connection,
    ps: ParsedSession,
    state: _State,
    ctx: _Context,
    report: ForeignImportReport,
) -> tuple[int, ...]:
    """Replace the stored open turn, append what is new, replay new compactions.

    Returns:
        The ids of the rows holding the session's (new) open last turn.
    """
    if state.provisional:
        marks = ", ".join("?" * len(state.provisional))
        conn.execute(f"DELETE FROM main.messages WHERE id IN ({marks})", state.provisional)
        queries.refresh_counts(conn, ps.key)
    done = state.messages
    for boundary in ps.compactions[state.compactions :]:
        queries.append(conn, ps.key, ps.messages[done : boundary.at])
        done = max(done, boundary.at)
        _compact(conn, ps, boundary, ctx)
        report.compactions += 1
    queries.append(conn, ps.key, ps.messages[done : ps.stable])
    done = max(done, ps.stable)
    return tuple(queries.append(conn, ps.key, ps.messages[done:]))


def _compact(
    conn: sqlite3.Connection, ps: ParsedSession, boundary: Compaction, ctx: _Context
) -> None:
    """Replace the live messages with the agent's summary, recording them as its sources."""
    summary: dict[str, Any] = {"role": "user", "content": boundary.summary, SUMMARY_KEY: True}
    if boundary.timestamp is not None:
        summary[TIMESTAMP_KEY] = boundary.timestamp
    before = queries.load_messages(conn, ps.key)
    if not before:  # nothing to stand for: kept as a summary message all the same
        queries.append(conn, ps.key, [summary])
        return
    outcome = _ImportedCompaction(
        messages=[summary],
        lineage=[list(range(len(before)))],
        tokens_before=estimate_messages_tokens_rough(before),
        tokens_after=estimate_message_tokens_rough(summary),
        report=_Report({"imported_from": ps.source, "file": ctx.parsed.path}),
    )
    compaction.persist(conn, ps.key, before, outcome, in_place=True, path=ctx.db_path)


def _save_state(
    conn: sqlite3.Connection, ps: ParsedSession, ctx: _Context, provisional: Sequence[int]
) -> None:
    last = _message_hash(ps.messages[ps.stable - 1]) if ps.stable else None
    conn.execute(
        f"INSERT INTO main.{FOREIGN_IMPORTS_TABLE} (session_id, format, path, size, mtime, "
        "messages, provisional, compactions, last_hash, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET "
        "format = excluded.format, path = excluded.path, size = excluded.size, "
        "mtime = excluded.mtime, messages = excluded.messages, "
        "provisional = excluded.provisional, compactions = excluded.compactions, "
        "last_hash = excluded.last_hash, updated_at = excluded.updated_at",
        (
            ps.key,
            ctx.parsed.format,
            ctx.parsed.path,
            ctx.parsed.size,
            ctx.mtime,
            ps.stable,
            json.dumps(list(provisional)),
            len(ps.compactions),
            last,
            time.time(),
        ),
    )
