"""``SessionDB``: the session history in ``$HERMES_HOME/state.db``.

One SQLite file (ours in WAL mode; Hermes's in the journal mode it has), one
connection per thread (and per process after a fork), every multi-step write
in one ``BEGIN IMMEDIATE`` transaction. A transaction retried after a busy
error repeats no side effect of the caller's (progress is only reported past
what was reported before). Reads write nothing, except that a search first
indexes rows another program stored since (see ``indexing.index_new_rows``).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from ..config import resolve_hermes_home
from ..errors import StoreError
from . import (
    connection,
    foreign,
    foreign_sync,
    importing,
    indexing,
    layout,
    views,
)
from .fts import FTS_TOKENIZER
from .migrations import check_not_newer, check_readable, migrate
from .operations import SessionOperations
from .semantic import SessionVectors

T = TypeVar("T")

DB_FILENAME = "state.db"


class _ThreadMark:
    """Kept in one thread's local storage only: it is freed when that thread ends."""

    __slots__ = ("__weakref__",)


def _close_quietly(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        conn.close()


def _ensure_temporary_index(conn: sqlite3.Connection) -> None:
    found = conn.execute(
        "SELECT 1 FROM main.sqlite_master WHERE name = ?1 UNION ALL "
        "SELECT 1 FROM temp.sqlite_master WHERE name = ?1",
        (layout.SEARCH_TABLE,),
    ).fetchone()
    if found is None:
        indexing.build_temporary_index(conn, FTS_TOKENIZER)


@contextlib.contextmanager
def _sidecar_errors(vectors: SessionVectors) -> Iterator[None]:
    """The vectors file's SQLite and OS errors as a ``StoreError`` naming it and the fix."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(
            f"cannot use the semantic search index {vectors.path}: {exc}; check that the "
            "folder is writable and the path is a file (or search without --semantic)",
            path=str(vectors.path),
            reason="store",
        ) from None


class SessionDB(SessionOperations):
    """Sessions, their messages, full-text search and lossless compaction.

    Args:
        path: The database file; default ``$HERMES_HOME/state.db``. It is
            created (with its folder, mode 0600) when missing, given what it
            lacks when it is older or another program's (Hermes's), and
            refused when a newer hermes-context migrated it or it is not an
            SQLite database.
        read_only: Open without writing anything; every change then raises
            ``StoreError``. Default: read-only exactly when the file or its
            folder is not writable by this process. A file with a full-text
            index whose tokenizer this process cannot load (Hermes's
            ``cjk_unicode61``) is always opened read-only, with a warning.

    Attributes:
        read_only: Whether this store refuses changes.
    """

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, read_only: bool | None = None
    ) -> None:
        self.path = Path(path) if path is not None else resolve_hermes_home() / DB_FILENAME
        # The semantic half of search, once ``use_semantic`` gives it an encoder.
        self.vectors: SessionVectors | None = None
        self._stop_indexing = threading.Event()
        self._local = threading.local()
        self._lock = threading.Lock()
        # Every connection opened, with a weak reference to its thread's mark:
        # a dead reference means the thread ended and the connection is closed.
        self._conns: list[tuple[weakref.ref[_ThreadMark], sqlite3.Connection]] = []
        self._pid = os.getpid()
        connection.check_file(self.path)
        if read_only is None:
            read_only = self.path.exists() and not connection.is_writable(self.path)
        self.read_only = read_only
        # How to get write access, when the store is read-only for a reason of its own.
        self._read_only_fix: str | None = None
        if read_only:
            if not self.path.exists():
                raise StoreError(
                    f"{self.path} does not exist; a read-only store cannot create it",
                    path=str(self.path),
                )
        else:
            self._create_file()
        try:
            self._guard(self._open_first)
        except BaseException:
            self.close()
            raise

    def _open_first(self) -> None:
        """Open the first connection: decide read-only, migrate, install the views."""
        conn = connection.connect(self.path, read_only=self.read_only)
        try:
            found = layout.inspect(conn)
            check_not_newer(found, path=str(self.path))
            if not self.read_only and found.unusable_fts:
                conn.close()
                self._read_only_for(found)
                conn = connection.connect(self.path, read_only=True)
            if self.read_only:
                check_readable(found, path=str(self.path))
            else:
                if found.is_empty:
                    connection.use_wal(conn, self.path)
                found = migrate(conn, begin=connection.begin_immediate)
                if indexing.has_new_rows(conn):
                    connection.write(conn, indexing.index_new_rows)
            views.install(conn, found)
        except BaseException:
            conn.close()
            raise
        self._track(conn)

    def _read_only_for(self, found: layout.Layout) -> None:
        """Fall back to read-only: another program's index needs a tokenizer we lack."""
        table = found.unusable_fts[0]
        library = connection.tokenizer_library(self.path)
        self.read_only = True
        self._read_only_fix = (
            f"to write, load that tokenizer ({connection.ENV_CJK_TOKENIZER}={library}, with a "
            "Python whose sqlite3 can load extensions), or copy the sessions into a home of "
            "your own with 'hermes-context sessions import --from-hermes "
            f"{self.path.parent}'"
        )
        warnings.warn(
            f"{self.path}: opened read-only: its index {table.name!r} needs the tokenizer "
            f"{table.tokenizer!r}, which this process does not have; {self._read_only_fix}",
            stacklevel=4,
        )

    def _create_file(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder {self.path.parent}: {exc.strerror or exc}",
                path=str(self.path),
            ) from exc
        connection.create_private(self.path)

    # -- plumbing ---------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        if os.getpid() != self._pid:
            # After a fork the parent's connections must not be used (nor closed) here.
            self._conns = []
            self._local = threading.local()
            self._lock = threading.Lock()
            self._pid = os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._guard(self._connect)
            self._track(conn)
        return conn

    def _connect(self) -> sqlite3.Connection:
        conn = connection.connect(self.path, read_only=self.read_only)
        try:
            views.install(conn, layout.inspect(conn))
        except BaseException:
            conn.close()
            raise
        return conn

    def _track(self, conn: sqlite3.Connection) -> None:
        """Give ``conn`` to this thread; it is closed when the thread ends.

        The thread's local storage holds the connection and a mark; when the
        thread ends, its storage is freed and the mark's weak reference calls
        back, closing the connection (from that thread, or whichever frees the
        storage: connections are opened with ``check_same_thread=False``).
        The callback takes no lock, so it is safe wherever it runs; the
        entries of ended threads are dropped at the next connect and by ``close``.
        """
        mark, pid = _ThreadMark(), os.getpid()

        def thread_ended(_: object) -> None:
            if os.getpid() == pid:  # a forked child frees the parent's threads: not its to close
                _close_quietly(conn)

        ref = weakref.ref(mark, thread_ended)
        self._local.conn, self._local.mark = conn, mark
        with self._lock:
            self._conns = [(r, c) for r, c in self._conns if r() is not None]
            self._conns.append((ref, conn))

    def _guard(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except UnicodeEncodeError as exc:
            # Message text is stored losslessly; this is an id, a filter or a title.
            raise StoreError(
                f"a text argument holds a lone surrogate ({exc.reason}), which is not valid "
                "Unicode text and cannot be stored or looked up; pass valid text",
                path=str(self.path),
            ) from exc
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and connection.is_busy(exc):
                raise StoreError(
                    f"{self.path} stayed locked by another process; try again", path=str(self.path)
                ) from exc
            if connection.is_read_only_error(exc):
                raise self._read_only_error(str(exc)) from exc
            if isinstance(exc, (sqlite3.IntegrityError, sqlite3.ProgrammingError)):
                raise
            if isinstance(exc, sqlite3.OperationalError):
                raise StoreError(f"{self.path}: {exc}", path=str(self.path)) from exc
            raise connection.damaged(self.path, exc) from exc

    def _read_only_error(self, why: str) -> StoreError:
        fix = self._read_only_fix or (
            "make the file and its folder writable (chmod u+w) to change it"
        )
        return StoreError(
            f"{self.path} is read-only ({why}); nothing was changed — {fix}",
            path=str(self.path),
            read_only=True,
        )

    def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self.read_only:
            raise self._read_only_error("opened read-only")
        return self._guard(lambda: connection.write(self._conn(), fn))

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._guard(lambda: connection.read(self._conn(), fn))

    @property
    def _where(self) -> str:
        return str(self.path)

    def close(self) -> None:
        """Close every connection this object opened (and stop background indexing)."""
        self._stop_indexing.set()
        if self.vectors is not None:
            self.vectors.join(timeout=10)
        with self._lock:
            conns, self._conns = self._conns, []
        for _, conn in conns:
            conn.close()
        self._local = threading.local()

    def __enter__(self) -> SessionDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def import_from(self, source: str | os.PathLike[str]) -> importing.ImportReport:
        """Copy the sessions of another ``state.db`` into this one, losing nothing; idempotent.

        Args:
            source: A Hermes home (or another hermes-context home) or its
                ``state.db``; it is only read.

        Returns:
            What was added, extended, already here, or changed on both sides.

        Raises:
            StoreError: no such file, not a session database, or this store's own file.
        """
        path = Path(source).expanduser()
        if path.is_dir():
            path = path / DB_FILENAME
        if not path.is_file():
            raise StoreError(
                f"{path} not found; pass a Hermes home folder or its {DB_FILENAME}", path=str(path)
            )
        if self.path.exists() and os.path.samefile(path, self.path):
            raise StoreError(
                f"{path} is this store's own database; pass another home", path=str(path)
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a source we may not write is fine: it is only read
            other = SessionDB(path, read_only=True)
        with other:
            return other._read(
                lambda src: self._write(lambda dst: importing.copy_sessions(src, dst, str(path)))
            )

    # -- the semantic half of search ------------------------------------------

    def use_semantic(self, embed: Callable[[Sequence[str], bool], Any]) -> SessionVectors:
        """Rank searches by meaning too, with ``embed`` (``memory.e5.embed``); see ``semantic``.

        Only what ``index_semantic`` or ``index_semantic_in_background`` has
        embedded is searched by meaning; the rest is found by its words.
        """
        self.vectors = SessionVectors(self.path, embed=embed)
        return self.vectors

    def index_semantic(
        self, *, limit: int | None = None, progress: Callable[[int], None] | None = None
    ) -> int:
        """Embed the prose stored since the last call, now; return how many messages were embedded.

        Raises:
            ValueError: ``use_semantic`` was not called.
            StoreError: the vectors file cannot be opened or written.
        """
        vectors = self._require_vectors()
        with _sidecar_errors(vectors):
            vectors.check()
        return self._read(lambda c: vectors.catch_up(c, limit=limit, progress=progress))

    def semantic_backlog(self) -> int:
        """Messages stored since the last indexing (0 without ``use_semantic``).

        Raises:
            StoreError: the vectors file cannot be opened or written.
        """
        if self.vectors is None:
            return 0
        vectors = self.vectors
        with _sidecar_errors(vectors):
            vectors.check()
        return self._read(vectors.pending)

    def index_semantic_in_background(self) -> None:
        """Start (or nudge) indexing on a background thread; ``close`` stops it."""
        self._require_vectors().start_background(self.path, stop=self._stop_indexing)

    def _require_vectors(self) -> SessionVectors:
        if self.vectors is None:
            raise ValueError("semantic search is off: call use_semantic(embed) first")
        return self.vectors

    def _ready_for_search(self) -> None:
        """Index what another program stored since; a read-only file without our index gets one
        of its own for this connection (see ``indexing.build_temporary_index``)."""
        if self.read_only:
            self._read(_ensure_temporary_index)
        elif self._read(indexing.has_new_rows):
            self._write(indexing.index_new_rows)

    def rebuild_search_index(self) -> int:
        """Recompute every message's search text and rebuild the index; return the rows indexed."""
        return self._write(indexing.rebuild_index)

    # -- other agents' transcripts ---------------------------------------------

    def import_foreign(
        self, parsed: foreign.ParsedFile, *, mtime: float = 0.0, user_id: str | None = None
    ) -> foreign_sync.ForeignImportReport:
        """Store the sessions read from one transcript file, in one transaction; idempotent.

        A session is stored under its key (``claude-code:<id>``); importing
        the file again adds only what is new (see ``foreign_sync``).

        Args:
            parsed: What ``foreign.parse_file`` read.
            mtime: The file's modification time when it was read (``foreign_import_marks``).
            user_id: Owner of the sessions created; another user's session is left alone.

        Raises:
            InvalidMessagesError: a message cannot be stored (nothing of the file is).
        """
        return self._write(
            lambda c: foreign_sync.store_file(
                c, parsed, mtime=mtime, user_id=user_id, path=str(self.path)
            )
        )

    def foreign_import_marks(self) -> dict[str, foreign_sync.FileMark]:
        """Transcript files imported so far -> size and time when last read, and sessions.

        A file whose size and time still match has nothing new to import.
        """
        return self._read(foreign_sync.file_marks)
