"""Opening ``state.db`` safely and running transactions that survive a busy database.

Every connection runs in autocommit mode; writes go through ``write`` (one
``BEGIN IMMEDIATE`` transaction, retried as a whole when another process holds
the lock past the busy timeout), reads through ``read`` (one snapshot).

A new database file is created readable by its owner only, like the memory
files, and in WAL mode; SQLite gives its ``-wal`` and ``-shm`` files the same
mode. An existing file keeps the journal mode it has. A database
the process may not write (the file or its folder) is opened read-only.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from ..errors import StoreError

T = TypeVar("T")

SQLITE_HEADER = b"SQLite format 3\x00"
# How long SQLite itself waits for a lock before reporting SQLITE_BUSY.
BUSY_TIMEOUT_SECONDS = 10.0
# Whole-transaction retries after SQLITE_BUSY/LOCKED got past the busy timeout
# (WAL recovery and checkpoints can report busy without invoking the handler).
BUSY_RETRIES = 12
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
# Sessions are private conversations: owner read/write only, as the memory files are.
DB_FILE_MODE = 0o600
# Hermes's optional CJK tokenizer: the library it builds, and the variable naming it.
CJK_TOKENIZER_LIBRARY = "libfts5_cjk.so"
ENV_CJK_TOKENIZER = "HERMES_FTS5_CJK_SO"
# Opening read-only fails with these when the folder cannot hold the -shm file.
_NO_SHM_CODES = (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN)


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying the database is locked or busy."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _BUSY_CODES
    text = str(exc)
    return "locked" in text or "busy" in text


def retry_busy(fn: Callable[[], T], *, retries: int | None = None) -> T:
    """Call ``fn``; on a busy database wait a little and call it again (BUSY_RETRIES times)."""
    retries = BUSY_RETRIES if retries is None else retries
    delay = 0.01
    for attempt in range(retries + 1):
        try:
            return fn()
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or attempt == retries:
                raise
        time.sleep(delay * (1 + random.random()))
        delay = min(delay * 2, 1.0)
    raise AssertionError("unreachable")


def is_read_only_error(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite refusing to write a read-only database (or its folder)."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) == sqlite3.SQLITE_READONLY
    return "readonly" in str(exc)


def is_writable(path: Path) -> bool:
    """Whether this process may write the existing database: the file and its folder.

    SQLite writes the ``-wal``/``-shm`` files next to the database, so a
    writable file in a read-only folder cannot be written either.
    """
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


def create_private(path: Path) -> None:
    """Create an empty database file with mode ``DB_FILE_MODE``, unless something is there.

    ``O_EXCL`` never follows a symlink and never touches an existing file,
    whose mode is left as it is.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, DB_FILE_MODE)
    except FileExistsError:
        return
    except OSError as exc:
        raise StoreError(
            f"cannot create {path}: {exc.strerror or exc}; check the folder exists and is "
            "writable, or point HERMES_HOME (or the path argument) somewhere else",
            path=str(path),
        ) from exc
    os.close(fd)


def check_file(path: Path) -> None:
    """Refuse a path that is a folder or a file that is not an SQLite database.

    The file is only read, never written, so a wrong path cannot destroy data.
    """
    if path.is_dir():
        raise StoreError(
            f"{path} is a folder, not a database file; pass a file path", path=str(path)
        )
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb") as fh:
        header = fh.read(len(SQLITE_HEADER))
    if header != SQLITE_HEADER:
        raise StoreError(
            f"{path} is not an SQLite database; it was left untouched — move it away or "
            "point HERMES_HOME (or the path argument) somewhere else",
            path=str(path),
        )


def damaged(path: Path, exc: sqlite3.DatabaseError) -> StoreError:
    """The error to raise when SQLite finds the file unreadable."""
    return StoreError(
        f"{path} cannot be read as a session database ({exc}); it was left untouched — "
        "restore it from a backup or move it away",
        path=str(path),
    )


def _open(target: str, *, uri: bool = False) -> sqlite3.Connection:
    conn = sqlite3.connect(
        target,
        timeout=BUSY_TIMEOUT_SECONDS,
        isolation_level=None,
        check_same_thread=False,
        uri=uri,
    )
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    return conn


