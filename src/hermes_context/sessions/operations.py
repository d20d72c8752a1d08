"""``SessionOperations``: the public session-store methods, whatever the database.

``SessionDB`` (SQLite) and ``PostgresSessionStore`` share these methods: each
runs the shared SQL of ``queries``, ``compaction`` and ``search`` in one
transaction of its store (``_read`` or ``_write``), so both stores give the
same results. A store supplies the transactions, the name errors carry
(``_where``), and what a search needs first (``_ready_for_search``).
"""

from __future__ import annotations

import abc
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

from ..errors import StoreError
from . import compaction, queries, search, transfer
from .hits import Within
from .semantic import SessionVectors

T = TypeVar("T")


class _Progress:
    """A progress callback that never repeats or goes back.

    A transaction retried after a busy error runs again from the start; the
    caller saw its first counts already.
    """

    def __init__(self, callback: Callable[[int], None]) -> None:
        self._callback = callback
        self._reported = 0

    def __call__(self, done: int) -> None:
        if done > self._reported:
            self._reported = done
            self._callback(done)


class SessionOperations(abc.ABC):
    """Sessions, their messages, full-text search and lossless compaction over one store."""

    # The semantic half of search, once ``use_semantic`` gives it an encoder (SQLite only).
    vectors: SessionVectors | None = None

    @property
    @abc.abstractmethod
    def _where(self) -> str:
        """The store as errors name it (a file path, a URL without its password)."""

    @abc.abstractmethod
    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a read transaction."""

    @abc.abstractmethod
    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a write transaction (writers one at a time)."""

    def _write_session(
        self, session_id: str, fn: Callable[[sqlite3.Connection], T], *, appends: bool = False
    ) -> T:
        """Run ``fn``, a write to one session, in a write transaction.

        A store whose writers run side by side (PostgreSQL) serialises the
        writes to one session, and all but ``appends`` to the whole store too;
        this one runs ``_write`` (writers one at a time).
        """
        return self._write(fn)

    @abc.abstractmethod
    def _ready_for_search(self) -> None:
        """Bring the full-text index up to date with what other programs stored."""

    def _require(self, conn: sqlite3.Connection, session_id: str) -> dict[str, Any]:
        return queries.require_session(conn, session_id, path=self._where)

    # -- sessions ---------------------------------------------------------

    def create_session(
        self,
        session_id: str | None = None,
        *,
        source: str = "cli",
        model: str | None = None,
        parent_session_id: str | None = None,
        title: str | None = None,
        user_id: str | None = None,
    ) -> str:
        """Start a session; return its id (generated when not given).

        A child (``parent_session_id``) joins its parent's lineage and user.
        """
        return self._write(
            lambda c: queries.insert_session(
                c,
                session_id,
                source=source,
                model=model,
                parent_session_id=parent_session_id,
                title=title,
                user_id=user_id,
                path=self._where,
            )
        )

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        """The session row as a dict (counters, lineage, compressor state), or None."""
        return self._read(lambda c: queries.fetch_session(c, session_id))

    def list_sessions(
        self, *, limit: int = 20, source: str | None = None, user_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Sessions, newest first, optionally only one source's or one user's.

        Raises:
            ValueError: ``limit`` is not a positive integer.
        """
        return self._read(
            lambda c: queries.list_sessions(c, limit=limit, source=source, user_id=user_id)
        )

    def end_session(self, session_id: str, end_reason: str) -> None:
        """Record that a session ended, and why (``user_exit``, ``compression``, ...).

        The first end is kept: a session rotated away (``compression``) and
        then closed stays ended by ``compression`` at its first time, which is
        what lineage (and Hermes) follow.
        """

        def run(conn: sqlite3.Connection) -> None:
            self._require(conn, session_id)
            conn.execute(
                "UPDATE sessions SET ended_at = coalesce(ended_at, ?), "
                "end_reason = coalesce(end_reason, ?) WHERE id = ?",
                (time.time(), end_reason, session_id),
            )

        self._write_session(session_id, run)

    def delete_session(self, session_id: str, *, cascade: bool = False) -> int:
        """Delete a session and its messages; return how many messages went.

        Args:
            cascade: Also delete the sessions rotated from it; without it a
                session with children is refused.
        """

        def run(conn: sqlite3.Connection) -> int:
            self._require(conn, session_id)
            ids = queries.subtree(conn, session_id)
            if len(ids) > 1 and not cascade:
                raise StoreError(
                    f"session {session_id!r} has {len(ids) - 1} child session(s); delete them "
                    "too with cascade (--cascade) or delete the children first",
                    path=self._where,
                )
            return queries.delete_sessions(conn, ids)

        return self._write_session(session_id, run)

    # -- messages ---------------------------------------------------------

    def append_messages(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Append OpenAI message dicts (metadata keys kept) to a session; return their ids.

        All of them are stored, or none (one transaction).

        Text with lone surrogates is stored exactly (see ``rows``).

        Raises:
            InvalidMessagesError: a message is not an object with a known role,
                holds a value that is not JSON (or is nested too deeply), or a
                surrogate pair split into two characters.
            SessionNotFoundError: no such session.
        """

        def run(conn: sqlite3.Connection) -> list[int]:
            self._require(conn, session_id)
            return queries.append(conn, session_id, messages)

        return self._write_session(session_id, run, appends=True)

    def prepend_messages(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        """Store messages before the session's first one (a system prompt for a session
        another program started, which keeps its prompt outside the messages); return ids.

        Raises:
            InvalidMessagesError: as ``append_messages``.
            SessionNotFoundError: no such session.
        """

        def run(conn: sqlite3.Connection) -> list[int]:
            self._require(conn, session_id)
            return queries.prepend(conn, session_id, messages)

        return self._write_session(session_id, run, appends=True)

    def import_session(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        title: str | None = None,
        source: str = "import",
        model: str | None = None,
        user_id: str | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> str:
        """Create a session holding ``messages`` in one transaction; return its id.

        Args:
            progress: Called with the number of messages stored so far;
                increasing, never twice with one count (not even when a busy
                database makes the transaction run again).
        """
        report = _Progress(progress) if progress is not None else None

        def run(conn: sqlite3.Connection) -> str:
            sid = queries.insert_session(
                conn,
                None,
                source=source,
                model=model,
                parent_session_id=None,
                title=title,
                user_id=user_id,
                path=self._where,
            )
            queries.append(conn, sid, messages, progress=report)
            return sid

        return self._write(run)

    def get_messages(
        self, session_id: str, *, include_compacted: bool = False
    ) -> list[dict[str, Any]]:
        """The session's messages exactly as they were appended.

        Args:
            include_compacted: Every row ever written, compacted originals
                included, in write order; by default only the live messages,
                in conversation order.
        """

        def run(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            self._require(conn, session_id)
            return queries.load_messages(conn, session_id, include_compacted=include_compacted)

        return self._read(run)

    def get_message_records(
        self, session_id: str, *, include_compacted: bool = False
    ) -> list[dict[str, Any]]:
        """Like ``get_messages`` but each item is a record: ``id``, flags and ``message``."""

        def run(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            self._require(conn, session_id)
            return queries.load_records(conn, session_id, include_compacted=include_compacted)

        return self._read(run)

    def last_message_id(self, session_id: str) -> int | None:
        """The id of the session's newest stored message (compacted ones too); None: none yet.

        A cheap way to tell whether another process stored messages since a
        reader last looked (every append and every compaction makes it grow).
        """

        def run(conn: sqlite3.Connection) -> int | None:
            self._require(conn, session_id)
            row = conn.execute(
                "SELECT max(id) FROM hc_messages WHERE session_id = ?", (session_id,)
            ).fetchone()
            return int(row[0]) if row and row[0] is not None else None

        return self._read(run)

    def list_compactions(self, session_id: str) -> list[dict[str, Any]]:
        """The compactions applied to a session, oldest first."""
        cols = (
            "id, mode, child_session_id, created_at, tokens_before, tokens_after, dropped, "
            "used_fallback"
        )

        def run(conn: sqlite3.Connection) -> list[dict[str, Any]]:
            self._require(conn, session_id)
            cur = conn.execute(
                f"SELECT {cols} FROM hc_compactions WHERE session_id = ? ORDER BY id",
                (session_id,),
            )
            names = [d[0] for d in cur.description]
            return [dict(zip(names, row, strict=True)) for row in cur]

        return self._read(run)

    # -- copying between stores ---------------------------------------------

    def session_ids(self) -> list[str]:
        """Every session id, each parent before its children (the order to copy them in)."""
        return self._read(transfer.all_session_ids)

    def export_session(self, session_id: str) -> transfer.SessionCopy:
        """Everything stored of one session (row, every message row, compactions), for a copy.

        Raises:
            SessionNotFoundError: no such session.
        """

        def run(conn: sqlite3.Connection) -> transfer.SessionCopy:
            found = transfer.read_copy(conn, session_id)
            if found is None:
                self._require(conn, session_id)  # raises
            return cast(transfer.SessionCopy, found)

        return self._read(run)

    def restore_session(self, copy: transfer.SessionCopy) -> bool:
        """Store an ``export_session`` of another store here, ids kept, in one transaction.

        Returns:
            True when copied; False when this store held the same session already.

        Raises:
            StoreConflictError: it holds a different session with that id, or
                another session has one of its ids or its title.
        """
        return self._write(lambda c: transfer.write_copy(c, copy, where=self._where))

    # -- compaction -------------------------------------------------------

    def persist_compression(
        self,
        session_id: str,
        before: Sequence[Mapping[str, Any]],
        result: compaction.CompressionOutcome,
        *,
        in_place: bool = True,
        compressor_state: Mapping[str, Any] | None = None,
    ) -> str:
        """Store a compression of ``before`` (the session's live messages); lose nothing.

        In place, the replaced rows become ``active=0, compacted=1`` and the
        summary / stand-in rows are inserted; with ``in_place=False`` the
        session ends (end_reason ``compression``) and a child session titled
        like it (``<title> #2``) carries on. Messages at the end of ``before`` that are
        not stored yet are appended first; messages another writer stored
        after ``before`` was read stay, after the compressed ones. An aborted
        result changes no message. The result's ``compressor_state`` (or
        ``compressor_state`` when given) is saved on the session that carries
        on. All in one transaction.

        Args:
            result: A ``CompressionResult``, or any object with its fields
                (``compaction.CompressionOutcome``); it is not modified.

        Returns:
            The id of the session that carries on.
        """
        return self._write_session(
            session_id,
            lambda c: compaction.persist(
                c,
                session_id,
                before,
                result,
                in_place=in_place,
                compressor_state=compressor_state,
                path=self._where,
            ),
        )

    def recall(
        self, session_id: str, summary_message_id: int, *, deep: bool = False
    ) -> list[dict[str, Any]]:
        """The original messages a summary (or pruned stand-in) replaced, in order.

        Args:
            deep: Expand replaced summaries into their own originals too.
        """
        records = self.recall_records(session_id, summary_message_id, deep=deep)
        return [r["message"] for r in records]

    def recall_records(
        self,
        session_id: str,
        summary_message_id: int,
        *,
        deep: bool = False,
        user_id: str | None = None,
    ) -> list[dict[str, Any]]:
        """Like ``recall`` but as records (ids, flags, ``message``), scoped to ``user_id``."""
        return self._read(
            lambda c: compaction.recall_records(
                c, session_id, summary_message_id, deep=deep, user_id=user_id, path=self._where
            )
        )

    def get_compressor_state(self, session_id: str) -> dict[str, Any] | None:
        """The compressor anti-thrash state stored on the session, or None."""

        def run(conn: sqlite3.Connection) -> dict[str, Any] | None:
            return self._require(conn, session_id)["compressor_state"]

        return self._read(run)

    def save_compressor_state(self, session_id: str, state: Mapping[str, Any] | None) -> None:
        """Store the compressor anti-thrash state on the session (None clears it)."""

        def run(conn: sqlite3.Connection) -> None:
            self._require(conn, session_id)
            compaction.save_state(conn, session_id, state)

        self._write_session(session_id, run)

    def attach_compressor(self, session_id: str, compressor: compaction.Compressor) -> bool:
        """Restore the stored anti-thrash state into ``compressor``; whether one was found."""
        return compaction.attach_compressor(self, session_id, compressor)

    # -- search -----------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        limit: int = 3,
        exclude_session_id: str | None = None,
        user_id: str | None = None,
        raw: bool = False,
        semantic: bool = False,
        within: Within | None = None,
    ) -> list[dict[str, Any]]:
        """Best-ranked messages matching ``query`` (content, tool output, tool arguments).

        Every word of the query must match (stemmed; CJK words of two or more
        characters too); when none match that way, any word may. The words
        are literal unless ``raw`` is set, which passes FTS5 syntax through.
        Compacted originals are found and flagged ``compacted``.

        Args:
            exclude_session_id: Leave out what that session's context already
                holds: its live, uncompacted messages and those it kept from
                the sessions it was rotated from (their compacted ones stay).
            user_id: Only this user's sessions.
            semantic: Rank by meaning too (``use_semantic`` first; ignored with
                ``raw``). Off by default here: the messages nearest in meaning
                always exist, so a search a person runs would never say "no
                matches". The ``session_search`` tool uses it whenever it is on.
            within: Only sessions of these sources, messages of this time range.

        Raises:
            SearchQueryError: a raw query is malformed.
            ValueError: ``limit`` is not a positive integer.
        """
        self._ready_for_search()
        return self._read(
            lambda c: search.search(
                c,
                query,
                limit=limit,
                exclude_session_id=exclude_session_id,
                user_id=user_id,
                raw=raw,
                vectors=self.vectors if semantic else None,
                within=within,
            )
        )

    def session_search(
        self,
        *,
        query: str | None = None,
        session_id: str | None = None,
        around_message_id: int | None = None,
        window: int = 5,
        limit: int = 3,
        sort: str = "newest",
        current_session_id: str | None = None,
        user_id: str | None = None,
        raw: bool = False,
        within: Within | None = None,
        offset: int = 0,
    ) -> dict[str, Any]:
        """The ``session_search`` tool: discover, scroll, read or browse (see ``search``).

        ``within`` narrows discover and browse to sources and a time range;
        ``offset`` skips that many conversations (paging, at most 90).

        Discover ranks by meaning too once ``use_semantic`` was called; hits only
        the semantic half found are marked (``match: "semantic"`` when no word matched).
        """
        if query is not None:
            self._ready_for_search()
        return self._read(
            lambda c: search.session_search(
                c,
                query=query,
                session_id=session_id,
                around_message_id=around_message_id,
                window=window,
                limit=limit,
                sort=sort,
                current_session_id=current_session_id,
                user_id=user_id,
                raw=raw,
                vectors=self.vectors,
                within=within,
                offset=offset,
            )
        )
