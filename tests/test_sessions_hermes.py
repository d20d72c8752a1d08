"""One state.db, both tools: Hermes's files opened in place, and ours written the way Hermes writes."""

from __future__ import annotations

import copy
import itertools
import sqlite3
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_context import SessionDB, StoreError
from hermes_context.agent import wire
from hermes_context.llm.testing import FunctionModel
from hermes_homes import (
    CJK_PHRASE,
    HERMES_SESSION,
    HERMES_WORD,
    LATEST,
    S1,
    S2,
    S3,
    S4,
    TOOL_WORD,
    copy_home,
    header_journal_bytes,
    hermes_fts,
    hermes_writes,
    integrity,
    needs_fixtures,
)

pytestmark = needs_fixtures
WRITABLE = ("v2", "v25")
OUR_WORD = "platypus_written_by_us"


@pytest.fixture
def home(tmp_path, request):
    return copy_home(request.param, tmp_path / request.param)


def _quietly_opened(home):
    """The home's store, without the warning a read-only fixture gives (tested on its own)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SessionDB(home / "state.db")


def _ids(hits):
    return sorted(h["message_id"] for h in hits)


@pytest.mark.parametrize("home", WRITABLE, indirect=True)
def test_a_hermes_state_db_opens_in_place_and_keeps_its_journal_mode(home):
    path = home / "state.db"
    journal = header_journal_bytes(path)
    with SessionDB(path) as db:
        assert {s["id"] for s in db.list_sessions()} == {S1, S2, S3, S4}
        db.append_messages(S2, [{"role": "user", "content": OUR_WORD}])
    assert header_journal_bytes(path) == journal
    assert integrity(path) == "ok"


@pytest.mark.parametrize("home", WRITABLE, indirect=True)
def test_hermes_still_writes_and_finds_everything_after_we_migrate(home):
    path = home / "state.db"
    journal = header_journal_bytes(path)
    with SessionDB(path) as db:
        [ours] = db.append_messages(S1, [{"role": "user", "content": f"{OUR_WORD} again"}])
    theirs = hermes_writes(path, home.name)
    assert hermes_fts(path, TOOL_WORD) == [3]  # a row Hermes wrote before us
    assert hermes_fts(path, OUR_WORD) == [ours]
    assert hermes_fts(path, HERMES_WORD) == [theirs]
    assert header_journal_bytes(path) == journal
    assert integrity(path) == "ok"
    # And we find the row Hermes wrote after us, as we find our own (CJK included).
    with SessionDB(path) as db:
        assert _ids(db.search(HERMES_WORD)) == [theirs]
        assert _ids(db.search("消息")) == [theirs]
        assert db.get_messages(HERMES_SESSION)[-1]["content"].startswith(HERMES_WORD)
    assert header_journal_bytes(path) == journal


def test_a_state_db_we_create_takes_hermes_writes_and_hermes_finds_our_rows(tmp_path):
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        db.create_session("ours", title="Made by hermes-context")
        [ours] = db.append_messages("ours", [{"role": "user", "content": OUR_WORD}])
    theirs = hermes_writes(path, LATEST)
    assert hermes_fts(path, OUR_WORD) == [ours]
    assert hermes_fts(path, HERMES_WORD) == [theirs]
    assert header_journal_bytes(path) == b"\x02\x02"  # ours: WAL
    assert integrity(path) == "ok"
    with SessionDB(path) as db:
        assert _ids(db.search("消息")) == [theirs]
        assert db.get_session(HERMES_SESSION)["title"] == "Written by Hermes"


@pytest.mark.parametrize("home", ["v25-cjk"], indirect=True)
def test_an_index_needing_a_missing_tokenizer_opens_read_only_saying_so_once(home):
    path = home / "state.db"
    before = path.read_bytes()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        db = SessionDB(path)
    with db:
        assert db.read_only
        [warning] = caught
        text = str(warning.message)
        assert "\n" not in text and "read-only" in text and "cjk_unicode61" in text
        assert "sessions import --from-hermes" in text
        assert {s["id"] for s in db.list_sessions()} == {S1, S2, S3, S4}
        assert _ids(db.search(TOOL_WORD)) == [3]
        assert _ids(db.search(CJK_PHRASE)) == [5, 6]
        with pytest.raises(StoreError) as info:
            db.append_messages(S1, [{"role": "user", "content": "x"}])
        assert "read-only" in str(info.value) and "--from-hermes" in str(info.value)
    assert path.read_bytes() == before
    assert not (home / "state.db-wal").exists()


@pytest.mark.parametrize("home", ["v2", "v25", "v25-cjk"], indirect=True)
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (TOOL_WORD, [3]),  # only inside s1's 600-line tool output
        ("KeyError user_id", [3, 4]),
        (CJK_PHRASE, [5, 6]),
        ("超时", [5]),  # two characters: no tokenizer of SQLite's finds it
        ("payment refactor", list(range(7, 20))),  # s3 and s4's summary
    ],
)
def test_search_finds_hermes_rows_as_it_finds_ours(home, query, expected):
    with _quietly_opened(home) as db:
        found = _ids(db.search(query, limit=50))
    assert set(expected) <= set(found) and (len(expected) > 3 or found == expected)


@pytest.mark.parametrize("home", ["v2", "v25", "v25-cjk"], indirect=True)
def test_hermes_sessions_read_as_messages_with_their_lineage(home):
    with _quietly_opened(home) as db:
        s1 = db.get_messages(S1)
        assert [m["role"] for m in s1] == ["user", "assistant", "tool", "assistant"]
        assert s1[1]["tool_calls"][0]["function"]["name"] == "terminal"
        assert s1[2]["tool_call_id"] == "call_1" and TOOL_WORD in s1[2]["content"]
        child = db.get_session(S4)
        assert (child["parent_session_id"], child["root_session_id"]) == (S3, S3)
        assert db.get_session(S3)["end_reason"] == "compression"
        summary = db.get_message_records(S4)[0]
        assert summary["is_summary"] and summary["message"]["_compressed_summary"] is True
        # The summary Hermes wrote stands for the session it split from.
        originals = db.recall(S4, summary["id"])
        assert originals == db.get_messages(S3) and len(originals) == 12
        found = db.session_search(query="payment", limit=5)
        [group] = found["results"]
        assert group["root_session_id"] == S3 and set(group["session_ids"]) <= {S3, S4}


@pytest.mark.parametrize("home", ["v25", "v25-cjk"], indirect=True)
def test_hermes_system_prompt_and_token_counts_are_read(home):
    with _quietly_opened(home) as db:
        s1 = db.get_session(S1)
    assert s1["system_prompt"] == "You are Hermes Agent."
    assert (s1["input_tokens"], s1["output_tokens"]) == (1200, 80)
    assert s1["title"] == "Nightly ETL failure"


@pytest.mark.parametrize("home", WRITABLE, indirect=True)
@pytest.mark.parametrize("session", [S1, S4])
def test_an_agent_resumes_a_hermes_session_with_a_valid_request(home, session):
    from hermes_context import AIAgent

    model = FunctionModel(lambda messages, tools: f"answer {OUR_WORD}")
    agent = AIAgent(chat_model=model, hermes_home=home, session_id=session, use_llm_summary=False)
    try:
        result = agent.run_conversation("and what now?")
    finally:
        agent.close()
    assert result["session_id"] == session
    [call] = model.calls
    sent = call.messages
    assert sent[0]["role"] == "system" and sent[-1] == {"role": "user", "content": "and what now?"}
    with SessionDB(home / "state.db") as db:
        history = [m for m in db.get_messages(session) if m["role"] != "system"]
    # The whole Hermes history is sent (FunctionModel refuses an invalid sequence):
    # s1's tool call with its result; s4's summary joined with the user's message after it.
    sent_text = "\n".join(m.get("content") or "" for m in sent)
    position = 0
    for stored in history[:-2]:
        position = sent_text.index(stored["content"], position)
    if session == S1:
        assert [m["role"] for m in sent] == [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
        ]
    else:
        assert "session_recall with summary_message_id=19" in sent[1]["content"]
    assert history[-2:] == [
        {"role": "user", "content": "and what now?"},
        {"role": "assistant", "content": f"answer {OUR_WORD}"},
    ]
    assert hermes_fts(home / "state.db", OUR_WORD)


@pytest.mark.parametrize("home", ["v25-cjk"], indirect=True)
def test_an_agent_on_a_read_only_hermes_file_says_how_to_write(home):
    from hermes_context import AIAgent

    model = FunctionModel(lambda messages, tools: "never asked")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(StoreError, match="read-only.*--from-hermes"):
            AIAgent(chat_model=model, hermes_home=home, session_id=S1, use_llm_summary=False)
    assert model.calls == []


@pytest.mark.parametrize("home", ["v25"], indirect=True)
def test_a_rotation_in_a_hermes_file_keeps_titles_unique(home):
    with SessionDB(home / "state.db") as db:
        first = db.create_session(title="Payment refactor")
        second = db.create_session(title="Payment refactor #2")
    with SessionDB(home / "state.db") as db:
        titles = {db.get_session(s)["title"] for s in (first, second)}
    assert titles == {"Payment refactor #3", "Payment refactor #4"}
    conn = sqlite3.connect(home / "state.db")
    assert conn.execute("SELECT count(DISTINCT title) = count(title) FROM sessions").fetchone()
    conn.close()


_plain = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant"]), "content": st.text(max_size=20)}
)
_calling = st.fixed_dictionaries(
    {
        "role": st.just("assistant"),
        "content": st.none(),
        "tool_calls": st.just([{"id": "c", "type": "function", "function": {"name": "f"}}]),
    }
)


@given(st.lists(st.one_of(_plain, _calling), max_size=12))
def test_runs_of_one_role_are_joined_on_the_wire_losing_no_text(messages):
    original = copy.deepcopy(messages)
    joined = wire.joined_runs(messages)
    assert messages == original  # the stored conversation is not touched
    for a, b in itertools.pairwise(joined):
        assert not (
            a["role"] == b["role"]
            and isinstance(a["content"], str)
            and isinstance(b["content"], str)
        )
    assert [m["role"] for m in joined if m.get("tool_calls")] == [
        m["role"] for m in messages if m.get("tool_calls")
    ]
    texts = "\n\n".join(m["content"] for m in messages if isinstance(m["content"], str))
    assert "\n\n".join(m["content"] for m in joined if isinstance(m["content"], str)) == texts


# What later Hermes schemas (up to 30) add, in kind: columns with and without
# defaults, a table, a trigger that writes back into the row just inserted.
NEWER_HERMES = """
ALTER TABLE sessions ADD COLUMN title_source TEXT;
ALTER TABLE sessions ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN _compressed_summary INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN display_order INTEGER;
CREATE TABLE session_turn_leases (conversation_id TEXT PRIMARY KEY, holder TEXT NOT NULL);
CREATE TRIGGER messages_display_order_insert AFTER INSERT ON messages
WHEN new.display_order IS NULL
BEGIN
    UPDATE messages SET display_order = new.id WHERE id = new.id;
