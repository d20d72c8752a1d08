"""The turn ledger on PostgreSQL, shared by bridge replicas (see ``ledger.py`` for the contract).

Each replica heartbeats its row in ``hc_bridge_replicas`` every
``HEARTBEAT_SECONDS``; one that has not for ``ttl_seconds`` is dead: the
session leases it held are free, and a client retrying one of its running
turns (same ``Idempotency-Key``) has the turn taken over and finished by the
replica it reached. Events are rows of ``hc_turn_events``; every append sends
``NOTIFY hc_turn_events, '<turn id>'``, which one listening connection per
replica turns into wake-ups for the clients following that turn.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import queue
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .. import pgsql
from ..errors import StoreError
from .ledger import Event, StoredEvent, TurnRecord, new_turn_id

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

LOG = logging.getLogger("hermes_context.bridge")
T = TypeVar("T")
COMPONENT = "bridge"
CHANNEL = "hc_turn_events"
# How often a replica says it is alive.
HEARTBEAT_SECONDS = 2.0
# Seconds a caller waits for the writer to store what it asked (``append``, ``finish``).
CALL_TIMEOUT_SECONDS = 60
# Events stored in one transaction at most.
MAX_BATCH = 256
# Writer threads per replica; each turn's events go through one of them, in order. One
# writer was the replica's bottleneck: every store is a few round trips to the server.
WRITERS = 4
_STOP = object()
# A replica silent this long is dead (its leases free, its running turns taken over).
DEFAULT_TTL_SECONDS = 10.0
# How long a job waiting for a session held by another replica sleeps between tries.
LEASE_POLL_SECONDS = (0.05, 0.1, 0.2, 0.4)
_BEAT = (
    "INSERT INTO hc_bridge_replicas (owner) VALUES (%s) "
    "ON CONFLICT (owner) DO UPDATE SET heartbeat = now()"
)
# A replica row ``r`` that heartbeated within the TTL (the one parameter).
_ALIVE = "r.heartbeat > now() - make_interval(secs => %s)"
_COLUMNS = "turn_id, session_id, user_id, idem_key, fingerprint, state, owner"


def _create_tables(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        """
        CREATE TABLE hc_bridge_replicas (
            owner TEXT PRIMARY KEY,
            heartbeat TIMESTAMPTZ NOT NULL DEFAULT now(),
            started TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        CREATE TABLE hc_turns (
            turn_id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL,
            user_id TEXT NOT NULL,
            idem_key TEXT,
            fingerprint TEXT NOT NULL,
            state TEXT NOT NULL,
            owner TEXT NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            finished_at TIMESTAMPTZ
        );
        CREATE UNIQUE INDEX hc_turns_key ON hc_turns (user_id, idem_key)
            WHERE idem_key IS NOT NULL;
        CREATE TABLE hc_turn_events (
            turn_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            data JSONB NOT NULL,
            PRIMARY KEY (turn_id, seq)
        );
        CREATE TABLE hc_session_leases (
            session_id TEXT PRIMARY KEY,
            owner TEXT NOT NULL,
            acquired_at TIMESTAMPTZ NOT NULL DEFAULT now()
        );
        """
    )


MIGRATIONS = (_create_tables,)


# A turn whose ``done`` event is stored is done, in the same transaction (``finish`` still
# sets its final state): its end is never left for a retry to find.
_ENDED = (
    "UPDATE hc_turns SET state = 'done', finished_at = now() "
    "WHERE turn_id = ANY(%s) AND owner = %s AND state = 'running'"
)


class PostgresLedger:
    """Turns, events, session leases and replica heartbeats in PostgreSQL.

    Args:
        url: ``postgresql://…``.
        ttl_seconds: A replica silent this long is dead.
        max_size: Connections in the pool at most (one more listens).
        pool: A pool on ``url`` to share (then not closed by ``close``).

    Raises:
        ConfigError: psycopg is missing or ``url`` is not a PostgreSQL URL.
        StoreError: the server cannot be reached.
    """

    def __init__(
        self,
        url: str,
        *,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        max_size: int = 10,
        pool: psycopg_pool.ConnectionPool | None = None,
    ) -> None:
        self.owner = f"replica-{uuid.uuid4().hex[:12]}"
        self.url = url
        self.ttl_seconds = ttl_seconds
        self._owns_pool = pool is None
        self.pool = pool or pgsql.open_pool(url, max_size=max_size)
        self._stop = threading.Event()
        # The last sequence number stored per running turn (read and written only by the
        # turn's writer thread).
        self._last: dict[str, int] = {}
        self._writers = [_Writer(self._store, n) for n in range(WRITERS)]
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._waiters_lock = threading.Lock()
        try:
            with self._conn("creating the bridge tables") as conn:
                pgsql.migrate(conn, COMPONENT, MIGRATIONS)
            self._beat()
        except BaseException:
            for writer in self._writers:
                writer.close()
            if self._owns_pool:
                self.pool.close()
            raise
        self._threads = [
            threading.Thread(target=self._heartbeat, name="ledger-heartbeat", daemon=True),
            threading.Thread(target=self._listen, name="ledger-listen", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _conn(self, what: str) -> contextlib.AbstractContextManager[psycopg.Connection[Any]]:
        return pgsql.transaction(self.pool, what)

    def _writer(self, turn_id: str) -> _Writer:
        """The writer thread that stores ``turn_id``'s events (always the same one)."""
        return self._writers[zlib.crc32(turn_id.encode("utf-8")) % len(self._writers)]

    # -- turns -------------------------------------------------------------------------

    def begin(
        self,
        *,
        user_id: str,
        session_id: str,
        key: str | None,
        fingerprint: str,
        turn_id: str | None = None,
    ) -> tuple[TurnRecord, bool]:
        record = TurnRecord(
            turn_id or new_turn_id(), session_id, user_id, key, fingerprint, owner=self.owner
        )
        with self._conn("recording a turn") as conn:
            row = conn.execute(
                f"INSERT INTO hc_turns ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (user_id, idem_key) WHERE idem_key IS NOT NULL DO NOTHING "
                "RETURNING turn_id",
                (record.turn_id, session_id, user_id, key, fingerprint, "running", self.owner),
            ).fetchone()
            if row is not None:
                return record, True
            existing = conn.execute(
                f"SELECT {_COLUMNS} FROM hc_turns WHERE user_id = %s AND idem_key = %s",
                (user_id, key),
            ).fetchone()
        if existing is None:  # the turn was there a moment ago: a concurrent delete
            raise StoreError(f"the turn of idempotency key {key!r} vanished; retry the request")
        return TurnRecord(*existing), False

    def get(self, turn_id: str) -> TurnRecord | None:
        with self._conn("reading a turn") as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM hc_turns WHERE turn_id = %s", (turn_id,)
            ).fetchone()
        return TurnRecord(*row) if row else None

    def alive(self, owner: str) -> bool:
        if owner == self.owner:
            return True
        with self._conn("reading a replica's heartbeat") as conn:
            row = conn.execute(
                f"SELECT count(*) FROM hc_bridge_replicas r WHERE r.owner = %s AND {_ALIVE}",
                (owner, self.ttl_seconds),
            ).fetchone()
        return bool(row and row[0])

    def take_over(self, record: TurnRecord) -> bool:
        with self._conn("taking over a turn") as conn:
            row = conn.execute(
                "UPDATE hc_turns t SET owner = %s WHERE turn_id = %s AND owner = %s "
                "AND state = 'running' AND NOT EXISTS (SELECT 1 FROM hc_bridge_replicas r "
                f"WHERE r.owner = t.owner AND {_ALIVE}) RETURNING 1",
                (self.owner, record.turn_id, record.owner, self.ttl_seconds),
            ).fetchone()
        return row is not None

    def append(self, turn_id: str, events: Sequence[Event]) -> list[int]:
        if not events:
            return []
        return self._writer(turn_id).call(
            lambda: self._store([(turn_id, kind, data) for kind, data in events])
        )

    def record(
        self, turn_id: str, kind: str, data: dict[str, Any], stored: Callable[[int | None], None]
    ) -> None:
        self._writer(turn_id).submit(_Record(turn_id, kind, data, stored))

    def after_pending(self, callback: Callable[[], None], turn_id: str | None = None) -> None:
        if turn_id is not None:
            self._writer(turn_id).submit(callback)
            return
        # Every writer must get past what it holds now: the last one to do so calls back.
        left = [len(self._writers)]
        lock = threading.Lock()

        def passed() -> None:
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                callback()

        for writer in self._writers:
            writer.submit(passed)

    def finish(self, turn_id: str, state: str) -> None:
        def run() -> None:
            self._last.pop(turn_id, None)
            with self._conn("finishing a turn") as conn, conn.pipeline():
                # One round trip on the writer thread, no WAL flush wait (as for events).
                conn.execute("SET LOCAL synchronous_commit = off")
                # Only while this replica owns it: one that took it over finishes it itself.
                conn.execute(
                    "UPDATE hc_turns SET state = %s, finished_at = now() "
                    "WHERE turn_id = %s AND owner = %s",
                    (state, turn_id, self.owner),
                )
                conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, turn_id))

        self._writer(turn_id).call(run)

    def _store(self, items: Sequence[tuple[str, str, dict[str, Any]]]) -> list[int]:
        """Store events in one transaction (on the writer thread); their sequence numbers."""
        turns = list(dict.fromkeys(turn_id for turn_id, _, _ in items))
        try:
            with self._conn("storing turn events") as conn, conn.pipeline():
                # Events must outlive a replica, not the database server: no WAL flush wait.
                # In a pipeline: one round trip on the writer thread (the GIL is taken back
                # once, not after every statement).
                conn.execute("SET LOCAL synchronous_commit = off")
                for turn_id in turns:
                    if turn_id not in self._last:
                        row = conn.execute(
                            "SELECT coalesce(max(seq), 0) FROM hc_turn_events WHERE turn_id = %s",
                            (turn_id,),
                        ).fetchone()
                        self._last[turn_id] = row[0] if row else 0
                rows, seqs = [], []
                for turn_id, kind, data in items:
                    self._last[turn_id] += 1
                    seqs.append(self._last[turn_id])
                    text = json.dumps(data, ensure_ascii=False, default=str)
                    rows.append((turn_id, self._last[turn_id], kind, text))
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO hc_turn_events (turn_id, seq, kind, data) "
                        "VALUES (%s, %s, %s, %s::jsonb)",
                        rows,
                    )
                ended = list(dict.fromkeys(t for t, kind, _ in items if kind == "done"))
                if ended:  # with its last event: a replica dying before ``finish`` loses nothing
                    conn.execute(_ENDED, (ended, self.owner))
                for turn_id in turns:
                    conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, turn_id))
        except BaseException:
            for turn_id in turns:  # read again from the table next time
                self._last.pop(turn_id, None)
            raise
        return seqs

    def events(self, turn_id: str, after: int = 0) -> list[StoredEvent]:
        with self._conn("reading turn events") as conn:
            rows = conn.execute(
                "SELECT seq, kind, data FROM hc_turn_events WHERE turn_id = %s AND seq > %s "
                "ORDER BY seq",
                (turn_id, after),
            ).fetchall()
        return [(seq, kind, data) for seq, kind, data in rows]

    async def wait(self, turn_id: str, after: int, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()
        entry = (loop, woken)
        with self._waiters_lock:
            self._waiters.setdefault(turn_id, set()).add(entry)
        try:
            await asyncio.wait_for(woken.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._waiters_lock:
                waiting = self._waiters.get(turn_id)
                if waiting is not None:
                    waiting.discard(entry)
                    if not waiting:
                        del self._waiters[turn_id]

    # -- session leases ----------------------------------------------------------------

    def acquire(self, session_id: str, *, timeout: float, cancel: threading.Event) -> bool:
        end = time.monotonic() + timeout
        tries = 0
        while not cancel.is_set():
            if self._try_acquire(session_id):
                return True
            pause = LEASE_POLL_SECONDS[min(tries, len(LEASE_POLL_SECONDS) - 1)]
            tries += 1
            if time.monotonic() + pause > end:
                return False
            cancel.wait(pause)
        return False

    def _try_acquire(self, session_id: str) -> bool:
        with self._conn("leasing a session") as conn:
            row = conn.execute(
                "INSERT INTO hc_session_leases (session_id, owner) VALUES (%s, %s) "
                "ON CONFLICT (session_id) DO UPDATE SET owner = EXCLUDED.owner, "
                "acquired_at = now() WHERE hc_session_leases.owner = EXCLUDED.owner "
                "OR NOT EXISTS (SELECT 1 FROM hc_bridge_replicas r "
                f"WHERE r.owner = hc_session_leases.owner AND {_ALIVE}) RETURNING owner",
                (session_id, self.owner, self.ttl_seconds),
            ).fetchone()
        return row is not None

    def release(self, session_id: str) -> None:
        with self._conn("releasing a session") as conn:
            conn.execute(
                "DELETE FROM hc_session_leases WHERE session_id = %s AND owner = %s",
                (session_id, self.owner),
            )

    # -- the replica -------------------------------------------------------------------

    def _beat(self) -> None:
        with self._conn("heartbeat") as conn:
            conn.execute(_BEAT, (self.owner,))

    def _heartbeat(self) -> None:
        """Beat on a connection of its own: a pool busy with turns must not make this
        replica look dead (another would then take its sessions and turns)."""
        import psycopg

        conn = None
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.url, autocommit=True, connect_timeout=5)
                conn.execute(_BEAT, (self.owner,))
            except Exception as exc:  # noqa: BLE001 - a missed beat is retried; the log says why
                LOG.warning("the replica heartbeat failed: %s", exc)
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    def _listen(self) -> None:
        """Wake the followers of each turn a NOTIFY names (reconnecting after a failure)."""
        import psycopg

        while not self._stop.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=1.0):
                            self._wake(note.payload)
            except Exception as exc:  # noqa: BLE001 - followers poll meanwhile
                if not self._stop.is_set():
                    LOG.warning("listening for turn events failed: %s", exc)
                    self._stop.wait(1.0)

    def _wake(self, turn_id: str) -> None:
        with self._waiters_lock:
            waiting = list(self._waiters.get(turn_id, ()))
        for loop, woken in waiting:
            try:
                loop.call_soon_threadsafe(woken.set)
            except RuntimeError:  # that loop has closed
                pass

    def close(self) -> None:
        """Store what is pending, stop heartbeating and leave: this replica's leases are free."""
        for writer in self._writers:
            writer.close()
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5)
        try:
            with self._conn("leaving") as conn:
                conn.execute("DELETE FROM hc_session_leases WHERE owner = %s", (self.owner,))
                conn.execute("DELETE FROM hc_bridge_replicas WHERE owner = %s", (self.owner,))
        except Exception as exc:  # noqa: BLE001 - leaving is best effort; the TTL covers it
            LOG.warning("leaving the replica table failed: %s", exc)
        if self._owns_pool:
            self.pool.close()


