"""The bridge's agents: one per session, in an LRU cache keyed ``session::home::model``.

A turn holds its session's lock, so turns on one session are serialised while
different sessions run at once. An agent pushed out of the cache (or idle too
long) is closed after its running turn: flushed, session ended, background
work finished. The next turn on that session builds a new agent from
``state.db``, so nothing is lost.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from ..agent import AIAgent


@dataclass
class Slot:
    """A cached agent and the lock its turns take."""

    agent: AIAgent
    lock: threading.Lock = field(default_factory=threading.Lock)
    used: float = field(default_factory=time.monotonic)


class AgentPool:
    """Agents by key, at most ``max_agents``; ``factory(session_id, user_id)`` builds one."""

    def __init__(
        self,
        factory: Callable[[str | None, str], AIAgent],
        *,
        home: str,
        model: str,
        max_agents: int = 8,
        idle_seconds: float = 0,
    ) -> None:
        self.factory = factory
        self.home, self.model = home, model
        self.max_agents = max_agents
        self.idle_seconds = idle_seconds
        self._slots: OrderedDict[str, Slot] = OrderedDict()
        self._lock = threading.Lock()
        self.closed_agents = 0

    def key(self, session_id: str) -> str:
        return f"{session_id}::{self.home}::{self.model}"

    def create(self, user_id: str) -> Slot:
        """A new session's agent (the session is created with it)."""
        return self._build(None, user_id)

    def get(self, session_id: str, user_id: str) -> Slot:
        """The agent of ``session_id``, cached or rebuilt from state.db."""
        return self._build(session_id, user_id)

    def rekey(self, old_session: str, slot: Slot) -> None:
        """A compression rotated the session: file the agent under its new id."""
        with self._lock:
            self._slots.pop(self.key(old_session), None)
            self._slots[self.key(slot.agent.session_id)] = slot

    def _build(self, session_id: str | None, user_id: str) -> Slot:
        # Built under the pool lock: two requests for one uncached session must
        # not make two agents (one would never be closed).
        with self._lock:
            if session_id is not None:
                slot = self._slots.get(self.key(session_id))
                if slot is not None:
                    self._slots.move_to_end(self.key(session_id))
                    slot.used = time.monotonic()
                    return slot
            slot = Slot(self.factory(session_id, user_id))
            self._slots[self.key(slot.agent.session_id)] = slot
            evicted = self._evict(slot)
        for old in evicted:
            self._close(old)
        return slot

    def _evict(self, keep: Slot) -> list[Slot]:
        evicted = []
        now = time.monotonic()
        if self.idle_seconds:
            for key, other in list(self._slots.items()):
                if other is not keep and now - other.used > self.idle_seconds:
                    evicted.append(self._slots.pop(key))
        while len(self._slots) > self.max_agents:
            _, oldest = self._slots.popitem(last=False)
            evicted.append(oldest)
        return evicted

    def _close(self, slot: Slot) -> None:
        with slot.lock:  # after its running turn
            slot.agent.close()
        self.closed_agents += 1

    def __len__(self) -> int:
        return len(self._slots)

    def close_all(self) -> None:
        with self._lock:
            slots = list(self._slots.values())
            self._slots.clear()
        for slot in slots:
            self._close(slot)
