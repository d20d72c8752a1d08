"""Full-text search: CJK bigrams, stemming, literal user text, raw mode, tool output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_context.sessions import SearchQueryError, hits
from hermes_context.sessions.fts import quote_query, raw_query, search_text_for, segment_cjk

TRAJECTORIES = Path(__file__).parents[2] / "shared/data/trajectories"


@pytest.mark.parametrize(
    ("text", "segmented"),
    [
        ("plain english", "plain english"),
        ("数据库", " 数据 据库 "),
        ("库", " 库 "),
        ("abc中文def", "abc 中文 def"),
        ("中文，日本語", " 中文 ， 日本 本語 "),
        ("データベース", " デー ータ タベ ベー ース "),
        ("데이터베이스를 사용", " 데이 이터 터베 베이 이스 스를   사용 "),
    ],
)
def test_segment_cjk(text, segmented):
    assert segment_cjk(text) == segmented


@pytest.mark.parametrize(
    ("query", "expression"),
    [
        ("hello world", '"hello" "world"'),
        ("foo NOT bar", '"foo" "NOT" "bar"'),
        ("a OR b", '"a" "OR" "b"'),
        ('say "hi"', '"say" """hi"""'),
        ("col:value", '"col:value"'),
        ("prefix*", '"prefix*"'),
        ("NEAR(a b)", '"NEAR(a" "b)"'),
        ("数据库", '"数据 据库"'),
        ("库", '"库"*'),
        ("-- ** ::", None),
        ("", None),
    ],
)
def test_quote_query(query, expression):
    assert quote_query(query) == expression


def test_quote_query_any_term():
    assert quote_query("red green", any_term=True) == '"red" OR "green"'


@pytest.mark.parametrize(
    ("raw", "prepared"),
    [
        ("sqlite OR postgres", "sqlite OR postgres"),
        ('"数据库 迁移" OR cache', '" 数据 据库   迁移 " OR cache'),
        ("数据库 NOT cache", '"数据 据库" NOT cache'),
    ],
)
def test_raw_query(raw, prepared):
    assert raw_query(raw) == prepared


def test_search_text_only_stored_when_it_differs():
    assert search_text_for({"role": "user", "content": "plain"}) is None
    assert search_text_for({"role": "user", "content": "中文"}) == " 中文 "
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "grep", "arguments": '{"pattern": "needle\\u4e2d\\u6587"}'},
    }
    assert (
        search_text_for({"role": "assistant", "content": "", "tool_calls": [call]})
        == "grep needle 中文 "
    )
    parts = [{"type": "text", "text": "part one"}, {"type": "image_url", "image_url": {"url": "u"}}]
    assert search_text_for({"role": "user", "content": parts}) == "part one"


CJK_CORPUS = [
    "我们需要修复数据库迁移的问题",  # Chinese
    "昨日は東京で会議がありました",  # Japanese (kanji + kana)
    "データベースの移行に失敗しました",  # Katakana word
    "데이터베이스 마이그레이션이 실패했습니다",  # Korean
    "The quick brown fox jumps over the lazy dog",
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("数据", 0),  # two-character words: missed by a trigram index
        ("迁移", 0),
        ("数据库迁移", 0),
        ("东京", None),  # simplified form is another character: no match
        ("東京", 1),
        ("会議", 1),
        ("データ", 2),
        ("移行", 2),
        ("실패", 3),
        ("데이터", 3),
        ("jumping", 4),  # porter stemming
        ("foxes", 4),
        ("QUICK", 4),
    ],
)
def test_search_finds_cjk_words_and_stems_english(session_db, query, expected):
    sid = session_db.create_session()
    ids = session_db.append_messages(sid, [{"role": "user", "content": t} for t in CJK_CORPUS])
    found = [h["message_id"] for h in session_db.search(query, limit=10)]
    assert found == ([] if expected is None else [ids[expected]])


def test_all_words_first_then_any_word(session_db):
    sid = session_db.create_session()
    both, one = session_db.append_messages(
        sid, [{"role": "user", "content": "alpha beta"}, {"role": "user", "content": "alpha only"}]
    )
    assert [h["message_id"] for h in session_db.search("alpha beta", limit=5)] == [both]
    # No message has all three words: fall back to any word, best ranked first.
    assert [h["message_id"] for h in session_db.search("alpha beta gamma", limit=5)] == [both, one]


def test_operators_in_user_text_are_literal(session_db):
    sid = session_db.create_session()
    session_db.append_messages(
        sid,
        [
            {"role": "user", "content": "cats and dogs"},
            {"role": "user", "content": "cats NOT dogs, said the sign"},
        ],
    )
    hits = session_db.search("cats NOT dogs", limit=5)
    assert [h["snippet"] for h in hits] == ["cats NOT dogs, said the sign"]
    assert session_db.search('"unbalanced', limit=5) == []
    assert session_db.search("*", limit=5) == []


def test_raw_mode_allows_fts_syntax(session_db):
    sid = session_db.create_session()
    a, b = session_db.append_messages(
        sid,
        [{"role": "user", "content": "cats and dogs"}, {"role": "user", "content": "only cats"}],
    )
    assert [h["message_id"] for h in session_db.search("cats NOT dogs", raw=True)] == [b]
    assert {h["message_id"] for h in session_db.search("cat* OR nothing", raw=True)} == {a, b}


@pytest.mark.parametrize("bad", ["foo AND", '"open', "col:value", "(a OR", "NEAR(a b"])
def test_malformed_raw_query_is_a_clear_error(session_db, bad):
    session_db.append_messages(session_db.create_session(), [{"role": "user", "content": "x"}])
    with pytest.raises(SearchQueryError) as info:
        session_db.search(bad, raw=True)
    assert str(info.value).startswith(f"invalid search query {bad!r}: ")
    assert info.value.query == bad


def test_tool_output_and_arguments_are_searchable(session_db):
    sid = session_db.create_session()
    call = {
        "id": "c1",
        "type": "function",
        "function": {
            "name": "bash",
            "arguments": json.dumps({"command": "grep -rn frobnicate src/"}),
        },
    }
    ids = session_db.append_messages(
        sid,
        [
            {"role": "assistant", "content": "Looking.", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "src/x.py:3: ZeroDivisionError in widget"},
        ],
    )  # fmt: skip
    [hit] = session_db.search("frobnicate")
    assert hit["message_id"] == ids[0]
    assert "grep -rn frobnicate src/" in hit["snippet"]
    [hit] = session_db.search("ZeroDivisionError")
    assert (hit["message_id"], hit["role"], hit["tool_name"]) == (ids[1], "tool", "bash")


def test_snippet_is_centred_on_the_match(session_db):
    sid = session_db.create_session()
    text = "lorem ipsum " * 50 + "the NEEDLE is here " + "dolor sit " * 50
    session_db.append_messages(sid, [{"role": "user", "content": text}])
    [hit] = session_db.search("needle")
    assert hit["snippet"].startswith("…") and hit["snippet"].endswith("…")
    assert "the NEEDLE is here" in hit["snippet"]
    assert len(hit["snippet"]) <= 202


def test_search_scoped_by_user(session_db):
    session_db.create_session("a", user_id="alice")
    session_db.create_session("b", user_id="bob")
    session_db.append_messages("a", [{"role": "user", "content": "secret plan alice"}])
    session_db.append_messages("b", [{"role": "user", "content": "secret plan bob"}])
    assert [h["session_id"] for h in session_db.search("secret", user_id="alice", limit=10)] == [
        "a"
    ]
    assert [h["session_id"] for h in session_db.search("secret", user_id="bob", limit=10)] == ["b"]
    assert session_db.search("secret", user_id="carol") == []
    assert {h["session_id"] for h in session_db.search("secret", limit=10)} == {"a", "b"}


@pytest.mark.parametrize("pool", [50, 299, 300, 500])
def test_user_filter_reaches_past_the_first_pool(session_db, monkeypatch, pool):
    monkeypatch.setattr(hits, "CANDIDATE_POOL", pool)
    session_db.create_session("mine", user_id="alice")
    session_db.append_messages(
        "mine", [{"role": "user", "content": "a zebra among many other words here"}]
    )
    # Many newer, better-ranked hits of another user must not hide this user's one hit.
    session_db.create_session("noise", user_id="bob")
    session_db.append_messages("noise", [{"role": "user", "content": "zebra zebra zebra"}] * 300)
    assert [h["session_id"] for h in session_db.search("zebra", user_id="alice")] == ["mine"]
    assert [h["session_id"] for h in session_db.search("zebra", limit=2)] == ["noise", "noise"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Failing tests", ["fail", "test"]),
        ("parser/load_call.py", ["parser", "load_call", "py"]),
        ("数据库 NOT x", ["数据", "x"]),
        ("abc中文", ["中文"]),
        ("stations", ["station"]),
    ],
)
def test_needles(query, expected):
    assert hits.needles(query) == expected


def test_ranking_is_by_relevance_not_age(session_db):
    sid = session_db.create_session()
    strong, weak = session_db.append_messages(
        sid,
        [
            {"role": "user", "content": "gecko gecko gecko"},
            {"role": "user", "content": "one gecko in a long sentence about many other things"},
        ],
    )
    assert [h["message_id"] for h in session_db.search("gecko", limit=2)] == [strong, weak]
    assert (
        session_db.search("gecko", limit=2)[0]["score"]
        > session_db.search("gecko", limit=2)[1]["score"]
    )


def test_rebuild_index_keeps_search_working(session_db):
    sid = session_db.create_session()
    session_db.append_messages(sid, [{"role": "user", "content": "数据库 wombat"}])
    assert session_db.rebuild_search_index() == 1
    assert len(session_db.search("数据")) == 1 and len(session_db.search("wombat")) == 1


def _trajectories():
    files = sorted(TRAJECTORIES.glob("*.messages.json"))
    if not files:
        pytest.skip(f"no agent transcripts in {TRAJECTORIES}")
    return {f.name.split(".")[0]: json.loads(f.read_text(encoding="utf-8")) for f in files}


def test_real_transcripts_ingest_round_trip_and_search(session_db):
    transcripts = _trajectories()
    sessions = {
        name: session_db.import_session(msgs, title=name) for name, msgs in transcripts.items()
    }
    for name, sid in sessions.items():
        assert session_db.get_messages(sid) == transcripts[name]
    django = sessions["django__django-14752"]
    # Words only in tool output (file listings, source dumps) are found.
    tool_hits = [
        h for h in session_db.search("test_autocomplete_widget", limit=10) if h["role"] == "tool"
    ]
    assert tool_hits and all(h["session_id"] == django for h in tool_hits)
    # Words only in tool-call arguments are found too.
    arg_hits = session_db.search("serialize_result", limit=10)
    assert {h["session_id"] for h in arg_hits} == {django}
    sqlfluff = sessions["sqlfluff__sqlfluff-2419"]
    assert {h["session_id"] for h in session_db.search("sqlfluff", limit=10)} == {sqlfluff}


def test_nul_in_a_literal_query_separates_words(session_db):
    session_db.create_session("s")
    (hit,) = session_db.append_messages("s", [{"role": "user", "content": "alpha then beta"}])
    assert quote_query("alpha\x00beta") == '"alpha" "beta"'
    assert [h["message_id"] for h in session_db.search("alpha\x00beta")] == [hit]
    assert [h["message_id"] for h in session_db.search("\x00")] == []


EXAMPLE_SESSION = Path(__file__).parents[1] / "examples/agent_session.json"


def _mentions(message, word):
    texts = [message.get("content") or ""]
    texts += [c["function"]["arguments"] for c in message.get("tool_calls") or ()]
    return any(word in t for t in texts)


def test_words_after_an_escaped_newline_in_json_tool_output_are_found(session_db):
    messages = json.loads(EXAMPLE_SESSION.read_text(encoding="utf-8"))
    sid = session_db.import_session(messages)
    ids = [r["id"] for r in session_db.get_message_records(sid)]
    expected = {ids[i] for i, m in enumerate(messages) if _mentions(m, "KeyError")}
    assert len(expected) == 8
    assert {h["message_id"] for h in session_db.search("KeyError", limit=50)} == expected
    # The escape no longer glues an "n" to the word after it.
    assert session_db.search("nKeyError", limit=50) == []
    # The stored content is untouched: still the JSON text, escapes and all.
    assert session_db.get_messages(sid) == messages


def test_json_tool_result_and_arguments_are_indexed_decoded(session_db):
    output = json.dumps({"output": "Traceback:\n  boom\nKeyError: 'user_id'", "exit_code": 1})
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": "cd app\nmake wombat"})},
    }
    messages = [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]
    session_db.create_session("s")
    call_id, result_id = session_db.append_messages("s", messages)
    assert search_text_for(messages[1]) == "Traceback:\n  boom\nKeyError: 'user_id'\n1"
    assert search_text_for(messages[0]) == "bash cd app\nmake wombat"
    [hit] = session_db.search("KeyError")
    assert (hit["message_id"], hit["snippet"]) == (
        result_id,
        "Traceback: boom KeyError: 'user_id' 1",
    )
    assert [h["message_id"] for h in session_db.search("wombat")] == [call_id]
    assert session_db.search("nmake") == [] and session_db.search("nKeyError") == []
    assert session_db.get_messages("s") == messages


@pytest.mark.parametrize(
    "content",
    [
        '{"output": "not closed',  # invalid JSON stays plain text
        "[" * 1_500 + "]" * 1_500 + " quagga",  # too deep to decode: plain text
        '"just a JSON string quagga"',  # not an object or array: plain text
    ],
)
def test_tool_output_that_is_not_decodable_json_is_indexed_as_text(content):
    message = {"role": "tool", "tool_call_id": "c", "content": content}
    assert search_text_for(message) is None


@pytest.mark.parametrize(
    ("stored", "query"),
    [
        ("ｆｕｌｌｗｉｄｔｈ letters", "fullwidth"),
        ("plain fullwidth letters", "ｆｕｌｌｗｉｄｔｈ"),
        ("the ﬁle was moved", "file"),  # ligature
        ("ﾃﾞｰﾀﾍﾞｰｽ half-width katakana", "データベース"),
    ],
)
def test_text_and_queries_are_nfkc_folded(session_db, stored, query):
    session_db.create_session("s")
    [mid] = session_db.append_messages("s", [{"role": "user", "content": stored}])
    [hit] = session_db.search(query)
    assert (hit["message_id"], hit["snippet"]) == (mid, stored)
    assert [h["message_id"] for h in session_db.search(query, raw=True)] == [mid]
    assert session_db.get_messages("s") == [{"role": "user", "content": stored}]


def test_snippet_centres_on_a_folded_match():
    text = "ｘ" * 300 + " the ＮＥＥＤＬＥ is here " + "y" * 300
    snippet = hits.make_snippet(text, ["needle"])
    assert "the ＮＥＥＤＬＥ is here" in snippet and snippet.startswith("…")


@pytest.mark.parametrize("raw", [False, True])
@pytest.mark.parametrize("query", ["\ud800", "fine \udcff", "\ud83d\ude00"])
def test_queries_with_lone_surrogates_do_not_raise(session_db, query, raw):
    session_db.create_session("s")
    [mid] = session_db.append_messages("s", [{"role": "user", "content": "fine words"}])
    found = [h["message_id"] for h in session_db.search(query, raw=raw)]
    assert found == ([mid] if "fine" in query else [])
