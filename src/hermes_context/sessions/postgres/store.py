"""``PostgresSessionStore``: the session store on PostgreSQL, for several machines.

Every public method is ``SessionOperations``'s, the same as ``SessionDB``'s,
running the same SQL (through ``PgConnection``) in one transaction on a
connection of a ``psycopg_pool`` pool. A write to one session takes that
session's advisory lock first (a compaction is never interleaved with another
process's append; a session's ids and positions follow its commits); every
write but an append then takes the schema's lock too (titles stay unique), so
appends to different sessions run side by side. Reads run in a read-only
snapshot.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

from ... import pgsql
from ...errors import StoreError
from ..operations import SessionOperations
from . import schema
from .connection import PgConnection

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

T = TypeVar("T")

# Seconds to wait for the server when connecting: a wrong host fails soon, not in minutes.
CONNECT_TIMEOUT = 10
# Seconds a caller waits for a free pooled connection before the store gives up.
POOL_TIMEOUT = 30
_READ = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"


class PostgresSessionStore(SessionOperations):
    """Sessions, their messages, full-text search and lossless compaction, on PostgreSQL.

    Args:
        url: A libpq URL or DSN (``postgresql://user@host/db``); the tables
            live in the connection's first ``search_path`` schema, created or
            migrated on open.
        min_size: Connections the pool keeps open.
        max_size: Connections the pool opens at most (threads beyond wait).

    Raises:
        ConfigError: psycopg is not installed.
        StoreError: the server cannot be reached, refuses the login, or a
            newer hermes-context migrated the schema.
    """

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10) -> None:
        psycopg, pool = pgsql.driver()
        self.url = url
        self._shown = pgsql.redact_url(url)
        self._pool: ConnectionPool[Any] | None = None
        with self._errors():
            with psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT) as conn:
                schema.migrate(conn)
            self._pool = pool.ConnectionPool(
                url,
                min_size=min_size,
                max_size=max_size,
                kwargs={"connect_timeout": CONNECT_TIMEOUT},
                timeout=POOL_TIMEOUT,
                open=True,
            )

    def __repr__(self) -> str:
        return f"PostgresSessionStore({self._shown!r})"

    @property
    def _where(self) -> str:
        return self._shown

    def close(self) -> None:
        """Close the pool's connections; the store cannot be used afterwards."""
        if self._pool is not None:
            self._pool.close()

    def __enter__(self) -> PostgresSessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions ---------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """psycopg's and the pool's errors as a one-line ``StoreError`` without the password."""
        psycopg, pool = pgsql.driver()
        try:
            yield
        except UnicodeEncodeError as exc:
            raise StoreError(
                f"a text argument holds a lone surrogate ({exc.reason}), which is not valid "
                "Unicode text and cannot be stored or looked up; pass valid text",
                path=self._shown,
            ) from None
        except (psycopg.Error, pool.PoolTimeout) as exc:
            self._fail(exc)

    def _fail(self, exc: Exception) -> NoReturn:
        text = str(exc).strip().splitlines()
        detail = text[0] if text else type(exc).__name__
        for secret in pgsql.url_secrets(self.url):
            detail = detail.replace(secret, "***")
        psycopg, pool = pgsql.driver()
        if isinstance(exc, (psycopg.OperationalError, pool.PoolTimeout)):
            fix = "check that the server is running and the URL, user and database are right"
        elif "0x00" in detail:
            fix = "a text argument holds a NUL character; remove it"
        else:
            fix = "the database refused the operation; nothing was changed"
        raise StoreError(
            f"PostgreSQL session store {self._shown}: {detail}; {fix}", path=self._shown
        ) from None

    def _run(
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        write: bool,
        session_id: str | None = None,
        store_lock: bool = True,
    ) -> T:
        if self._pool is None or self._pool.closed:
            raise StoreError(
                f"{self._shown}: the store is closed; open a new one", path=self._shown
            )
        with self._errors(), self._pool.connection() as raw, raw.transaction():
            if session_id is not None:  # the session's lock first, always (see _write_session)
                raw.execute(schema.SESSION_LOCK, (schema.LOCK_NAMESPACE, session_id))
            if write and store_lock:
                raw.execute(schema.LOCK, (schema.LOCK_NAMESPACE,))
            elif not write:
                raw.execute(_READ)
            # The shared SQL is written against sqlite3's API; PgConnection speaks that part.
            return fn(cast(sqlite3.Connection, PgConnection(raw)))

    def _write_session(
        self, session_id: str, fn: Callable[[sqlite3.Connection], T], *, appends: bool = False
    ) -> T:
        """A write to one session: its own lock first, then the store's.

        Writes to one session are serialised by a lock of their own, taken
        first; every write but an append (``appends``) then takes the
        store-wide lock too. Appends to different sessions run side by side:
        ids follow commits within a session, not across sessions. The order
        is always the session's lock, then the store's, so two writers never
        wait on each other in a circle.
        """
        return self._run(fn, write=True, session_id=session_id, store_lock=not appends)

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._run(fn, write=False)

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._run(fn, write=True)

    def _ready_for_search(self) -> None:
        """Nothing to do: every row gets its search vector when it is written."""

    # -- not supported here yet -----------------------------------------------

    def _unsupported(self, what: str) -> NoReturn:
        raise StoreError(
            f"{what} is not supported on the PostgreSQL store yet; use a SessionDB "
            "(SQLite state.db) for it",
            path=self._shown,
        )

    def use_semantic(self, embed: Any) -> NoReturn:
        """Not supported yet (semantic search keeps its vectors beside an SQLite file)."""
        self._unsupported("semantic search (use_semantic)")

    def index_semantic(self, **_: Any) -> NoReturn:
        """Not supported yet."""
        self._unsupported("semantic search (index_semantic)")

    def index_semantic_in_background(self) -> NoReturn:
        """Not supported yet."""
        self._unsupported("semantic search (index_semantic_in_background)")

    def semantic_backlog(self) -> int:
        """Always 0: semantic search is off on this store."""
        return 0

    def import_from(self, source: Any) -> NoReturn:
        """Not supported yet (it copies from another state.db file)."""
        self._unsupported("importing a state.db (import_from)")

    def import_foreign(self, parsed: Any, **_: Any) -> NoReturn:
        """Not supported yet."""
        self._unsupported("importing other agents' transcripts (import_foreign)")

    def foreign_import_marks(self) -> NoReturn:
        """Not supported yet."""
        self._unsupported("importing other agents' transcripts (foreign_import_marks)")

    def rebuild_search_index(self) -> int:
        """Recompute every message's search text and search vector; return the rows indexed."""
        return self._write(lambda c: cast(PgConnection, c).rebuild_index())
