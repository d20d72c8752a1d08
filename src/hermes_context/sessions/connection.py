"""Opening ``state.db`` safely and running transactions that survive a busy database.

Every connection runs in autocommit mode; writes go through ``write`` (one
``BEGIN IMMEDIATE`` transaction, retried as a whole when another process holds
the lock past the busy timeout), reads through ``read`` (one snapshot).
"""

from __future__ import annotations

import random
import sqlite3
import time
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


def connect(path: Path) -> sqlite3.Connection:
    """Open one connection with the pragmas every connection needs."""
    conn = sqlite3.connect(
        str(path),
        timeout=BUSY_TIMEOUT_SECONDS,
        isolation_level=None,
        check_same_thread=False,
    )
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
        # NORMAL is safe in WAL mode against a process crash (only power loss can
        # drop the last commits) and makes every commit much cheaper.
        conn.execute("PRAGMA synchronous = NORMAL")
        mode = retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone()[0])
        if str(mode).lower() != "wal":
            raise StoreError(f"{path}: cannot switch to WAL mode (got {mode})", path=str(path))
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
