"""SessionDB: sessions, messages that round-trip exactly, counters, user scoping."""

from __future__ import annotations

import json
import sqlite3
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_context import InvalidMessagesError, SessionDB, StoreError
from hermes_context.sessions import SessionNotFoundError


@pytest.fixture
def db(tmp_path):
    store = SessionDB(tmp_path / "state.db")
    yield store
    store.close()


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
def test_message_round_trips_exactly(db, message):
    sid = db.create_session()
    db.append_messages(sid, [message])
    [got] = db.get_messages(sid)
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
def test_arbitrary_message_dicts_round_trip(db, messages):
    sid = db.create_session()
    ids = db.append_messages(sid, messages)
    assert len(ids) == len(set(ids)) == len(messages)
    got = db.get_messages(sid)
    assert got == messages
    assert [list(m) for m in got] == [list(m) for m in messages]
    assert [r["message"] for r in db.get_message_records(sid)] == messages


def test_append_returns_increasing_ids_and_keeps_order(db):
    sid = db.create_session()
    first = db.append_messages(sid, [{"role": "user", "content": str(i)} for i in range(3)])
    second = db.append_messages(sid, [{"role": "assistant", "content": "a"}])
    assert first + second == sorted(first + second)
    assert [m["content"] for m in db.get_messages(sid)] == ["0", "1", "2", "a"]


def test_append_does_not_mutate_or_alias_input(db):
    sid = db.create_session()
    message = {"role": "user", "content": [{"type": "text", "text": "x"}], "_m": {"k": 1}}
    snapshot = json.dumps(message)
    db.append_messages(sid, [message])
    got = db.get_messages(sid)[0]
    got["_m"]["k"] = 2
    assert json.dumps(message) == snapshot
    assert db.get_messages(sid)[0]["_m"] == {"k": 1}


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
def test_invalid_message_rejects_whole_batch(db, bad, rule):
    sid = db.create_session()
    with pytest.raises(InvalidMessagesError) as info:
        db.append_messages(sid, [{"role": "user", "content": "fine"}, bad])
    assert info.value.index == 1
    assert info.value.rule == rule
    assert db.get_messages(sid) == []
    assert db.get_session(sid)["message_count"] == 0


def test_derived_columns(db):
    sid = db.create_session()
    db.append_messages(
        sid,
        [
            {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "out", "_timestamp": 1000.0},
        ],
    )
    # A tool result in a later call is still named after its call.
    db.append_messages(sid, [{"role": "assistant", "content": "S", "_compressed_summary": True}])
    records = db.get_message_records(sid)
    assert [r["tool_name"] for r in records] == [None, "bash", None]
    assert records[1]["timestamp"] == 1000.0
    assert [r["is_summary"] for r in records] == [False, False, True]
    assert all(r["active"] and not r["compacted"] for r in records)
    assert records[1]["token_estimate"] == 4 + 1


def test_tool_result_named_from_earlier_call(db):
    sid = db.create_session()
    db.append_messages(sid, [{"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]}])
    db.append_messages(sid, [{"role": "tool", "tool_call_id": "call_1", "content": "out"}])
    assert db.get_message_records(sid)[1]["tool_name"] == "bash"


def test_session_fields_and_counters(db):
    sid = db.create_session("s1", source="bridge", model="m", title="T", user_id="u")
    assert sid == "s1"
    db.append_messages(
        sid,
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]},
        ],
    )
    s = db.get_session(sid)
    assert {k: s[k] for k in ("id", "source", "model", "title", "user_id", "root_session_id")} == {
        "id": "s1", "source": "bridge", "model": "m", "title": "T", "user_id": "u",
        "root_session_id": "s1",
    }  # fmt: skip
    assert (s["message_count"], s["tool_call_count"], s["compression_count"]) == (2, 1, 0)
    assert s["ended_at"] is None and s["end_reason"] is None
    db.end_session(sid, "user_exit")
    s = db.get_session(sid)
    assert s["end_reason"] == "user_exit" and s["ended_at"] >= s["started_at"]


