"""session_search: discover, scroll, read and browse modes, scoping and limits."""

from __future__ import annotations

import json

import pytest

from hermes_context import CompressionResult
from hermes_context.sessions import SessionNotFoundError
from hermes_context.sessions.search import MAX_LIMIT


def _session(session_db, sid, texts, **kwargs):
    session_db.create_session(sid, **kwargs)
    return session_db.append_messages(
        sid,
        [
            {"role": "user" if i % 2 == 0 else "assistant", "content": t}
            for i, t in enumerate(texts)
        ],
    )


def test_mode_is_inferred_from_arguments(session_db):
    ids = _session(session_db, "a", ["hello there", "general kenobi"])
    assert session_db.session_search(query="kenobi")["mode"] == "discover"
    assert session_db.session_search(session_id="a", around_message_id=ids[0])["mode"] == "scroll"
    assert session_db.session_search(around_message_id=ids[0])["mode"] == "scroll"
    assert session_db.session_search(session_id="a")["mode"] == "read"
    assert session_db.session_search()["mode"] == "browse"
    assert session_db.session_search(query="   ")["mode"] == "browse"


def test_discover_groups_by_lineage_root_and_excludes_current(session_db):
    _session(session_db, "old", ["we chose postgres for the ledger"], title="session_db choice")
    _session(session_db, "old-child", ["postgres tuning notes"], parent_session_id="old")
    _session(session_db, "other", ["postgres backup cron"], title="ops")
    _session(session_db, "current", ["postgres again?"])
    out = session_db.session_search(query="postgres", current_session_id="current", limit=5)
    assert out["match"] == "all"
    roots = {g["root_session_id"]: g for g in out["results"]}
    assert set(roots) == {"old", "other"}
    assert sorted(roots["old"]["session_ids"]) == ["old", "old-child"]
    assert len(roots["old"]["hits"]) == 2
    assert out["count"] == 2
    hit = roots["other"]["hits"][0]
    assert set(hit) == {"session_id", "message_id", "role", "snippet", "score", "time"}
    assert hit["snippet"] == "postgres backup cron"
    json.dumps(out)  # a tool result: plain JSON


def test_discover_limit_counts_conversations_and_is_clamped(session_db):
    for i in range(12):
        _session(session_db, f"s{i}", [f"capybara number {i}"])
    assert session_db.session_search(query="capybara")["count"] == 3
    assert session_db.session_search(query="capybara", limit=50)["count"] == MAX_LIMIT
    assert session_db.session_search(query="capybara", limit=0)["count"] == 1


def test_discover_sort_orders_hits_within_a_conversation(session_db):
    session_db.create_session("s")
    for t in (1000.0, 3000.0, 2000.0):
        session_db.append_messages("s", [{"role": "user", "content": "ocelot", "timestamp": t}])
    newest = session_db.session_search(query="ocelot")["results"][0]["hits"]
    oldest = session_db.session_search(query="ocelot", sort="oldest")["results"][0]["hits"]
    assert [h["time"][11:19] for h in newest] == ["00:50:00", "00:33:20", "00:16:40"]
    assert [h["time"] for h in oldest] == [h["time"] for h in reversed(newest)]


def test_discover_within_one_session(session_db):
    _session(session_db, "a", ["lemur facts"])
    _session(session_db, "b", ["lemur myths"])
    out = session_db.session_search(query="lemur", session_id="b")
    assert [g["root_session_id"] for g in out["results"]] == ["b"]


def test_current_session_compacted_originals_are_still_found(session_db):
    ids = _session(session_db, "cur", ["the axolotl secret is 42", "noted", "what was it?"])
    before = session_db.get_messages("cur")
    summary = {
        "role": "user",
        "content": "summary: a secret was shared",
        "_compressed_summary": True,
    }
    result = CompressionResult(
        messages=[summary, before[2]], tokens_before=30, tokens_after=10, dropped=2,
        lineage=[[0, 1], [2]],
    )  # fmt: skip
    session_db.persist_compression("cur", before, result)
    out = session_db.session_search(query="axolotl", current_session_id="cur")
    [group] = out["results"]
    [hit] = group["hits"]
    assert (hit["message_id"], hit["compacted"]) == (ids[0], True)
    # What the current context still holds is not returned.
    assert session_db.session_search(query="what", current_session_id="cur")["results"] == []


