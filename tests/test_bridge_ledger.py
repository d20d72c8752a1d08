"""The turn ledger: idempotent turns, numbered events, waiting; on PostgreSQL also leases and takeover."""

from __future__ import annotations

import asyncio
import threading
import time

import psycopg
import pytest

from hermes_context.bridge.ledger import LocalLedger, fingerprint
from hermes_context.errors import StoreError


@pytest.fixture(params=["local", "postgresql"])
def ledger(request):
    if request.param == "local":
        yield LocalLedger()
        return
    from hermes_context.bridge.pg_ledger import PostgresLedger

    pg = PostgresLedger(request.getfixturevalue("postgres_url"), ttl_seconds=2, max_size=4)
    yield pg
    pg.close()


def _begin(ledger, key="k", user="alice", session="s1", request="hello"):
    return ledger.begin(user_id=user, session_id=session, key=key, fingerprint=fingerprint(request))


def test_a_key_names_one_turn_per_user(ledger):
    first, created = _begin(ledger)
    again, created_again = _begin(ledger)
    other, created_other = _begin(ledger, user="bob")
    assert created and not created_again and again == first
    assert created_other and other.turn_id != first.turn_id
    assert first.state == "running" and first.owner == ledger.owner
    unkeyed = [_begin(ledger, key=None)[0].turn_id for _ in range(2)]
    assert unkeyed[0] != unkeyed[1]


def test_events_are_numbered_in_order_and_read_after_an_id(ledger):
    record, _ = _begin(ledger)
    assert ledger.append(record.turn_id, [("delta", {"text": "a"}), ("delta", {"text": "b"})]) == [
        1,
        2,
    ]
    assert ledger.append(record.turn_id, [("done", {"final_response": "ab"})]) == [3]
    assert [seq for seq, _, _ in ledger.events(record.turn_id)] == [1, 2, 3]
    assert ledger.events(record.turn_id, after=2) == [(3, "done", {"final_response": "ab"})]
    ledger.finish(record.turn_id, "done")
    assert ledger.get(record.turn_id).state == "done"
    assert _begin(ledger)[0].state == "done"


def test_a_stored_done_event_ends_the_turn_before_finish(ledger):
    # A replica killed between storing a turn's done event and finishing it must not leave
    # the turn running (a client that got the done never retries it).
    record, _ = _begin(ledger, key="ends")
    stored = threading.Event()
    ledger.record(record.turn_id, "delta", {"text": "a"}, lambda seq: None)
    assert ledger.get(record.turn_id).state == "running"
    ledger.record(record.turn_id, "done", {"final_response": "a"}, lambda seq: stored.set())
    assert stored.wait(10)
    assert ledger.get(record.turn_id).state == "done"
    ledger.finish(record.turn_id, "failed")  # finish still sets the final state
    assert ledger.get(record.turn_id).state == "failed"


def test_events_of_many_turns_recorded_at_once_are_stored_in_order_per_turn(ledger):
    # On PostgreSQL the turns are spread over several writer threads; each turn's events
    # keep their order, and waiting for everything pending waits for every writer.
    records = [_begin(ledger, key=f"k{n}", session=f"s{n}")[0] for n in range(8)]
    stored: dict[str, list] = {r.turn_id: [] for r in records}
    for i in range(10):
        for r in records:
            ledger.record(r.turn_id, "delta", {"text": str(i)}, stored[r.turn_id].append)
    everything = threading.Event()
    ledger.after_pending(everything.set)
    assert everything.wait(10)
    for r in records:
        assert stored[r.turn_id] == list(range(1, 11))
        assert [d["text"] for _, _, d in ledger.events(r.turn_id)] == [str(i) for i in range(10)]
    first = records[0].turn_id
    ledger.record(first, "done", {"final_response": "9"}, stored[first].append)
    its_own = threading.Event()
    ledger.after_pending(its_own.set, first)
    assert its_own.wait(10) and stored[first][-1] == 11


def test_wait_returns_when_an_event_arrives(ledger):
    record, _ = _begin(ledger)

    async def waiting():
        started = time.monotonic()
        await ledger.wait(record.turn_id, 0, 10)
        return time.monotonic() - started

    def later():
        time.sleep(0.3)
        ledger.append(record.turn_id, [("delta", {"text": "x"})])

    threading.Thread(target=later).start()
    assert asyncio.run(waiting()) < 5


def test_a_local_ledger_forgets_the_oldest_finished_turns():
    ledger = LocalLedger(keep=3)
    records = [_begin(ledger, key=f"k{i}")[0] for i in range(5)]
    for record in records:
        ledger.finish(record.turn_id, "done")
    _begin(ledger, key="one more")
    assert ledger.get(records[0].turn_id) is None
    assert ledger.get(records[-1].turn_id) is not None


# -- PostgreSQL: replicas ------------------------------------------------------------------


@pytest.fixture
def replicas(postgres_url):
    from hermes_context.bridge.pg_ledger import PostgresLedger

    pair = [PostgresLedger(postgres_url, ttl_seconds=2, max_size=3) for _ in range(2)]
    yield pair
    for one in pair:
        one.close()


