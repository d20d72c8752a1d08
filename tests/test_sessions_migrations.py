"""Schema migrations, old and new databases, and files that are not a session database."""

from __future__ import annotations

import json
import sqlite3

import pytest

import legacy_state_db
from hermes_context import SessionDB, StoreError
from hermes_context.sessions import SCHEMA_VERSION, indexing
from hermes_context.sessions.migrations import MIGRATIONS


def test_migrations_are_numbered_without_gaps():
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert SCHEMA_VERSION == MIGRATIONS[-1].version
    assert len({m.name for m in MIGRATIONS}) == len(MIGRATIONS)


def test_new_database_gets_every_migration_logged(tmp_path):
    SessionDB(tmp_path / "state.db").close()
    conn = sqlite3.connect(tmp_path / "state.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    logged = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
    assert logged == [(m.version, m.name) for m in MIGRATIONS]
    conn.close()


def _version_1_database(path):
    conn = legacy_state_db.build(path, 1)
    conn.execute(
        "INSERT INTO sessions (id, root_session_id, source, started_at) VALUES ('old', 'old', 'cli', 1.0)"
    )
    conn.execute(
        "INSERT INTO messages (session_id, seq, role, content, timestamp, token_estimate) "
        "VALUES ('old', 0, 'user', 'platypus written by version one', 1.0, 9)"
    )
    conn.close()


def test_older_database_opens_and_upgrades_keeping_data(tmp_path):
    path = tmp_path / "state.db"
    _version_1_database(path)
    with SessionDB(path) as db:
        assert db.get_messages("old") == [
            {"role": "user", "content": "platypus written by version one"}
        ]
        # Migration 2 indexed the rows that were already there.
        assert [h["session_id"] for h in db.search("platypus")] == ["old"]
        # Migration 3 added the compaction columns.
        assert db.get_session("old")["compression_count"] == 0
        db.save_compressor_state("old", {"strikes": 1})
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_newer_database_is_refused_untouched(tmp_path):
    path = tmp_path / "state.db"
    SessionDB(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError) as info:
        SessionDB(path)
    message = str(info.value)
    assert str(path) in message
    assert f"schema version {SCHEMA_VERSION + 5}" in message and "upgrade hermes-context" in message
    assert info.value.path == str(path)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "payload",
    [
        b"this is my shopping list, not a database\n" * 10,
        b"\x00" * 4096,
        b"SQLite format 2\x00" + b"\x00" * 200,
    ],
)
def test_non_sqlite_file_is_refused_and_never_overwritten(tmp_path, payload):
    path = tmp_path / "state.db"
    path.write_bytes(payload)
    with pytest.raises(StoreError) as info:
        SessionDB(path)
    assert str(info.value).startswith(f"{path} is not an SQLite database")
    assert path.read_bytes() == payload
    assert not (tmp_path / "state.db-wal").exists()


def test_corrupt_sqlite_file_gets_a_clear_error(tmp_path):
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        sid = db.create_session()
        db.append_messages(sid, [{"role": "user", "content": "x" * 500}] * 50)
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # wreck the schema page, keep the header
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as info:
        SessionDB(path)
    assert str(info.value).startswith(f"{path} cannot be read as a session database")
    assert path.read_bytes() == bytes(data)


def test_folder_at_the_path_is_refused(tmp_path):
    with pytest.raises(StoreError, match="is a folder"):
        SessionDB(tmp_path)


def test_empty_file_becomes_a_database(tmp_path):
    path = tmp_path / "state.db"
    path.touch()
    with SessionDB(path) as db:
        assert db.list_sessions() == []


JSON_OUTPUT = json.dumps({"output": "Traceback:\nKeyError: 'user_id'", "exit_code": 1})
# Rows as version 3 wrote them: (role, content, search_text).
VERSION_3_ROWS = [
    ("tool", JSON_OUTPUT, None),  # raw JSON indexed: "nKeyError"
    ("user", "ｆｕｌｌｗｉｄｔｈ notes", None),  # not folded
    ("user", "数据库 schema", " 数据 据库  schema"),
    ("user", "plain words", None),
]


def _version_3_database(path):
    conn = legacy_state_db.build(path, 3)
    conn.execute(
        "INSERT INTO sessions (id, root_session_id, source, started_at) VALUES ('old', 'old', 'cli', 1.0)"
    )
    for seq, (role, content, search_text) in enumerate(VERSION_3_ROWS):
        conn.execute(
            "INSERT INTO messages (session_id, seq, role, content, timestamp, token_estimate, "
            "search_text) VALUES ('old', ?, ?, ?, 1.0, 9, ?)",
            (seq, role, content, search_text),
        )
    return conn


def _fts_ids(conn, expression, table="message_search"):
    rows = conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (expression,))
    return sorted(r[0] for r in rows)


def test_migration_4_recomputes_the_search_text_of_existing_messages(tmp_path):
    path = tmp_path / "state.db"
    conn = _version_3_database(path)
    assert _fts_ids(conn, '"KeyError"', "messages_fts") == []
    assert _fts_ids(conn, '"nKeyError"', "messages_fts") == [1]
    stored = conn.execute("SELECT id, content FROM messages ORDER BY id").fetchall()
    conn.close()
    with SessionDB(path) as db:
        assert [h["message_id"] for h in db.search("KeyError")] == [1]
        assert db.search("nKeyError") == []
        assert [h["message_id"] for h in db.search("fullwidth")] == [2]
        assert [h["message_id"] for h in db.search("数据")] == [3]
        assert [h["message_id"] for h in db.search("plain")] == [4]
        assert db.get_messages("old")[0] == {"role": "tool", "content": JSON_OUTPUT}
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT id, content FROM messages ORDER BY id").fetchall() == stored
    texts = [r[0] for r in conn.execute("SELECT search_text FROM messages ORDER BY id")]
    assert texts == [
        "Traceback:\nKeyError: 'user_id'\n1",
        "fullwidth notes",
        " 数据 据库  schema",
        None,
    ]
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("SELECT name FROM schema_migrations WHERE version = 4").fetchone() == (
        "search_text_decoded_and_folded",
    )
    conn.close()


def test_migration_4_failing_midway_leaves_version_3_untouched(tmp_path, monkeypatch):
    path = tmp_path / "state.db"
    _version_3_database(path).close()
    before = sqlite3.connect(path)
    dump = list(before.iterdump())
    before.close()
    real, calls = indexing.search_text_for, []

    def failing(message):
        calls.append(message)
        if len(calls) == 3:
            raise RuntimeError("disk on fire")
        return real(message)

    monkeypatch.setattr(indexing, "RECOMPUTE_BATCH", 1)  # rows 1 and 2 are updated first
    monkeypatch.setattr(indexing, "search_text_for", failing)
    with pytest.raises(RuntimeError, match="disk on fire"):
        SessionDB(path)
    conn = sqlite3.connect(path, isolation_level=None)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
    assert list(conn.iterdump()) == dump
    assert _fts_ids(conn, '"KeyError"', "messages_fts") == []
    assert _fts_ids(conn, '"nKeyError"', "messages_fts") == [1]
    conn.close()