END;
UPDATE schema_version SET version = 30;
UPDATE messages SET content = 'Earlier: parts 0-5 done.', _compressed_summary = 1 WHERE id = 19;
"""


@pytest.mark.parametrize("home", ["v25"], indirect=True)
def test_a_newer_hermes_schema_is_read_by_its_columns_not_its_number(home):
    path = home / "state.db"
    conn = sqlite3.connect(path)
    conn.executescript(NEWER_HERMES)
    conn.close()
    journal = header_journal_bytes(path)
    with SessionDB(path) as db:
        [summary] = db.get_message_records(S4)[:1]
        assert summary["is_summary"]  # flagged by its column, whatever its text
        assert len(db.recall(S4, summary["id"])) == 12
        [ours] = db.append_messages(S4, [{"role": "user", "content": OUR_WORD}])
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT display_order FROM messages WHERE id = ?", (ours,)).fetchone() == (
        ours,
    )
    with conn:
        conn.execute(
            "INSERT INTO messages (session_id, role, content, timestamp, _compressed_summary, "
            f"display_order) VALUES ('{S4}', 'user', '{HERMES_WORD}', 1.0, 0, NULL)"
        )
    conn.close()
    assert hermes_fts(path, OUR_WORD) == [ours] and hermes_fts(path, HERMES_WORD)
    assert header_journal_bytes(path) == journal and integrity(path) == "ok"
