"""The turn ledger: which turns ran, under which idempotency key, what they sent, who holds a session.

A turn posted with an ``Idempotency-Key`` runs once per user and key: a client
that retries (on this replica or another) gets the turn's events replayed
from where it stopped (``Last-Event-ID``) and then follows it live, instead of
a second run. Each event has a sequence number, its SSE ``id``; an event is in
the ledger before any client sees it, so what a client saw can always be
replayed.

Two ledgers: ``LocalLedger`` (one bridge process, ``state.db``): turns and
their events in memory, the session's lock in the process; and
``PostgresLedger`` (``bridge/pg_ledger.py``, replicas sharing PostgreSQL):
the same as rows, sessions leased across processes, replicas that stop
heartbeating treated as dead so another can take over their turns.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

# Turn states: running (or its replica died), done (finished, answer or not), failed.
STATES = ("running", "done", "failed")
# The longest idempotency key accepted (clients send UUIDs; some send hashes).
MAX_KEY_CHARS = 200
# Finished turns a LocalLedger remembers (their events too), oldest dropped first.
LOCAL_TURNS_KEPT = 512
# How often a LocalLedger follower looks for new events (the originating request
# relays its own events directly; followers are retries and event readers).
LOCAL_POLL_SECONDS = 0.05

Event = tuple[str, dict[str, Any]]
StoredEvent = tuple[int, str, dict[str, Any]]


@dataclass(frozen=True)
class TurnRecord:
    """One turn as the ledger knows it."""

    turn_id: str
    session_id: str
    user_id: str
    key: str | None
    fingerprint: str
    state: str = "running"
    owner: str = ""


def fingerprint(*parts: Any) -> str:
    """A digest of a request's content: a key reused for a different request is refused."""
    text = json.dumps(parts, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def new_turn_id() -> str:
    return f"turn_{uuid.uuid4().hex[:20]}"


class TurnLedger(Protocol):
    """What the bridge needs of a ledger (``LocalLedger``, ``PostgresLedger``)."""

    owner: str

    def begin(
        self,
        *,
        user_id: str,
        session_id: str,
        key: str | None,
        fingerprint: str,
        turn_id: str | None = None,
    ) -> tuple[TurnRecord, bool]:
        """The turn of ``(user_id, key)``, created (running, owned here, named ``turn_id``
        when given) when there is none; and whether it was created. Without a key every
        call creates a turn."""
        ...

    def get(self, turn_id: str) -> TurnRecord | None: ...

    def alive(self, owner: str) -> bool:
        """Whether the replica ``owner`` still runs (heartbeats)."""
        ...

    def take_over(self, record: TurnRecord) -> bool:
        """Own a running turn whose replica died; False when another replica took it first."""
        ...

    def append(self, turn_id: str, events: Sequence[Event]) -> list[int]:
        """Store events after the turn's last (after any still pending); their sequence numbers."""
        ...

    def record(
        self, turn_id: str, kind: str, data: dict[str, Any], stored: Callable[[int | None], None]
    ) -> None:
        """Store one event, maybe later and in a batch, in order; then ``stored(seq)``.

        ``stored(None)``: it could not be stored (the stream goes on live).
        """
        ...

    def after_pending(self, callback: Callable[[], None], turn_id: str | None = None) -> None:
        """Call ``callback`` once every event recorded before (of ``turn_id``'s turn, when
        given; of every turn otherwise) has been stored."""
        ...

    def finish(self, turn_id: str, state: str) -> None: ...

    def events(self, turn_id: str, after: int = 0) -> list[StoredEvent]:
        """The turn's events with a sequence number above ``after``, in order."""
        ...

    async def wait(self, turn_id: str, after: int, timeout: float) -> None:
        """Return when the turn may have an event above ``after`` (or after ``timeout``)."""
        ...

    def acquire(self, session_id: str, *, timeout: float, cancel: threading.Event) -> bool:
        """Hold ``session_id`` for one job (across processes); False at ``timeout`` or cancel."""
        ...

    def release(self, session_id: str) -> None: ...

    def close(self) -> None: ...


@dataclass
class _LocalTurn:
    record: TurnRecord
    events: list[StoredEvent] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)