@dataclass(frozen=True)
class _Record:
    turn_id: str
    kind: str
    data: dict[str, Any]
    stored: Callable[[int | None], None]


class _Writer:
    """One thread that stores recorded events in batches, in the order they came.

    Consecutive events go into one transaction (one commit, one NOTIFY per
    turn); anything else queued (``call``, ``after_pending`` callbacks) runs
    in its place in the order.
    """

    def __init__(
        self, store: Callable[[Sequence[tuple[str, str, dict[str, Any]]]], list[int]], n: int = 0
    ):
        self._store = store
        self._closed = False
        self._queue: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"ledger-writer-{n}", daemon=True)
        self._thread.start()

    def submit(self, item: _Record | Callable[[], Any]) -> None:
        if self._closed:  # nothing will store it: say so now, in the caller's thread
            if isinstance(item, _Record):
                _quietly(item.stored, None)
            else:
                _quietly(item)
            return
        self._queue.put(item)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the writer after what is queued; its result (or exception).

        Raises:
            StoreError: the ledger is closed, or the writer did not get to it in time.
        """
        if threading.current_thread() is self._thread:
            return fn()
        if self._closed:
            raise StoreError("the turn ledger is closed (the bridge is shutting down)")
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                future.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)

        self._queue.put(run)
        try:
            return future.result(timeout=CALL_TIMEOUT_SECONDS)
        except concurrent.futures.TimeoutError:
            raise StoreError(
                f"the turn ledger did not store in {CALL_TIMEOUT_SECONDS} s; is PostgreSQL up?"
            ) from None

    def close(self) -> None:
        """Store what is queued, then stop; later submissions are refused at once."""
        self._queue.put(_STOP)
        self._thread.join(timeout=30)
        self._closed = True
        while True:  # anything that raced the stop: its callers must not wait forever
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                self.submit(item)

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            groups = list(_groups(batch))
            for n, group in enumerate(groups):
                if group is _STOP:
                    for rest in groups[n + 1 :]:  # queued with the stop: handled, not dropped
                        self._handle(rest)
                    return
                self._handle(group)

    def _handle(self, group: Any) -> None:
        if isinstance(group, list):
            try:
                seqs: list[int | None] = list(
                    self._store([(r.turn_id, r.kind, r.data) for r in group])
                )
            except Exception as exc:  # noqa: BLE001 - the streams go on live
                LOG.warning("storing %d turn events failed: %s", len(group), exc)
                seqs = [None] * len(group)
            for record, seq in zip(group, seqs, strict=True):
                _quietly(record.stored, seq)
        else:
            _quietly(group)


def _groups(batch: list[Any]) -> Iterator[Any]:
    """Runs of consecutive ``_Record`` as lists; anything else on its own."""
    run: list[_Record] = []
    for item in batch:
        if isinstance(item, _Record):
            run.append(item)
            continue
        if run:
            yield run
            run = []
        yield item
    if run:
        yield run


def _quietly(fn: Callable[..., Any], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - one bad callback must not stop the writer
        LOG.exception("a turn ledger callback failed")
