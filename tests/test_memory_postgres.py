"""Memory on PostgreSQL: schema, scopes, transactions, errors (the shared rules run in test_memory_store)."""

from __future__ import annotations

import threading

import psycopg
import pytest

from hermes_context import MemoryStore
from hermes_context.errors import ConfigError, StoreError
from hermes_context.memory.postgres import MIGRATIONS, PostgresMemory


@pytest.fixture
def memory(postgres_url):
    with PostgresMemory(postgres_url, max_size=4) as mem:
        yield mem


def _store(memory, scope="", **kwargs):
    return MemoryStore(backing=memory.backing(scope), remember_verdicts=False, **kwargs)


def test_opening_twice_migrates_once(postgres_url, memory):
    with PostgresMemory(postgres_url) as again:
        _store(again).add("memory", "uses pytest")
    with psycopg.connect(postgres_url) as conn:
        version = conn.execute(
            "SELECT version FROM hc_schema_versions WHERE component = 'memory'"
        ).fetchone()
    assert version == (len(MIGRATIONS),)
    assert _store(memory).entries("memory") == ["uses pytest"]


def test_a_newer_schema_is_refused(postgres_url, memory):
    with psycopg.connect(postgres_url) as conn:
        conn.execute("UPDATE hc_schema_versions SET version = 99 WHERE component = 'memory'")
    with pytest.raises(StoreError, match="schema is version 99, newer than this hermes-context"):
        PostgresMemory(postgres_url)


def test_an_unreachable_server_is_one_line_without_the_password():
    with pytest.raises(StoreError) as caught:
        PostgresMemory("postgresql://hermes:s3cret-pw@127.0.0.1:1/nowhere?connect_timeout=2")
    message = str(caught.value)
    assert "\n" not in message and "s3cret-pw" not in message
    assert message.startswith(
        "cannot connect to PostgreSQL at postgresql://hermes:***@127.0.0.1:1/"
    )


@pytest.mark.parametrize("url", ["sqlite:///tmp/x.db", "/tmp/memories", ""])
def test_a_url_that_is_not_postgresql_is_a_config_error(url):
    with pytest.raises(ConfigError, match="starts with postgresql://"):
        PostgresMemory(url)


def test_scopes_are_separate_memories(memory):
    _store(memory, "alice").add("user", "Alice prefers tabs.")
    _store(memory, "bob").add("user", "Bob prefers spaces.")
    assert _store(memory, "alice").entries("user") == ["Alice prefers tabs."]
    assert _store(memory, "bob").entries("user") == ["Bob prefers spaces."]
    assert _store(memory).entries("user") == []
    assert _store(memory, "bob").history()[-1]["action"] == "add"
    assert len(_store(memory, "alice").history()) == 1
    assert memory.scopes() == ["alice", "bob"]


def test_status_names_the_row_not_the_password(postgres_url):
    url = postgres_url.replace("postgresql://", "postgresql://root:pw-123@")
    with PostgresMemory(url) as mem:
        path = _store(mem, "carol").status("memory")["path"]
    assert path.startswith("MEMORY.md of user 'carol' on postgresql://root:***@")
    assert "pw-123" not in path


def test_a_failing_archive_insert_rolls_the_whole_write_back(postgres_url, memory):
    store = _store(memory, memory_char_limit=100)
    store.add("memory", "a" * 60)
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            "CREATE FUNCTION hc_refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'archive is read-only'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER hc_refuse BEFORE INSERT ON hc_memory_archive "
            "FOR EACH ROW EXECUTE FUNCTION hc_refuse()"
        )
    result = store.add("memory", "b" * 50)  # needs the first entry archived
    assert result["success"] is False and result["reason"] == "store"
    assert "archive is read-only" in result["error"]
    assert store.entries("memory") == ["a" * 60]
    assert [r["action"] for r in store.history()] == ["add"]


def test_writers_in_threads_lose_nothing(memory):
    def add_many(prefix):
        store = _store(memory, "team", memory_char_limit=5_000)
        for i in range(10):
            assert store.add("memory", f"{prefix} fact {i}")["success"]

    threads = [threading.Thread(target=add_many, args=(p,)) for p in "abcd"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    entries = _store(memory, "team").entries("memory")
    assert sorted(entries) == sorted(f"{p} fact {i}" for p in "abcd" for i in range(10))
    assert len(_store(memory, "team").history()) == 40


def test_reset_keeps_a_backup_row(postgres_url, memory):
    store = _store(memory)
    store.add("memory", "uses pytest")
    done = store.reset("memory")
    assert done["memory"]["backup"].startswith("hc_memory_backups row ")
    assert store.entries("memory") == []
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT content FROM hc_memory_backups").fetchall() == [
            ("uses pytest",)
        ]
    assert store.reset("memory") == {}  # already empty: nothing to back up


def test_staged_writes_live_in_the_database(memory):
    store = _store(memory, write_approval="stage")
    staged = store.add("memory", "Deploys go through make ship.", origin="agent")
    assert staged["staged"] and store.entries("memory") == []
    other_process = _store(memory)
    [pending] = other_process.pending_writes()
    assert pending.id == staged["pending_id"]
    assert other_process.approve(pending.id)["success"]
    assert store.entries("memory") == ["Deploys go through make ship."]
    assert store.pending_writes() == []
    with pytest.raises(StoreError, match="no pending memory write"):
        store.reject(pending.id)


def test_a_corrupt_staged_row_is_listed_and_never_applied(postgres_url, memory):
    store = _store(memory, write_approval="stage")
    with psycopg.connect(postgres_url) as conn:
        conn.execute(
            "INSERT INTO hc_memory_pending (scope, id, created, data) "
            "VALUES ('', 'abcdefabcdef', '2026', '{\"target\": \"nowhere\"}')"
        )
    assert store.pending_writes() == []
    [broken] = store.corrupt_pending_writes()
    assert broken.file == "abcdefabcdef"
    with pytest.raises(StoreError, match="corrupt"):
        store.approve("abcdefabcdef")


def test_a_closed_store_is_a_store_failure_not_a_crash(postgres_url):
    mem = PostgresMemory(postgres_url)
    store = _store(mem)
    mem.close()
    result = store.add("memory", "uses pytest")
    assert result["success"] is False and result["reason"] == "store"
    with pytest.raises(StoreError, match="^reading MEMORY.md failed on PostgreSQL: "):
        store.entries("memory")
