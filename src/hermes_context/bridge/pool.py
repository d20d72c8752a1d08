"""The bridge's agents: one per session, in an LRU cache keyed ``session::home::model``.

A request *leases* the slot of its session (``get`` / ``create``) and gives it
back with ``release``. A leased slot — a turn running or waiting on it — is
never evicted, so a session never has two agents: the cache may hold more
than ``max_agents`` for a while and shrinks as leases end. An evicted (or
long idle) agent is closed on a background thread — flushed, session ended,
background work finished — and a request for its session waits for that
close before the next agent is built from ``state.db``; nothing is lost.

Agents are built outside the pool's lock, so a slow build holds up only the
requests for that session, which share the one build (and its failure).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..agent import AIAgent

# Background threads that close evicted agents (a close may finish a memory review).
CLOSE_THREADS = 2
LOG = logging.getLogger("hermes_context.bridge")


@dataclass(eq=False)
class Slot:
    """A cached agent, its leases and its queue of jobs (managed by the turn runner).

    Attributes:
        lock: Held while a job or the close uses the agent.
        leases: Requests holding this slot; a leased slot is never evicted.
        context: The agent's context breakdown as of its last job (or its build).
        running: Whether a job of this slot is on the executor.
        waiting: Jobs queued behind the running one, in order.
    """

    agent: AIAgent
    lock: threading.Lock = field(default_factory=threading.Lock)
    used: float = field(default_factory=time.monotonic)
    leases: int = 0
    context: dict[str, Any] | None = None
    running: bool = False
    waiting: deque[Any] = field(default_factory=deque)


class AgentPool:
    """Agents by key, about ``max_agents`` of them; ``factory(session_id, user_id)`` builds one.

    Args:
        snapshot: Called with a fresh agent (and by ``refresh`` after each job);
            what it returns is kept as the slot's ``context``.
    """

    def __init__(
        self,
        factory: Callable[[str | None, str], AIAgent],
        *,
        home: str,
        model: str,
        max_agents: int = 8,
        idle_seconds: float = 0,
        snapshot: Callable[[AIAgent], dict[str, Any]] | None = None,
    ) -> None:
        self.factory = factory
        self.home, self.model = home, model
        self.max_agents = max_agents
        self.idle_seconds = idle_seconds
        self.snapshot = snapshot
        self.closed_agents = 0
        self._slots: OrderedDict[str, Slot] = OrderedDict()
        self._building: dict[str, concurrent.futures.Future[Slot]] = {}
        self._closing: dict[str, concurrent.futures.Future[None]] = {}
        self._lock = threading.Lock()
        self._closer = concurrent.futures.ThreadPoolExecutor(
            CLOSE_THREADS, thread_name_prefix="agent-close"
        )

    def key(self, session_id: str) -> str:
        return f"{session_id}::{self.home}::{self.model}"

    def create(self, user_id: str) -> Slot:
        """A new session's agent (the session is created with it), leased."""
        return self._add(self._new_slot(None, user_id))

    def get(self, session_id: str, user_id: str) -> Slot:
        """The agent of ``session_id``, cached or rebuilt from state.db, leased."""
        key = self.key(session_id)
        while True:
            with self._lock:
                slot = self._slots.get(key)
                if slot is not None:
                    self._slots.move_to_end(key)
                    slot.leases += 1
                    slot.used = time.monotonic()
                    return slot
                closing = self._closing.get(key)
                building = self._building.get(key)
                if closing is None and building is None:
                    mine: concurrent.futures.Future[Slot] = concurrent.futures.Future()
                    self._building[key] = mine
                    break
            if closing is not None:
                closing.result()  # the old agent first finishes its close (never raises)
            elif building is not None:
                building.result()  # the same build, or its error; then lease what it made
        return self._build(key, mine, session_id, user_id)

    def release(self, slot: Slot) -> None:
        """Give a lease back; agents over the limit or idle too long are then closed."""
        with self._lock:
            slot.leases -= 1
            slot.used = time.monotonic()
            evicted = self._evict()
        self._close_later(evicted)

    def rekey(self, old_session: str, slot: Slot) -> None:
        """A compression rotated the session: file the agent under its new id."""
        with self._lock:
            if self._slots.get(self.key(old_session)) is slot:
                del self._slots[self.key(old_session)]
            self._slots[self.key(slot.agent.session_id)] = slot

    def refresh(self, slot: Slot) -> None:
        """Take a new ``context`` snapshot (the caller holds ``slot.lock``)."""
        if self.snapshot is not None:
            slot.context = self.snapshot(slot.agent)

    def _new_slot(self, session_id: str | None, user_id: str) -> Slot:
        slot = Slot(self.factory(session_id, user_id))
        try:
            self.refresh(slot)
        except Exception:
            slot.agent.close()
            raise
        return slot

    def _build(
        self, key: str, mine: concurrent.futures.Future[Slot], session_id: str, user_id: str
    ) -> Slot:
        try:
            slot = self._new_slot(session_id, user_id)
        except BaseException as exc:
            with self._lock:
                del self._building[key]
            mine.set_exception(exc)
            raise
        self._add(slot, building=key)
        mine.set_result(slot)
        return slot

    def _add(self, slot: Slot, *, building: str | None = None) -> Slot:
        # One step: a request that finds no build in progress finds the slot.
        with self._lock:
            if building is not None:
                del self._building[building]
            slot.leases += 1
            self._slots[self.key(slot.agent.session_id)] = slot
            evicted = self._evict()
        self._close_later(evicted)
        return slot

    def _evict(self) -> list[tuple[str, Slot]]:
        """Pop idle slots past ``idle_seconds``, then the least recently used idle ones over the limit."""
        now = time.monotonic()
        idle = [(k, s) for k, s in self._slots.items() if s.leases == 0]
        stale = [(k, s) for k, s in idle if self.idle_seconds and now - s.used > self.idle_seconds]
        excess = max(0, len(self._slots) - len(stale) - self.max_agents)
        evicted = stale + [pair for pair in idle if pair not in stale][:excess]
        for key, _ in evicted:
            del self._slots[key]
            self._closing[key] = concurrent.futures.Future()
        return evicted

    def _close_later(self, evicted: list[tuple[str, Slot]]) -> None:
        for key, slot in evicted:
            self._closer.submit(self._close, key, slot)

    def _close(self, key: str, slot: Slot) -> None:
        try:
            with slot.lock:
                slot.agent.close()
        except Exception:  # noqa: BLE001 - a failed close must not keep the session locked out
            LOG.exception("closing the agent of %s failed", key.split("::", 1)[0])
        finally:
            with self._lock:
                self.closed_agents += 1
                done = self._closing.pop(key, None)
            if done is not None:
                done.set_result(None)

    def __len__(self) -> int:
        return len(self._slots)

    def close_all(self) -> None:
        """Close every agent (after its running job) and wait for the background closes."""
        with self._lock:
            slots = list(self._slots.items())
            self._slots.clear()
            for key, _ in slots:
                self._closing[key] = concurrent.futures.Future()
        for key, slot in slots:
            self._close(key, slot)
        self._closer.shutdown(wait=True)