def connect(path: Path, *, read_only: bool = False) -> sqlite3.Connection:
    """Open one connection with the pragmas every connection needs.

    The file's journal mode is left as it is: switching a file another
    program uses (Hermes keeps its ``state.db`` in rollback mode on some
    SQLite releases) would break that program. ``use_wal`` sets WAL on a
    file this process has just created.
    """
    if read_only:
        return _connect_read_only(path)
    conn = _open(str(path))
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        load_tokenizers(conn, path)
        mode = retry_busy(lambda: conn.execute("PRAGMA journal_mode").fetchone()[0])
        if str(mode).lower() == "wal":
            _relax_sync(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _relax_sync(conn: sqlite3.Connection) -> None:
    # NORMAL is safe in WAL mode against a process crash (only power loss can
    # drop the last commits) and makes every commit much cheaper; in rollback
    # mode it is not, so the default (FULL) stays there.
    conn.execute("PRAGMA synchronous = NORMAL")


def use_wal(conn: sqlite3.Connection, path: Path) -> None:
    """Switch a database this process created to WAL mode (concurrent readers and a writer)."""
    mode = retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
    if str(mode).lower() != "wal":
        raise StoreError(f"{path}: cannot switch to WAL mode (got {mode})", path=str(path))
    _relax_sync(conn)


def tokenizer_library(path: Path) -> Path:
    """Where Hermes's CJK tokenizer (``cjk_unicode61``) lives for the home of ``path``.

    ``$HERMES_FTS5_CJK_SO`` when set, else ``lib/libfts5_cjk.so`` in the
    folder of the database, where Hermes builds it.
    """
    env = os.environ.get(ENV_CJK_TOKENIZER)
    return Path(env).expanduser() if env else path.parent / "lib" / CJK_TOKENIZER_LIBRARY


def load_tokenizers(conn: sqlite3.Connection, path: Path) -> bool:
    """Load Hermes's CJK tokenizer into ``conn`` when it is there and Python allows it.

    Python builds without extension loading (many distributions') cannot;
    a Hermes file whose index needs it is then opened read-only.
    """
    library = tokenizer_library(path)
    if not hasattr(conn, "enable_load_extension") or not library.is_file():
        return False
    try:
        conn.enable_load_extension(True)
        try:
            conn.load_extension(str(library))
        finally:
            conn.enable_load_extension(False)
    except sqlite3.Error:
        return False
    return True


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that cannot write: ``mode=ro``, or ``immutable`` in a read-only folder.

    Reading a WAL database needs its ``-shm`` file; when that is missing and
    the folder cannot hold one, no process without write access can have
    changed the file since it was last closed cleanly, so it is read as
    immutable (no locking, no side files).
    """
    base = "file:" + urllib.parse.quote(str(path.absolute())) + "?mode=ro"
    conn = _open(base, uri=True)
    load_tokenizers(conn, path)
    try:
        retry_busy(lambda: conn.execute("SELECT count(*) FROM sqlite_master").fetchone())
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        code = getattr(exc, "sqlite_errorcode", 0) or 0
        if (code & 0xFF) not in _NO_SHM_CODES:
            raise
    conn = _open(base + "&immutable=1", uri=True)
    load_tokenizers(conn, path)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        conn.close()
        raise
    return conn


def begin_immediate(conn: sqlite3.Connection) -> None:
    """Start a write transaction, waiting out other writers."""
    retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"))


def write(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``fn(conn)`` in one ``BEGIN IMMEDIATE`` transaction: all of it or none.

    A busy error anywhere in it rolls back and runs the whole transaction again.
    """

    def attempt() -> T:
        conn.execute("BEGIN IMMEDIATE")
        try:
            out = fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return out

    return retry_busy(attempt)


def read(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``fn(conn)`` on one consistent snapshot of the database."""

    def attempt() -> T:
        conn.execute("BEGIN")
        try:
            return fn(conn)
        finally:
            if conn.in_transaction:
                conn.execute("COMMIT")

    return retry_busy(attempt)