def test_generated_ids_are_unique_and_sortable(db):
    ids = [db.create_session() for _ in range(20)]
    assert len(set(ids)) == 20
    assert all(len(i) == len("20260101_000000_abcdef12") for i in ids)


def test_duplicate_session_id_is_refused(db):
    db.create_session("same")
    with pytest.raises(StoreError, match="already exists"):
        db.create_session("same")


def test_child_inherits_lineage_and_user(db):
    db.create_session("root", user_id="alice")
    db.create_session("child", parent_session_id="root")
    db.create_session("grandchild", parent_session_id="child")
    g = db.get_session("grandchild")
    assert (g["root_session_id"], g["user_id"], g["parent_session_id"]) == (
        "root",
        "alice",
        "child",
    )
    with pytest.raises(StoreError, match="another user"):
        db.create_session(parent_session_id="root", user_id="bob")
    with pytest.raises(SessionNotFoundError):
        db.create_session(parent_session_id="missing")


def test_list_sessions_filters_and_orders(db):
    for i, (source, user) in enumerate(
        [("cli", "a"), ("bridge", "a"), ("cli", "b"), ("cli", None)]
    ):
        db.create_session(f"s{i}", source=source, user_id=user)
    assert [s["id"] for s in db.list_sessions()] == ["s3", "s2", "s1", "s0"]
    assert [s["id"] for s in db.list_sessions(limit=2)] == ["s3", "s2"]
    assert [s["id"] for s in db.list_sessions(source="cli")] == ["s3", "s2", "s0"]
    assert [s["id"] for s in db.list_sessions(user_id="a")] == ["s1", "s0"]
    assert [s["id"] for s in db.list_sessions(user_id="a", source="cli")] == ["s0"]


@pytest.mark.parametrize(
    "call",
    [
        lambda db: db.append_messages("nope", [{"role": "user", "content": "x"}]),
        lambda db: db.get_messages("nope"),
        lambda db: db.end_session("nope", "x"),
        lambda db: db.delete_session("nope"),
        lambda db: db.recall("nope", 1),
        lambda db: db.get_compressor_state("nope"),
    ],
)
def test_missing_session_is_not_found(db, call):
    with pytest.raises(SessionNotFoundError, match="'nope' not found"):
        call(db)
    assert db.get_session("nope") is None


def test_delete_session_removes_messages_and_index(db):
    keep = db.create_session()
    gone = db.create_session()
    db.append_messages(keep, [{"role": "user", "content": "kangaroo stays"}])
    db.append_messages(gone, [{"role": "user", "content": "kangaroo leaves"}] * 3)
    assert db.delete_session(gone) == 3
    assert db.get_session(gone) is None
    assert [h["session_id"] for h in db.search("kangaroo", limit=10)] == [keep]


def test_delete_with_children_needs_cascade(db):
    db.create_session("p")
    db.create_session("c", parent_session_id="p")
    db.append_messages("c", [{"role": "user", "content": "x"}])
    with pytest.raises(StoreError, match="1 child session"):
        db.delete_session("p")
    assert db.delete_session("p", cascade=True) == 1
    assert db.get_session("c") is None and db.get_session("p") is None


def test_compressor_state_round_trip(db):
    sid = db.create_session()
    assert db.get_compressor_state(sid) is None
    state = {"strikes": 2, "fallback_streak": 1, "cooldown_until": 1.8e9, "compression_count": 4}
    db.save_compressor_state(sid, state)
    assert db.get_compressor_state(sid) == state
    assert db.get_session(sid)["compressor_state"] == state
    db.save_compressor_state(sid, None)
    assert db.get_compressor_state(sid) is None


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


def test_one_connection_per_thread(db):
    sid = db.create_session()
    errors = []

    def work(n):
        try:
            db.append_messages(sid, [{"role": "user", "content": f"t{n}-{i}"} for i in range(20)])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(db.get_messages(sid)) == 80
    assert len(db._conns) == 5  # the main thread's and one per worker
    db.close()
    assert db._conns == []
