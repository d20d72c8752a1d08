"""Memory on PostgreSQL: each user's notes, archive, journal and staged writes as rows.

The rules stay in ``MemoryStore`` (scanner, limits, archive on overflow,
approval, journal records); this backing replaces the memory folder so that
several bridge processes, on several machines, share one user's notes. A
write holds the notes row ``FOR UPDATE`` for one transaction, in which the
archive rows, the notes text and the journal records change together: two
writers in any processes are serialised and lose nothing, and a writer that
dies leaves nothing half-written (so the file journal's intent/commit phases
are not needed here; every record is committed with its write).

Each memory is a *scope*: ``""`` for the home's own memory, a user id for
``users/<user>/memories``. ``PostgresMemory(url)`` owns the connection pool;
``PostgresMemory.backing(scope)`` gives the ``MemoryBacking`` a
``MemoryStore(backing=...)`` takes.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import secrets
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .. import pgsql
from ..errors import StoreError
from ..messages import without_lone_surrogates
from .approval import CorruptPending, PendingWrite
from .archive import ArchivedEntry, ArchiveQueries, ArchiveScan, entry_id
from .backing import NotesWrite
from .entries import TARGET_FILENAMES, TARGETS
from .journal import JournalScan

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

COMPONENT = "memory"


def _create_tables(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        """
        CREATE TABLE hc_memory_notes (
            scope TEXT NOT NULL,
            target TEXT NOT NULL CHECK (target IN ('memory', 'user')),
            content TEXT NOT NULL DEFAULT '',
            updated_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (scope, target)
        );
        CREATE TABLE hc_memory_journal (
            seq BIGSERIAL PRIMARY KEY,
            scope TEXT NOT NULL,
            target TEXT NOT NULL,
            record JSONB NOT NULL
        );
        CREATE INDEX hc_memory_journal_scope ON hc_memory_journal (scope, seq);
        CREATE TABLE hc_memory_archive (
            scope TEXT NOT NULL,
            id TEXT NOT NULL,
            seq BIGSERIAL,
            target TEXT NOT NULL,
            content TEXT NOT NULL,
            archived_at TEXT NOT NULL,
            reason TEXT NOT NULL,
            session_id TEXT,
            PRIMARY KEY (scope, id)
        );
        CREATE TABLE hc_memory_pending (
            scope TEXT NOT NULL,
            id TEXT NOT NULL,
            created TEXT NOT NULL,
            data JSONB NOT NULL,
            PRIMARY KEY (scope, id)
        );
        CREATE TABLE hc_memory_backups (
            id BIGSERIAL PRIMARY KEY,
            scope TEXT NOT NULL,
            target TEXT NOT NULL,
            taken_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            content TEXT NOT NULL
        );
        """
    )


# Numbered migrations; append, never edit.
MIGRATIONS = (_create_tables,)


class PostgresMemory:
    """The memories of every user in one PostgreSQL database.

    Args:
        url: ``postgresql://…`` (libpq URL; ``options=-csearch_path=…`` picks a schema).
        max_size: Connections in the pool at most.
        pool: A pool on ``url`` to share (then not closed by ``close``).

    Raises:
        ConfigError: psycopg is missing or ``url`` is not a PostgreSQL URL.
        StoreError: the server cannot be reached or the schema is newer than this code.
    """

    def __init__(
        self, url: str, *, max_size: int = 10, pool: psycopg_pool.ConnectionPool | None = None
    ) -> None:
        self.url = url
        self._owns_pool = pool is None
        self.pool = pool or pgsql.open_pool(url, max_size=max_size)
        try:
            with pgsql.transaction(self.pool, "creating the memory tables") as conn:
                pgsql.migrate(conn, COMPONENT, MIGRATIONS)
        except BaseException:
            self.close()
            raise

    def backing(self, scope: str = "") -> PostgresMemoryBacking:
        """The memory of ``scope`` (``""``: the home's own; else a user id)."""
        return PostgresMemoryBacking(self, scope)

    def scopes(self) -> list[str]:
        """Every scope that holds notes, archive entries or staged writes, sorted."""
        with pgsql.store_errors("listing memories"), self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT scope FROM hc_memory_notes UNION SELECT scope FROM hc_memory_archive "
                "UNION SELECT scope FROM hc_memory_pending ORDER BY 1"
            ).fetchall()
        return [r[0] for r in rows]

    @contextlib.contextmanager
    def connection(self, what: str) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection in one transaction (committed at the end); errors as ``StoreError``."""
        with pgsql.transaction(self.pool, what) as conn:
            yield conn

    def close(self) -> None:
        """Close the pool's connections (unless the pool was passed in)."""
        if self._owns_pool:
            self.pool.close()

    def __enter__(self) -> PostgresMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PostgresMemoryBacking:
    """One scope's notes, archive, journal and staged writes (a ``MemoryBacking``)."""

    def __init__(self, memory: PostgresMemory, scope: str) -> None:
        if not isinstance(scope, str):
            raise TypeError(f"scope must be a string, got {scope!r}")
        self.memory = memory
        self.scope = scope
        self.archive = _Archive(memory, scope)
        self.journal = _Journal(memory, scope)
        self.pending = _Pending(memory, scope)

    def location(self, target: str) -> str:
        user = f"user {self.scope!r}" if self.scope else "the home"
        return f"{TARGET_FILENAMES[target]} of {user} on {pgsql.redact_url(self.memory.url)}"

    def read(self, target: str) -> str:
        with self.memory.connection(f"reading {TARGET_FILENAMES[target]}") as conn:
            row = conn.execute(
                "SELECT content FROM hc_memory_notes WHERE scope = %s AND target = %s",
                (self.scope, target),
            ).fetchone()
        return row[0] if row else ""

    def replace_notes(self, target: str, text: str) -> None:
        """Set ``target``'s notes to a copy of another memory's (whose journal comes along)."""
        with self.memory.connection(f"copying {TARGET_FILENAMES[target]}") as conn:
            conn.execute(
                "INSERT INTO hc_memory_notes (scope, target, content) VALUES (%s, %s, %s) "
                "ON CONFLICT (scope, target) DO UPDATE SET content = excluded.content, "
                "updated_at = now()",
                (self.scope, target, text),
            )

    @contextlib.contextmanager
    def writing(self, target: str) -> Iterator[NotesWrite]:
        with self.memory.connection(f"writing {TARGET_FILENAMES[target]}") as conn:
            conn.execute(
                "INSERT INTO hc_memory_notes (scope, target) VALUES (%s, %s) "
                "ON CONFLICT DO NOTHING",
                (self.scope, target),
            )
            row = conn.execute(
                "SELECT content FROM hc_memory_notes WHERE scope = %s AND target = %s FOR UPDATE",
                (self.scope, target),
            ).fetchone()
            yield _Write(conn, self, target, row[0] if row else "")


