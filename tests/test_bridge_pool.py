"""The bridge's agent pool with fake agents: builds outside the pool lock, one agent per
session however requests and evictions interleave."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from hermes_context.bridge.pool import AgentPool

WAIT = 5.0


class FakeAgent:
    def __init__(self, session_id, user_id, *, close_gate=None):
        self.session_id = session_id or uuid.uuid4().hex[:8]
        self.user_id = user_id
        self.close_gate = close_gate
        self.closed = threading.Event()

    def close(self):
        if self.close_gate is not None:
            assert self.close_gate.wait(WAIT)
        self.closed.set()


class Factory:
    """Builds FakeAgents; ``gates[session]`` holds a build until it is set."""

    def __init__(self, close_gate=None):
        self.gates: dict[str | None, threading.Event] = {}
        self.built: list[FakeAgent] = []
        self.close_gate = close_gate
        self.fail_next = False
        self._lock = threading.Lock()

    def __call__(self, session_id, user_id):
        gate = self.gates.get(session_id)
        if gate is not None:
            assert gate.wait(WAIT)
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("the build failed")
        agent = FakeAgent(session_id, user_id, close_gate=self.close_gate)
        with self._lock:
            self.built.append(agent)
        return agent

    def sessions(self):
        return [a.session_id for a in self.built]


def pool_of(factory, max_agents=2):
    return AgentPool(factory, home="/home", model="m", max_agents=max_agents)


def run_soon(fn, *args):
    out: dict = {}

    def go():
        try:
            out["result"] = fn(*args)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            out["error"] = exc

    out["thread"] = threading.Thread(target=go, daemon=True)
    out["thread"].start()
    return out


def test_a_slow_build_does_not_hold_other_sessions_up():
    factory = Factory()
    factory.gates["slow"] = threading.Event()
    pool = pool_of(factory)
    slow = run_soon(pool.get, "slow", "alice")
    time.sleep(0.1)
    start = time.monotonic()
    fast = pool.get("fast", "bob")
    assert time.monotonic() - start < 1.0 and fast.agent.session_id == "fast"
    factory.gates["slow"].set()
    slow["thread"].join(WAIT)
    assert slow["result"].agent.session_id == "slow"


def two_gets_during_one_build(factory):
    """Two requests for session ``s`` while its build is held; both once it is let go."""
    factory.gates["s"] = threading.Event()
    pool = pool_of(factory)
    first = run_soon(pool.get, "s", "alice")
    second = run_soon(pool.get, "s", "alice")
    time.sleep(0.1)
    factory.gates["s"].set()
    first["thread"].join(WAIT)
    second["thread"].join(WAIT)
    return pool, first, second


def test_two_requests_for_one_uncached_session_share_one_build():
    factory = Factory()
    _, first, second = two_gets_during_one_build(factory)
    assert first["result"] is second["result"]
    assert factory.sessions() == ["s"]


def test_a_busy_agent_is_never_evicted_and_the_pool_shrinks_once_it_is_free():
    factory = Factory()
    pool = pool_of(factory, max_agents=1)
    busy = pool.get("a", "alice")
    other = pool.get("b", "bob")
    assert not busy.agent.closed.is_set() and len(pool) == 2
    assert pool.get("a", "alice") is busy  # the running turn's agent, never a second one
    pool.release(busy)
    assert len(pool) == 2  # "a" is still held by its second lease, "b" by its first
    pool.release(other)  # "b" is idle now: the pool shrinks back to its limit
    assert len(pool) == 1 and other.agent.closed.wait(WAIT) and not busy.agent.closed.is_set()
    pool.release(busy)
    assert len(pool) == 1 and pool.get("a", "alice") is busy
    assert factory.sessions() == ["a", "b"]


def test_a_session_whose_agent_is_closing_waits_for_the_close_before_rebuilding():
    gate = threading.Event()
    factory = Factory(close_gate=gate)
    pool = pool_of(factory, max_agents=1)
    first = pool.get("a", "alice")
    pool.release(first)
    pool.release(pool.get("b", "bob"))  # evicts "a": its close waits on the gate
    again = run_soon(pool.get, "a", "alice")
    time.sleep(0.2)
    assert factory.sessions() == ["a", "b"], "rebuilt while the old agent was still closing"
    gate.set()
    again["thread"].join(WAIT)
    assert first.agent.closed.is_set()
    assert again["result"].agent is not first.agent and factory.sessions() == ["a", "b", "a"]


def test_a_failed_build_reaches_every_waiter_and_the_next_request_retries():
    factory = Factory()
    factory.fail_next = True
    pool, first, second = two_gets_during_one_build(factory)
    assert isinstance(first.get("error"), RuntimeError)
    assert isinstance(second.get("error"), RuntimeError)
    assert pool.get("s", "alice").agent.session_id == "s" and len(pool) == 1


def test_rekey_files_a_rotated_session_under_its_new_id():
    factory = Factory()
    pool = pool_of(factory)
    slot = pool.get("old", "alice")
    slot.agent.session_id = "new"
    pool.rekey("old", slot)
    pool.release(slot)
    assert pool.get("new", "alice") is slot


@pytest.mark.parametrize("max_agents", [1, 3])
def test_many_threads_never_get_two_agents_for_one_session(max_agents):
    factory = Factory()
    pool = pool_of(factory, max_agents=max_agents)
    seen: dict[str, set[int]] = {}
    lock = threading.Lock()

    def worker(n):
        for i in range(40):
            session = f"s{(n + i) % 5}"
            slot = pool.get(session, "alice")
            with lock:
                live = {id(a) for a in factory.built if a.session_id == session}
                live -= {id(a) for a in factory.built if a.closed.is_set()}
                seen.setdefault(session, set()).add(len(live))
            pool.release(slot)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    pool.close_all()
    assert all(counts <= {1} for counts in seen.values()), seen
    assert all(a.closed.is_set() for a in factory.built)