class LocalLedger:
    """Turns and their events in this process (one bridge on ``state.db``).

    Sessions need no lease here: the turn runner serialises them in the process.
    """

    def __init__(self, *, keep: int = LOCAL_TURNS_KEPT) -> None:
        self.owner = f"local-{uuid.uuid4().hex[:8]}"
        self._keep = keep
        self._turns: OrderedDict[str, _LocalTurn] = OrderedDict()
        self._keys: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def begin(
        self,
        *,
        user_id: str,
        session_id: str,
        key: str | None,
        fingerprint: str,
        turn_id: str | None = None,
    ) -> tuple[TurnRecord, bool]:
        with self._lock:
            if key is not None and (user_id, key) in self._keys:
                existing = self._turns.get(self._keys[(user_id, key)])
                if existing is not None:
                    return existing.record, False
            record = TurnRecord(
                turn_id or new_turn_id(), session_id, user_id, key, fingerprint, owner=self.owner
            )
            self._turns[record.turn_id] = _LocalTurn(record)
            if key is not None:
                self._keys[(user_id, key)] = record.turn_id
            self._forget_old()
            return record, True

    def _forget_old(self) -> None:
        finished = [t for t, turn in self._turns.items() if turn.record.state != "running"]
        for turn_id in finished[: max(0, len(self._turns) - self._keep)]:
            record = self._turns.pop(turn_id).record
            if record.key is not None:
                self._keys.pop((record.user_id, record.key), None)

    def get(self, turn_id: str) -> TurnRecord | None:
        with self._lock:
            turn = self._turns.get(turn_id)
            return turn.record if turn else None

    def alive(self, owner: str) -> bool:
        return owner == self.owner

    def take_over(self, record: TurnRecord) -> bool:
        return False  # a turn of this process is never orphaned while it runs

    def append(self, turn_id: str, events: Sequence[Event]) -> list[int]:
        turn = self._turn(turn_id)
        with turn.changed:
            start = turn.events[-1][0] if turn.events else 0
            stored = [(start + i + 1, kind, data) for i, (kind, data) in enumerate(events)]
            turn.events.extend(stored)
            if turn.record.state == "running" and any(kind == "done" for kind, _ in events):
                turn.record = replace(turn.record, state="done")  # as the PostgreSQL ledger
            turn.changed.notify_all()
        return [seq for seq, _, _ in stored]

    def record(
        self, turn_id: str, kind: str, data: dict[str, Any], stored: Callable[[int | None], None]
    ) -> None:
        stored(self.append(turn_id, [(kind, data)])[0])

    def after_pending(self, callback: Callable[[], None], turn_id: str | None = None) -> None:
        callback()

    def finish(self, turn_id: str, state: str) -> None:
        turn = self._turn(turn_id)
        with self._lock, turn.changed:
            turn.record = replace(turn.record, state=state)
            turn.changed.notify_all()

    def events(self, turn_id: str, after: int = 0) -> list[StoredEvent]:
        with self._lock:
            turn = self._turns.get(turn_id)
        if turn is None:  # forgotten (the oldest finished turns are): nothing more to read
            return []
        with turn.changed:
            return [e for e in turn.events if e[0] > after]

    async def wait(self, turn_id: str, after: int, timeout: float) -> None:
        with self._lock:
            turn = self._turns.get(turn_id)
        if turn is None:
            return
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with turn.changed:
                if (turn.events and turn.events[-1][0] > after) or turn.record.state != "running":
                    return
            await asyncio.sleep(LOCAL_POLL_SECONDS)

    def acquire(self, session_id: str, *, timeout: float, cancel: threading.Event) -> bool:
        return not cancel.is_set()

    def release(self, session_id: str) -> None:
        pass

    def close(self) -> None:
        pass

    def _turn(self, turn_id: str) -> _LocalTurn:
        with self._lock:
            turn = self._turns.get(turn_id)
        if turn is None:
            raise KeyError(turn_id)
        return turn