class _Write:
    """A notes row held ``FOR UPDATE``; everything it changes commits together."""

    def __init__(
        self, conn: psycopg.Connection[Any], backing: PostgresMemoryBacking, target: str, text: str
    ) -> None:
        self._conn = conn
        self._backing = backing
        self._target = target
        self._text = text

    def text(self) -> str:
        return self._text

    def raw_text(self) -> str:
        return self._text

    def backup(self) -> str | None:
        if not self._text:
            return None
        row = self._conn.execute(
            "INSERT INTO hc_memory_backups (scope, target, content) VALUES (%s, %s, %s) "
            "RETURNING id",
            (self._backing.scope, self._target, self._text),
        ).fetchone()
        return f"hc_memory_backups row {row[0] if row else '?'}"

    def archive(
        self, target: str, contents: Sequence[str], *, reason: str, session_id: str | None
    ) -> None:
        _add_archived(self._conn, self._backing.scope, target, contents, reason, session_id)

    def unarchive(self, ids: Iterable[str]) -> None:
        wanted = list(ids)
        if wanted:
            self._conn.execute(
                "DELETE FROM hc_memory_archive WHERE scope = %s AND id = ANY(%s)",
                (self._backing.scope, wanted),
            )

    def commit(self, text: str, records: list[dict[str, Any]]) -> str | None:
        self._conn.execute(
            "UPDATE hc_memory_notes SET content = %s, updated_at = now() "
            "WHERE scope = %s AND target = %s",
            (text, self._backing.scope, self._target),
        )
        _append_records(self._conn, self._backing.scope, records)
        self._text = text
        return None