def test_scroll_shows_window_around_message(session_db):
    ids = _session(session_db, "s", [f"line {i}" for i in range(30)])
    out = session_db.session_search(session_id="s", around_message_id=ids[10], window=2)
    assert [m["content"] for m in out["messages"]] == [f"line {i}" for i in range(8, 13)]
    assert (out["more_before"], out["more_after"]) == (True, True)
    edge = session_db.session_search(session_id="s", around_message_id=ids[0], window=3)
    assert [m["message_id"] for m in edge["messages"]] == ids[:4]
    assert edge["more_before"] is False
    wide = session_db.session_search(session_id="s", around_message_id=ids[15], window=99)
    assert len(wide["messages"]) == 30 and wide["window"] == 20
    default = session_db.session_search(session_id="s", around_message_id=ids[15])
    assert len(default["messages"]) == 11


def test_scroll_wrong_session_is_not_found(session_db):
    ids = _session(session_db, "a", ["x"])
    _session(session_db, "b", ["y"])
    with pytest.raises(SessionNotFoundError, match=f"^message {ids[0]} not found$"):
        session_db.session_search(session_id="b", around_message_id=ids[0])


def test_scroll_other_users_message_names_no_session(session_db):
    session_db.create_session("theirs", user_id="alice")
    (theirs,) = session_db.append_messages("theirs", [{"role": "user", "content": "secret"}])
    with pytest.raises(SessionNotFoundError) as info:
        session_db.session_search(around_message_id=theirs, user_id="bob")
    assert str(info.value) == f"message {theirs} not found"
    assert info.value.session_id is None


@pytest.mark.parametrize("bad", [0, -1, 2**63, True, "3"])
def test_scroll_refuses_invalid_message_ids(session_db, bad):
    _session(session_db, "s", ["x"])
    with pytest.raises(ValueError, match="around_message_id must be a message id"):
        session_db.session_search(around_message_id=bad)


def test_read_long_session_shows_head_and_tail(session_db):
    ids = _session(session_db, "s", [f"m{i}" for i in range(45)], title="long")
    out = session_db.session_search(session_id="s")
    assert [m["content"] for m in out["messages"]] == [
        f"m{i}" for i in list(range(20)) + list(range(35, 45))
    ]
    assert (out["omitted"], out["omitted_after_message_id"]) == (15, ids[19])
    assert out["session"]["title"] == "long" and out["session"]["message_count"] == 45


def test_read_short_session_whole_and_clips_long_content(session_db):
    _session(session_db, "s", ["a", "b" * 5000])
    out = session_db.session_search(session_id="s")
    assert out["omitted"] == 0 and len(out["messages"]) == 2
    assert out["messages"][1]["content"] == "b" * 1500 + " … [3500 more characters]"


def test_browse_lists_lineages_newest_first_without_current(session_db):
    _session(session_db, "first", ["hello first"], title="one")
    _session(session_db, "second", ["hello second"], title="two")
    _session(session_db, "second-b", ["continued"], parent_session_id="second", title="two")
    _session(session_db, "mine", ["me"])
    out = session_db.session_search(current_session_id="mine")
    assert [s["session_id"] for s in out["sessions"]] == ["second-b", "first"]
    top = out["sessions"][0]
    assert (top["root_session_id"], top["sessions_in_lineage"], top["preview"]) == (
        "second",
        2,
        "hello second",
    )
    oldest = session_db.session_search(sort="oldest", current_session_id="mine")
    assert [s["session_id"] for s in oldest["sessions"]] == ["first", "second-b"]
    assert session_db.session_search(limit=1, current_session_id="mine")["count"] == 1


def test_everything_is_scoped_by_user(session_db):
    _session(session_db, "alice-1", ["alice likes tea"], user_id="alice")
    bob_ids = _session(session_db, "bob-1", ["bob likes tea"], user_id="bob")
    found = session_db.session_search(query="tea", user_id="alice")
    assert [g["root_session_id"] for g in found["results"]] == ["alice-1"]
    browse = session_db.session_search(user_id="alice")
    assert [s["session_id"] for s in browse["sessions"]] == ["alice-1"]
    for kwargs in (
        {"session_id": "bob-1"},
        {"session_id": "bob-1", "around_message_id": bob_ids[0]},
        {"around_message_id": bob_ids[0]},
        {"query": "tea", "session_id": "bob-1"},
    ):
        with pytest.raises(SessionNotFoundError, match="not found"):
            session_db.session_search(user_id="alice", **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sort": "random"}, "sort must be 'newest' or 'oldest'"),
        ({"limit": "3"}, "limit must be an integer"),
        ({"window": 2.5, "around_message_id": 1}, "window must be an integer"),
        ({"query": 5}, "query must be a string"),
    ],
)
def test_bad_arguments(session_db, kwargs, match):
    with pytest.raises(ValueError, match=match):
        session_db.session_search(**kwargs)


