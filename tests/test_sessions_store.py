"""SessionDB: sessions, messages that round-trip exactly, counters, user scoping."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import legacy_state_db
from hermes_context import InvalidMessagesError, SessionDB, StoreError
from hermes_context.sessions import SessionNotFoundError

TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "bash", "arguments": '{"command": "ls -la"}'},
}

ROUND_TRIP_CASES = [
    {"role": "user", "content": "hello"},
    {"role": "user", "content": ""},
    {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
    {"role": "assistant", "tool_calls": [TOOL_CALL]},  # no content key at all
    {"role": "tool", "tool_call_id": "call_1", "content": "total 0"},
    {"role": "tool", "tool_call_id": "call_1", "name": "bash", "content": "x"},
    {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "data:x"}}]},
    {"role": "user", "content": []},
    {"role": "assistant", "content": "S", "_compressed_summary": True, "_compressed_summary_has_user_turn": False},
    {"role": "system", "content": "sys", "_meta": {"a": [1, 2.5, None, "é"]}, "timestamp": 12.5},
    {"role": "developer", "content": "dev", "tool_call_id": 7},  # wrong type goes to extra
    {"role": "assistant", "content": "x", "tool_calls": None},
    {"role": "user", "content": "nul\x00byte and 中文 and emoji 🎉"},
    {"content": "x", "_a": 1, "role": "user", "tool_call_id": "t"},  # unusual key order
]  # fmt: skip


@pytest.mark.parametrize("message", ROUND_TRIP_CASES)
def test_message_round_trips_exactly(session_db, message):
    sid = session_db.create_session()
    session_db.append_messages(sid, [message])
    [got] = session_db.get_messages(sid)
    assert got == message
    assert list(got) == list(message)  # key order too


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**62), max_value=2**62)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)
message_dicts = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool", "developer"])},
    optional={
        "content": st.none() | st.text(max_size=50) | st.lists(
            st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=20)}),
            max_size=3,
        ),
        "tool_calls": st.lists(
            st.fixed_dictionaries({
                "id": st.text(min_size=1, max_size=8),
                "type": st.just("function"),
                "function": st.fixed_dictionaries({
                    "name": st.text(min_size=1, max_size=8),
                    "arguments": st.text(max_size=30),
                }),
            }),
            max_size=2,
        ),
        "tool_call_id": st.text(max_size=8) | st.integers(),
        "name": st.text(max_size=8),
        "_meta": json_values,
        "_compressed_summary": st.booleans(),
    },
)  # fmt: skip


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(messages=st.lists(message_dicts, min_size=1, max_size=5))
def test_arbitrary_message_dicts_round_trip(session_db, messages):
    sid = session_db.create_session()
    ids = session_db.append_messages(sid, messages)
    assert len(ids) == len(set(ids)) == len(messages)
    got = session_db.get_messages(sid)
    assert got == messages
    assert [list(m) for m in got] == [list(m) for m in messages]
    assert [r["message"] for r in session_db.get_message_records(sid)] == messages


def test_append_returns_increasing_ids_and_keeps_order(session_db):
    sid = session_db.create_session()
    first = session_db.append_messages(sid, [{"role": "user", "content": str(i)} for i in range(3)])
    second = session_db.append_messages(sid, [{"role": "assistant", "content": "a"}])
    assert first + second == sorted(first + second)
    assert [m["content"] for m in session_db.get_messages(sid)] == ["0", "1", "2", "a"]


def test_append_does_not_mutate_or_alias_input(session_db):
    sid = session_db.create_session()
    message = {"role": "user", "content": [{"type": "text", "text": "x"}], "_m": {"k": 1}}
    snapshot = json.dumps(message)
    session_db.append_messages(sid, [message])
    got = session_db.get_messages(sid)[0]
    got["_m"]["k"] = 2
    assert json.dumps(message) == snapshot
    assert session_db.get_messages(sid)[0]["_m"] == {"k": 1}


@pytest.mark.parametrize(
    ("bad", "rule"),
    [
        ({"role": "robot", "content": "x"}, "bad_role"),
        ({"content": "no role"}, "bad_role"),
        ("not a dict", "not_object"),
        ({"role": "user", "content": "x", "_obj": object()}, "not_json"),
        ({"role": "user", "content": "x", "_nan": float("nan")}, "not_json"),
    ],
)
def test_invalid_message_rejects_whole_batch(session_db, bad, rule):
    sid = session_db.create_session()
    with pytest.raises(InvalidMessagesError) as info:
        session_db.append_messages(sid, [{"role": "user", "content": "fine"}, bad])
    assert info.value.index == 1
    assert info.value.rule == rule
    assert session_db.get_messages(sid) == []
    assert session_db.get_session(sid)["message_count"] == 0


def test_derived_columns(session_db):
    sid = session_db.create_session()
    session_db.append_messages(
        sid,
        [
            {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "out", "_timestamp": 1000.0},
        ],
    )
    # A tool result in a later call is still named after its call.
    session_db.append_messages(
        sid, [{"role": "assistant", "content": "S", "_compressed_summary": True}]
    )
    records = session_db.get_message_records(sid)
    assert [r["tool_name"] for r in records] == [None, "bash", None]
    assert records[1]["timestamp"] == 1000.0
    assert [r["is_summary"] for r in records] == [False, False, True]
    assert all(r["active"] and not r["compacted"] for r in records)
    assert records[1]["token_estimate"] == 4 + 1


def test_tool_result_named_from_earlier_call(session_db):
    sid = session_db.create_session()
    session_db.append_messages(
        sid, [{"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]}]
    )
    session_db.append_messages(sid, [{"role": "tool", "tool_call_id": "call_1", "content": "out"}])
    assert session_db.get_message_records(sid)[1]["tool_name"] == "bash"


def test_session_fields_and_counters(session_db):
    sid = session_db.create_session("s1", source="bridge", model="m", title="T", user_id="u")
    assert sid == "s1"
    session_db.append_messages(
        sid,
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
        ],
    )
    s = session_db.get_session(sid)
    assert {k: s[k] for k in ("id", "source", "model", "title", "user_id", "root_session_id")} == {
        "id": "s1", "source": "bridge", "model": "m", "title": "T", "user_id": "u",
        "root_session_id": "s1",
    }  # fmt: skip
    assert (s["message_count"], s["tool_call_count"], s["compression_count"]) == (2, 1, 0)
    assert s["ended_at"] is None and s["end_reason"] is None
    session_db.end_session(sid, "user_exit")
    s = session_db.get_session(sid)
    assert s["end_reason"] == "user_exit" and s["ended_at"] >= s["started_at"]


def test_generated_ids_are_unique_and_sortable(session_db):
    ids = [session_db.create_session() for _ in range(20)]
    assert len(set(ids)) == 20
    assert all(len(i) == len("20260101_000000_abcdef12") for i in ids)


def test_duplicate_session_id_is_refused(session_db):
    session_db.create_session("same")
    with pytest.raises(StoreError, match="already exists"):
        session_db.create_session("same")


def test_child_inherits_lineage_and_user(session_db):
    session_db.create_session("root", user_id="alice")
    session_db.create_session("child", parent_session_id="root")
    session_db.create_session("grandchild", parent_session_id="child")
    g = session_db.get_session("grandchild")
    assert (g["root_session_id"], g["user_id"], g["parent_session_id"]) == (
        "root",
        "alice",
        "child",
    )
    with pytest.raises(StoreError, match="another user"):
        session_db.create_session(parent_session_id="root", user_id="bob")
    with pytest.raises(SessionNotFoundError):
        session_db.create_session(parent_session_id="missing")


def test_list_sessions_filters_and_orders(session_db):
    for i, (source, user) in enumerate(
        [("cli", "a"), ("bridge", "a"), ("cli", "b"), ("cli", None)]
    ):
        session_db.create_session(f"s{i}", source=source, user_id=user)
    assert [s["id"] for s in session_db.list_sessions()] == ["s3", "s2", "s1", "s0"]
    assert [s["id"] for s in session_db.list_sessions(limit=2)] == ["s3", "s2"]
    assert [s["id"] for s in session_db.list_sessions(source="cli")] == ["s3", "s2", "s0"]
    assert [s["id"] for s in session_db.list_sessions(user_id="a")] == ["s1", "s0"]
    assert [s["id"] for s in session_db.list_sessions(user_id="a", source="cli")] == ["s0"]


@pytest.mark.parametrize(
    "call",
    [
        lambda session_db: session_db.append_messages("nope", [{"role": "user", "content": "x"}]),
        lambda session_db: session_db.get_messages("nope"),
        lambda session_db: session_db.end_session("nope", "x"),
        lambda session_db: session_db.delete_session("nope"),
        lambda session_db: session_db.recall("nope", 1),
        lambda session_db: session_db.get_compressor_state("nope"),
    ],
)
def test_missing_session_is_not_found(session_db, call):
    with pytest.raises(SessionNotFoundError, match="'nope' not found"):
        call(session_db)
    assert session_db.get_session("nope") is None


def test_delete_session_removes_messages_and_index(session_db):
    keep = session_db.create_session()
    gone = session_db.create_session()
    session_db.append_messages(keep, [{"role": "user", "content": "kangaroo stays"}])
    session_db.append_messages(gone, [{"role": "user", "content": "kangaroo leaves"}] * 3)
    assert session_db.delete_session(gone) == 3
    assert session_db.get_session(gone) is None
    assert [h["session_id"] for h in session_db.search("kangaroo", limit=10)] == [keep]


def test_delete_with_children_needs_cascade(session_db):
    session_db.create_session("p")
    session_db.create_session("c", parent_session_id="p")
    session_db.append_messages("c", [{"role": "user", "content": "x"}])
    with pytest.raises(StoreError, match="1 child session"):
        session_db.delete_session("p")
    assert session_db.delete_session("p", cascade=True) == 1
    assert session_db.get_session("c") is None and session_db.get_session("p") is None


def test_compressor_state_round_trip(session_db):
    sid = session_db.create_session()
    assert session_db.get_compressor_state(sid) is None
    state = {"strikes": 2, "fallback_streak": 1, "cooldown_until": 1.8e9, "compression_count": 4}
    session_db.save_compressor_state(sid, state)
    assert session_db.get_compressor_state(sid) == state
    assert session_db.get_session(sid)["compressor_state"] == state
    session_db.save_compressor_state(sid, None)
    assert session_db.get_compressor_state(sid) is None


def test_default_path_is_hermes_home(hermes_home):
    with SessionDB() as store:
        assert store.path == hermes_home / "state.db"
        store.create_session("x")
    assert (hermes_home / "state.db").exists()


def test_wal_mode_and_foreign_keys(tmp_path):
    with SessionDB(tmp_path / "deep" / "er" / "state.db") as store:
        store.create_session()
    conn = sqlite3.connect(tmp_path / "deep" / "er" / "state.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


@pytest.mark.sqlite_only
def test_one_connection_per_thread(session_db):
    sid = session_db.create_session()
    errors, used = [], []

    def work(n):
        try:
            session_db.append_messages(
                sid, [{"role": "user", "content": f"t{n}-{i}"} for i in range(20)]
            )
            used.append(session_db._conn())
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(session_db.get_messages(sid)) == 80
    assert len({id(c) for c in [*used, session_db._conn()]}) == 5  # the main one, one per worker
    for conn in used:  # closed when their thread ended
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")
    session_db.close()
    assert session_db._conns == []


ESCAPED_SURROGATE_ARGS = '{"command": "printf \\ud800"}'  # ASCII text; decodes to a lone surrogate
SURROGATE_CASES = [
    {"role": "user", "content": "hi \ud800"},
    {"role": "user", "content": [{"type": "text", "text": "\udfff"}]},
    {"role": "user", "content": "ok", "_meta": {"note": "\ud800"}},
    {"role": "user", "content": "ok", "\ud800": 1},
    {"role": "tool", "tool_call_id": "c\udcff", "name": "sh\udcff", "content": "out \udcff"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": ESCAPED_SURROGATE_ARGS}}]},
    {"role": "assistant", "content": "x", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "t", "arguments": '{"a": "\ud800"}'}}]},
    {"content": "\ud800 first", "role": "user"},  # unusual key order too
]  # fmt: skip


@pytest.mark.parametrize("message", SURROGATE_CASES)
def test_lone_surrogates_are_stored_exactly(session_db, message):
    session_db.create_session("s")
    session_db.append_messages("s", [{"role": "user", "content": "fine"}, message])
    [_, got] = session_db.get_messages("s")
    assert got == message and list(got) == list(message)
    assert session_db.get_session("s")["message_count"] == 2
    assert [h["message_id"] for h in session_db.search("fine")] != []
    session_db.search("\ud800")  # does not raise


def test_lone_surrogate_message_is_found_by_its_other_words(session_db):
    session_db.create_session("s")
    [mid] = session_db.append_messages("s", [{"role": "user", "content": "wombat \ud800 x"}])
    [hit] = session_db.search("wombat")
    assert (hit["message_id"], hit["snippet"]) == (mid, "wombat \ufffd x")


def test_surrogate_pair_split_in_two_characters_is_refused(session_db):
    session_db.create_session("s")
    split = {"role": "user", "content": "\ud83d\ude00"}  # two code points, not one emoji
    with pytest.raises(
        InvalidMessagesError, match=r"^message 1: key 'content' holds a surrogate pair"
    ) as info:
        session_db.append_messages("s", [{"role": "user", "content": "fine"}, split])
    assert (info.value.index, info.value.rule) == (1, "not_unicode")
    assert session_db.get_messages("s") == []


@pytest.mark.parametrize("field", ["title", "source", "model", "user_id", "session_id"])
def test_session_fields_with_lone_surrogates_are_refused_clearly(session_db, field):
    name = field.replace("_id", " id") if field == "session_id" else field
    with pytest.raises(StoreError, match=f"^{name} .* holds a lone surrogate"):
        session_db.create_session(**{field: "bad \udcff"})
    assert session_db.list_sessions() == []


def test_lookups_with_lone_surrogates_do_not_raise(session_db):
    session_db.create_session("s")
    assert session_db.get_session("s\udcff") is None
    with pytest.raises(SessionNotFoundError):
        session_db.get_messages("s\udcff")
    with pytest.raises(StoreError, match="lone surrogate"):
        session_db.list_sessions(source="\udcff")


DEEP_JSON = '{"output": ' + "[" * 1_500 + "]" * 1_500 + ', "note": "quagga"}'


def test_deeply_nested_json_text_is_stored_as_is_and_searched_as_text(session_db):
    call = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": DEEP_JSON}}
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": DEEP_JSON},
    ]
    session_db.create_session("s")
    ids = session_db.append_messages("s", messages)
    assert session_db.get_messages("s") == messages
    assert sorted(h["message_id"] for h in session_db.search("quagga")) == ids


def test_deeply_nested_metadata_is_refused_clearly(session_db):
    deep: list = []
    for _ in range(5_000):
        deep = [deep]
    session_db.create_session("s")
    with pytest.raises(
        InvalidMessagesError, match="^message 0: key '_meta' is nested too deeply"
    ) as info:
        session_db.append_messages("s", [{"role": "user", "content": "x", "_meta": deep}])
    assert (info.value.index, info.value.rule) == (0, "not_json")


@pytest.mark.parametrize("value", [10**400, -(10**400)])
def test_absurd_timestamp_falls_back_to_the_time_of_writing(session_db, value):
    session_db.create_session("s")
    before = time.time()
    session_db.append_messages("s", [{"role": "user", "content": "x", "_timestamp": value}])
    [record] = session_db.get_message_records("s")
    assert before <= record["timestamp"] <= time.time()
    assert record["message"]["_timestamp"] == value


@pytest.mark.parametrize("limit", [0, -1, 2**63, 1.5, "3", True])
def test_list_sessions_and_search_refuse_non_positive_limits(session_db, limit):
    session_db.create_session("s")
    session_db.append_messages("s", [{"role": "user", "content": "kubernetes"}])
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        session_db.list_sessions(limit=limit)
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        session_db.search("kubernetes", limit=limit)


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_new_database_and_its_side_files_are_private(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "new" / "state.db"
        with SessionDB(path) as db:
            db.create_session("s")  # the -wal and -shm files exist while it is open
            modes = {p.name: _mode(p) for p in path.parent.iterdir()}
    finally:
        os.umask(old)
    assert modes == {"state.db": 0o600, "state.db-wal": 0o600, "state.db-shm": 0o600}


def test_existing_database_mode_is_left_alone(tmp_path):
    path = tmp_path / "state.db"
    SessionDB(path).close()
    os.chmod(path, 0o644)
    with SessionDB(path) as db:
        db.create_session("s")
    assert _mode(path) == 0o644


def test_read_only_store_reads_and_refuses_writes(tmp_path):
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        db.create_session("s", title="kept")
        db.append_messages("s", [{"role": "user", "content": "numbat facts"}])
    before = path.read_bytes()
    with SessionDB(path, read_only=True) as db:
        assert db.read_only
        assert [s["id"] for s in db.list_sessions()] == ["s"]
        assert db.get_messages("s") == [{"role": "user", "content": "numbat facts"}]
        assert [h["session_id"] for h in db.search("numbat")] == ["s"]
        assert db.session_search(query="numbat")["count"] == 1
        writes = [
            lambda: db.create_session("t"),
            lambda: db.append_messages("s", [{"role": "user", "content": "x"}]),
            lambda: db.delete_session("s"),
            lambda: db.save_compressor_state("s", {"a": 1}),
            db.rebuild_search_index,
        ]
        for write in writes:
            with pytest.raises(
                StoreError, match=r"is read-only \(opened read-only\); nothing was changed"
            ) as info:
                write()
            assert info.value.data["read_only"] is True
    assert path.read_bytes() == before


def test_read_only_store_cannot_create_a_database(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    with pytest.raises(StoreError, match="does not exist; a read-only store cannot create it"):
        SessionDB(folder / "state.db", read_only=True)
    assert list(folder.iterdir()) == []


def test_read_only_store_reads_a_database_of_an_earlier_release(tmp_path):
    path = tmp_path / "state.db"
    conn = legacy_state_db.build(path, 2)
    conn.execute(
        "INSERT INTO sessions (id, root_session_id, source, started_at) VALUES ('old', 'old', 'cli', 1.0)"
    )
    conn.execute(
        "INSERT INTO messages (session_id, seq, role, content, timestamp, token_estimate) "
        "VALUES ('old', 0, 'user', 'wombat from release two', 1.0, 9)"
    )
    conn.close()
    before = path.read_bytes()
    with SessionDB(path, read_only=True) as db:
        assert db.get_messages("old") == [{"role": "user", "content": "wombat from release two"}]
        assert db.list_compactions("old") == []
        assert [h["session_id"] for h in db.search("wombat")] == ["old"]
    assert path.read_bytes() == before


needs_non_root = pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root ignores file permissions, so a read-only file cannot be observed",
)


@needs_non_root
@pytest.mark.parametrize("locked", ["file", "folder"])
def test_unwritable_database_opens_read_only(tmp_path, locked):
    folder = tmp_path / "home"
    path = folder / "state.db"
    with SessionDB(path) as db:
        db.create_session("s")
        db.append_messages("s", [{"role": "user", "content": "numbat"}])
    os.chmod(path if locked == "file" else folder, 0o444 if locked == "file" else 0o555)
    try:
        with SessionDB(path) as db:
            assert db.read_only
            assert [h["session_id"] for h in db.search("numbat")] == ["s"]
            with pytest.raises(StoreError, match="is read-only"):
                db.append_messages("s", [{"role": "user", "content": "x"}])
    finally:
        os.chmod(folder, 0o755)
        os.chmod(path, 0o644)


@pytest.mark.parametrize(
    ("limit", "shown"),
    [(10**23, "100000000000000000000000"), (10**5000, "an integer of 16610 bits")],
    ids=["23-digits", "5001-digits"],
)
def test_huge_limits_are_refused_clearly(session_db, limit, shown):
    session_db.create_session("s")
    message = f"limit must be a positive integer up to 2**63-1, got {shown}"
    with pytest.raises(ValueError, match=re.escape(message)):
        session_db.list_sessions(limit=limit)
    with pytest.raises(ValueError, match=re.escape(message)):
        session_db.search("x", limit=limit)
    with pytest.raises(
        ValueError,
        match=re.escape(
            f"around_message_id must be a message id (an integer from 1 to 2**63-1), got {shown}"
        ),
    ):
        session_db.session_search(around_message_id=limit)
    assert session_db.session_search(limit=limit)["count"] == 1  # clamped to 10


def test_end_session_keeps_the_first_end(session_db):
    session_db.create_session("s")
    session_db.end_session("s", "compression")
    first = session_db.get_session("s")["ended_at"]
    session_db.end_session("s", "resumed_other")
    ended = session_db.get_session("s")
    assert (ended["end_reason"], ended["ended_at"]) == ("compression", first)


def test_sessions_started_in_the_same_instant_list_newest_written_first(session_db, monkeypatch):
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)
    written = ["m", "b", "z", "c", "a"]
    for sid in written:
        session_db.create_session(sid)
    assert [s["id"] for s in session_db.list_sessions()] == written[::-1]
    assert [s["id"] for s in session_db.list_sessions(limit=1)] == ["a"]


def test_last_message_id_is_the_newest_message_of_that_session(session_db):
    sid = session_db.create_session()
    assert session_db.last_message_id(sid) is None
    ids = session_db.append_messages(
        sid, [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]
    )
    assert session_db.last_message_id(sid) == ids[-1]
    other = session_db.create_session()
    session_db.append_messages(other, [{"role": "user", "content": "elsewhere"}])
    assert session_db.last_message_id(sid) == ids[-1]
    with pytest.raises(SessionNotFoundError):
        session_db.last_message_id("no-such-session")