def _stamp() -> tuple[str, float]:
    now = time.time()
    return datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="milliseconds"), now


def _append_records(
    conn: psycopg.Connection[Any], scope: str, records: Sequence[dict[str, Any]]
) -> None:
    stamp, now = _stamp()
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO hc_memory_journal (scope, target, record) VALUES (%s, %s, %s::jsonb)",
            [
                (
                    scope,
                    str(rec.get("target", "")),
                    without_lone_surrogates(
                        json.dumps({"time": stamp, "ts": now, **rec}, ensure_ascii=False)
                    ),
                )
                for rec in records
            ],
        )


def _add_archived(
    conn: psycopg.Connection[Any],
    scope: str,
    target: str,
    contents: Sequence[str],
    reason: str,
    session_id: str | None,
) -> list[ArchivedEntry]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    added = []
    for content in dict.fromkeys(contents):
        entry = ArchivedEntry(entry_id(target, content), target, content, stamp, reason, session_id)
        row = conn.execute(
            "INSERT INTO hc_memory_archive "
            "(scope, id, target, content, archived_at, reason, session_id) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
            (scope, entry.id, target, content, stamp, reason, session_id),
        ).fetchone()
        if row:
            added.append(entry)
    return added


class _Archive(ArchiveQueries):
    """``Archive``'s methods on ``hc_memory_archive``."""

    def __init__(self, memory: PostgresMemory, scope: str) -> None:
        self._memory = memory
        self._scope = scope

    @property
    def location(self) -> str:
        return f"hc_memory_archive on {pgsql.redact_url(self._memory.url)}"

    def scan(self) -> ArchiveScan:
        with self._memory.connection("reading the archive") as conn:
            rows = conn.execute(
                "SELECT id, target, content, archived_at, reason, session_id "
                "FROM hc_memory_archive WHERE scope = %s ORDER BY seq",
                (self._scope,),
            ).fetchall()
        return ArchiveScan(entries=[ArchivedEntry(*row) for row in rows])

    def add(
        self, target: str, contents: Sequence[str], *, reason: str, session_id: str | None
    ) -> list[ArchivedEntry]:
        with self._memory.connection("archiving entries") as conn:
            return _add_archived(conn, self._scope, target, contents, reason, session_id)

    def restore(self, entries: Sequence[ArchivedEntry]) -> list[ArchivedEntry]:
        """Add entries copied from another archive as they are; return those not here yet."""
        added = []
        with self._memory.connection("copying archived entries") as conn:
            for e in entries:
                row = conn.execute(
                    "INSERT INTO hc_memory_archive "
                    "(scope, id, target, content, archived_at, reason, session_id) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
                    (self._scope, e.id, e.target, e.content, e.archived_at, e.reason, e.session_id),
                ).fetchone()
                if row:
                    added.append(e)
        return added

    def drop(self, ids: Iterable[str]) -> list[ArchivedEntry]:
        wanted = list(ids)
        if not wanted:
            return []
        with self._memory.connection("dropping archived entries") as conn:
            rows = conn.execute(
                "DELETE FROM hc_memory_archive WHERE scope = %s AND id = ANY(%s) "
                "RETURNING id, target, content, archived_at, reason, session_id",
                (self._scope, wanted),
            ).fetchall()
        return [ArchivedEntry(*row) for row in rows]