def test_tool_message_entries_show_calls_and_names(session_db):
    session_db.create_session("s")
    call = {"id": "c", "type": "function", "function": {"name": "grep", "arguments": '{"p": "x"}'}}
    session_db.append_messages(
        "s",
        [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c", "content": "a.py:1: x"},
        ],
    )
    first, second = session_db.session_search(session_id="s")["messages"]
    assert first["tool_calls"] == [{"name": "grep", "arguments": '{"p": "x"}'}]
    assert first["content"] == ""
    assert (second["tool_name"], second["content"]) == ("grep", "a.py:1: x")


def _shared_lineage(session_db):
    # A parent without a user may get children of several users: one lineage, two users.
    _session(session_db, "shared", ["root private preview text"])
    _session(session_db, "bob-c", ["bob words here"], parent_session_id="shared", user_id="bob",
             title="bobchild")  # fmt: skip
    _session(session_db, "alice-c", ["alice words secret"], parent_session_id="shared",
             user_id="alice", title="ALICE-SECRET-TITLE")  # fmt: skip


def test_browse_never_shows_another_users_session_of_a_shared_lineage(session_db):
    _shared_lineage(session_db)
    out = session_db.session_search(user_id="bob")
    assert out["count"] == 1
    (entry,) = out["sessions"]
    assert (entry["session_id"], entry["title"], entry["preview"]) == (
        "bob-c",
        "bobchild",
        "bob words here",
    )
    assert entry["sessions_in_lineage"] == 1
    assert "root_session_id" not in entry and "parent_session_id" not in entry
    text = json.dumps(out)
    assert "alice" not in text.lower() and "shared" not in text and "private" not in text


def test_discover_and_read_hide_other_users_lineage_links(session_db):
    _shared_lineage(session_db)
    found = session_db.session_search(query="words", user_id="bob")
    assert [(g["root_session_id"], g["title"], g["session_ids"]) for g in found["results"]] == [
        ("bob-c", "bobchild", ["bob-c"])
    ]
    read = session_db.session_search(session_id="bob-c", user_id="bob")
    assert "root_session_id" not in read["session"]
    assert "parent_session_id" not in read["session"]
    # Without a user everything is visible, links included.
    unscoped = session_db.session_search(session_id="bob-c")["session"]
    assert (unscoped["parent_session_id"], unscoped["root_session_id"]) == ("shared", "shared")


def test_recall_never_returns_another_users_originals(session_db):
    _shared_lineage(session_db)
    (alice_msg,) = [r["id"] for r in session_db.get_message_records("alice-c")]
    (bob_msg,) = [r["id"] for r in session_db.get_message_records("bob-c")]
    (summary,) = session_db.append_messages("bob-c", [{"role": "user", "content": "summary"}])
    # No public path builds such sources; the filter is a second line of defence.
    session_db._write(
        lambda conn: conn.executemany(
            "INSERT INTO message_sources (message_id, source_id, position) VALUES (?, ?, ?)",
            [(summary, alice_msg, 0), (summary, bob_msg, 1)],
        )
    )
    mine = session_db.recall_records("bob-c", summary, user_id="bob")
    assert [r["id"] for r in mine] == [bob_msg]
    assert [r["id"] for r in session_db.recall_records("bob-c", summary)] == [alice_msg, bob_msg]


def test_messages_marked_unindexed_are_stored_but_not_searched(session_db):
    from hermes_context.sessions import UNINDEXED_KEY

    sid = session_db.create_session()
    prompt = {"role": "system", "content": "zebra boilerplate prompt", UNINDEXED_KEY: True}
    session_db.append_messages(sid, [prompt, {"role": "user", "content": "zebra question"}])
    hits = session_db.search("zebra")
    assert [h["role"] for h in hits] == ["user"]
    assert session_db.get_messages(sid)[0] == prompt
    session_db.rebuild_search_index()
    assert [h["role"] for h in session_db.search("zebra")] == ["user"]