def _kill(replica, postgres_url):
    """What SIGKILL does to a replica: its heartbeat stops (its rows stay)."""
    replica._stop.set()
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            "UPDATE hc_bridge_replicas SET heartbeat = now() - interval '1 hour' WHERE owner = %s",
            (replica.owner,),
        )


def test_a_session_is_held_by_one_replica_at_a_time(replicas):
    a, b = replicas
    never = threading.Event()
    assert a.acquire("s1", timeout=1, cancel=never)
    assert not b.acquire("s1", timeout=0.3, cancel=never)
    assert b.acquire("s2", timeout=1, cancel=never)
    a.release("s1")
    assert b.acquire("s1", timeout=1, cancel=never)


def test_a_waiting_replica_gets_the_session_when_the_holder_releases_it(replicas):
    a, b = replicas
    never = threading.Event()
    assert a.acquire("s1", timeout=1, cancel=never)
    threading.Timer(0.3, a.release, args=("s1",)).start()
    started = time.monotonic()
    assert b.acquire("s1", timeout=5, cancel=never)
    assert time.monotonic() - started < 3


def test_a_dead_replicas_sessions_and_turns_are_taken_over(replicas, postgres_url):
    a, b = replicas
    never = threading.Event()
    record, _ = _begin(a, key="retry-me")
    a.append(record.turn_id, [("delta", {"text": "par"})])
    assert a.acquire("s1", timeout=1, cancel=never)
    assert b.alive(a.owner) and not b.take_over(record)
    _kill(a, postgres_url)
    assert not b.alive(a.owner)
    assert b.acquire("s1", timeout=1, cancel=never)
    again, created = _begin(b, key="retry-me")
    assert not created and again.owner == a.owner
    assert b.take_over(again)
    assert not b.take_over(again)  # a second taker loses
    assert b.append(record.turn_id, [("delta", {"text": "tial"})]) == [2]
    assert b.get(record.turn_id).owner == b.owner


def test_cancel_stops_waiting_for_a_session(replicas):
    a, b = replicas
    assert a.acquire("s1", timeout=1, cancel=threading.Event())
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    assert not b.acquire("s1", timeout=30, cancel=cancel)
    assert time.monotonic() - started < 5


def test_leaving_frees_the_sessions_at_once(postgres_url):
    from hermes_context.bridge.pg_ledger import PostgresLedger

    a = PostgresLedger(postgres_url, ttl_seconds=60, max_size=2)
    b = PostgresLedger(postgres_url, ttl_seconds=60, max_size=2)
    try:
        assert a.acquire("s1", timeout=1, cancel=threading.Event())
        a.close()
        assert b.acquire("s1", timeout=1, cancel=threading.Event())
    finally:
        b.close()


def test_an_unreachable_database_is_a_store_error():
    from hermes_context.bridge.pg_ledger import PostgresLedger

    with pytest.raises(StoreError, match="cannot connect to PostgreSQL"):
        PostgresLedger("postgresql://127.0.0.1:1/none?connect_timeout=2")


def test_a_forgotten_local_turn_reads_as_ended():
    ledger = LocalLedger(keep=1)
    old, _ = _begin(ledger, key="old")
    ledger.finish(old.turn_id, "done")
    _begin(ledger, key="new")
    assert ledger.get(old.turn_id) is None
    assert ledger.events(old.turn_id) == []
    asyncio.run(ledger.wait(old.turn_id, 0, 5))  # returns at once, no KeyError


def test_a_closed_ledger_refuses_at_once(postgres_url):
    from hermes_context.bridge.pg_ledger import PostgresLedger

    ledger = PostgresLedger(postgres_url, ttl_seconds=2, max_size=2)
    record, _ = _begin(ledger)
    ledger.close()
    started = time.monotonic()
    with pytest.raises(StoreError, match="closed"):
        ledger.finish(record.turn_id, "done")
    stored = []
    ledger.record(record.turn_id, "delta", {"text": "late"}, stored.append)
    assert stored == [None] and time.monotonic() - started < 5


def test_a_busy_pool_does_not_make_a_replica_look_dead(postgres_url):
    from hermes_context import pgsql
    from hermes_context.bridge.pg_ledger import PostgresLedger

    pool = pgsql.open_pool(postgres_url, max_size=1)
    a = PostgresLedger(postgres_url, ttl_seconds=4, pool=pool)
    b = PostgresLedger(postgres_url, ttl_seconds=4, max_size=2)
    try:
        record, _ = _begin(a, key="busy")
        with pool.connection():  # every connection of a's pool held by its turns
            time.sleep(6)
            assert b.alive(a.owner)
            assert not b.take_over(record)
    finally:
        b.close()
        a.close()
        pool.close()


def test_only_the_owner_finishes_a_turn(replicas, postgres_url):
    a, b = replicas
    record, _ = _begin(a, key="owned")
    _kill(a, postgres_url)
    assert b.take_over(record)
    a.finish(record.turn_id, "done")  # a stale replica's late finish
    assert b.get(record.turn_id).state == "running"
    b.finish(record.turn_id, "done")
    assert b.get(record.turn_id).state == "done"