class _Journal:
    """``Journal``'s reading methods on ``hc_memory_journal`` (writes go with their notes)."""

    def __init__(self, memory: PostgresMemory, scope: str) -> None:
        self._memory = memory
        self._scope = scope

    @property
    def location(self) -> str:
        return f"hc_memory_journal on {pgsql.redact_url(self._memory.url)}"

    def append(self, records: list[dict[str, Any]]) -> None:
        """Append records on their own (a write's records go with the write)."""
        if records:
            with self._memory.connection("appending to the journal") as conn:
                _append_records(conn, self._scope, records)

    def read(self, *, target: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        return self.scan(target=target, limit=limit).records

    def scan(self, *, target: str | None = None, limit: int | None = None) -> JournalScan:
        query = "SELECT record FROM hc_memory_journal WHERE scope = %s"
        args: list[Any] = [self._scope]
        if target is not None:
            query += " AND target = %s"
            args.append(target)
        query += " ORDER BY seq DESC"
        if limit:
            query += " LIMIT %s"
            args.append(limit)
        with self._memory.connection("reading the journal") as conn:
            rows = conn.execute(query, args).fetchall()
        return JournalScan(records=[row[0] for row in reversed(rows)])


_PENDING_FIELDS = tuple(f.name for f in fields(PendingWrite))


class _Pending:
    """``PendingQueue``'s methods on ``hc_memory_pending``."""

    def __init__(self, memory: PostgresMemory, scope: str) -> None:
        self._memory = memory
        self._scope = scope

    @property
    def location(self) -> str:
        return f"hc_memory_pending on {pgsql.redact_url(self._memory.url)}"

    def stage(
        self,
        *,
        kind: str,
        target: str,
        operations: list[dict[str, str]],
        origin: str,
        session_id: str | None,
        review: dict[str, str] | None = None,
    ) -> PendingWrite:
        created, _ = _stamp()
        pending = PendingWrite(
            secrets.token_hex(6), kind, target, operations, origin, session_id, created, review
        )
        with self._memory.connection("staging a memory write") as conn:
            conn.execute(
                "INSERT INTO hc_memory_pending (scope, id, created, data) "
                "VALUES (%s, %s, %s, %s::jsonb)",
                (self._scope, pending.id, created, json.dumps(pending.to_dict())),
            )
        return pending

    def restore(self, pending: PendingWrite) -> bool:
        """Keep a staged write copied from another queue, id and all; whether it was new."""
        with self._memory.connection("copying a staged write") as conn:
            row = conn.execute(
                "INSERT INTO hc_memory_pending (scope, id, created, data) "
                "VALUES (%s, %s, %s, %s::jsonb) ON CONFLICT DO NOTHING RETURNING id",
                (self._scope, pending.id, pending.created, json.dumps(pending.to_dict())),
            ).fetchone()
        return row is not None

    def list(self) -> builtins.list[PendingWrite]:
        return self.scan()[0]

    def corrupt(self) -> builtins.list[CorruptPending]:
        return self.scan()[1]

    def scan(self) -> tuple[builtins.list[PendingWrite], builtins.list[CorruptPending]]:
        with self._memory.connection("reading staged writes") as conn:
            rows = conn.execute(
                "SELECT id, data FROM hc_memory_pending WHERE scope = %s ORDER BY created, id",
                (self._scope,),
            ).fetchall()
        items, broken = [], []
        for pending_id, data in rows:
            staged = _pending_from(data)
            if staged is None:
                broken.append(CorruptPending(pending_id, self.location, "not a staged write"))
            else:
                items.append(staged)
        return items, broken

    def get(self, pending_id: str) -> PendingWrite:
        with self._memory.connection("reading a staged write") as conn:
            row = conn.execute(
                "SELECT data FROM hc_memory_pending WHERE scope = %s AND id = %s",
                (self._scope, pending_id),
            ).fetchone()
        if row is None:
            raise StoreError(
                f"no pending memory write with id {pending_id!r}; "
                "list them with 'hermes-context memory pending'",
                reason="not_found",
            )
        staged = _pending_from(row[0])
        if staged is None:
            raise StoreError(
                f"pending write {pending_id} is corrupt; it cannot be approved or rejected: delete "
                f"its row (scope {self._scope!r}, id {pending_id!r}) from hc_memory_pending",
                reason="corrupt",
            )
        return staged

    def discard(self, pending_id: str) -> None:
        with self._memory.connection("dropping a staged write") as conn:
            conn.execute(
                "DELETE FROM hc_memory_pending WHERE scope = %s AND id = %s",
                (self._scope, pending_id),
            )


def _pending_from(data: object) -> PendingWrite | None:
    """A staged write from its row, or ``None`` when the row does not hold one."""
    if not isinstance(data, dict) or not all(k in data for k in _PENDING_FIELDS[:6]):
        return None
    if data["target"] not in TARGETS or not isinstance(data["operations"], list):
        return None
    return PendingWrite(**{k: data[k] for k in _PENDING_FIELDS if k in data})
