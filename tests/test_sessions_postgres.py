"""PostgresSessionStore: what only the PostgreSQL store has (the rest runs in every session test)."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_context import ConfigError, StoreError
from hermes_context.sessions import SessionStore
from hermes_context.sessions.postgres import POSTGRES_SCHEMA_VERSION, PostgresSessionStore
from hermes_context.sessions.postgres import store as pg_store
from hermes_context.sessions.postgres.search import RawQuery, index_words, literal_query


@pytest.fixture
def pg(postgres_url):
    store = PostgresSessionStore(postgres_url, max_size=4)
    yield store
    store.close()


def _versions(store):
    return store._read(
        lambda c: c.execute(
            "SELECT version FROM hc_schema_versions WHERE component = 'sessions'"
        ).fetchall()
    )


def test_it_is_a_session_store(pg):
    assert isinstance(pg, SessionStore)


def test_migrations_are_idempotent_on_a_second_open(postgres_url, pg):
    sid = pg.create_session(title="kept")
    pg.append_messages(sid, [{"role": "user", "content": "still here"}])
    with PostgresSessionStore(postgres_url) as again:
        assert _versions(again) == [(POSTGRES_SCHEMA_VERSION,)]
        assert again.get_messages(sid) == [{"role": "user", "content": "still here"}]


def test_two_stores_on_one_schema_see_each_others_writes(postgres_url, pg):
    with PostgresSessionStore(postgres_url) as other:
        sid = pg.create_session(title="shared")
        other.append_messages(sid, [{"role": "user", "content": "written by the other replica"}])
        assert pg.get_messages(sid)[0]["content"] == "written by the other replica"
        assert [h["session_id"] for h in pg.search("replica")] == [sid]
        assert other.create_session(title="shared") != sid
        assert {s["title"] for s in pg.list_sessions()} == {"shared", "shared #2"}


def test_concurrent_appends_from_threads_lose_nothing(pg):
    sid = pg.create_session()
    threads, per_thread, errors = 6, 15, []

    def work(n):
        try:
            for i in range(per_thread):
                pg.append_messages(sid, [{"role": "user", "content": f"t{n} m{i}"}])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    records = pg.get_message_records(sid)
    assert len(records) == threads * per_thread == pg.get_session(sid)["message_count"]
    ids = [r["id"] for r in records]
    assert ids == sorted(ids)  # ids increase in commit order, as positions do
    for n in range(threads):
        mine = [
            r["message"]["content"]
            for r in records
            if r["message"]["content"][1:].startswith(f"{n} ")
        ]
        assert mine == [f"t{n} m{i}" for i in range(per_thread)]


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://root:s3cret-pw@127.0.0.1:1/test",
        "postgresql://root:s3cret-pw@127.0.0.1:5432/no_such_database_here",
        "host=127.0.0.1 port=1 password=s3cret-pw dbname=test",
    ],
)
def test_a_bad_url_is_a_one_line_store_error_without_the_password(url):
    with pytest.raises(StoreError) as info:
        PostgresSessionStore(url)
    text = str(info.value)
    assert "\n" not in text
    assert "s3cret-pw" not in text
    assert "check that the server is running" in text


def test_without_psycopg_the_error_says_what_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_psycopg(name, *args, **kwargs):
        if name.startswith("psycopg"):
            raise ImportError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_psycopg)
    with pytest.raises(ConfigError, match=r'pip install "hermes-context\[postgres\]"'):
        pg_store.PostgresSessionStore("postgresql://127.0.0.1/test")


def test_cjk_and_words_inside_json_tool_output_are_found(pg):
    sid = pg.create_session()
    zh, tool = pg.append_messages(
        sid,
        [
            {"role": "user", "content": "我们讨论了数据库迁移的问题"},
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": '{"output": "trace\\nKeyError: \'slug\'", "code": 1}',
            },
        ],
    )
    assert [h["message_id"] for h in pg.search("数据库")] == [zh]
    assert [h["message_id"] for h in pg.search("迁移")] == [zh]
    assert [h["message_id"] for h in pg.search("库")] == [zh]  # one character: by prefix
    assert [h["message_id"] for h in pg.search("KeyError")] == [tool]
    assert [h["message_id"] for h in pg.search("slug")] == [tool]


def test_user_operators_are_literal(pg):
    sid = pg.create_session()
    (mid,) = pg.append_messages(sid, [{"role": "user", "content": "cats & dogs | birds !fish"}])
    assert [h["message_id"] for h in pg.search("!fish & <-> cats:*")] == [mid]
    assert pg.search("'") == []


def test_unsupported_methods_say_so(pg):
    with pytest.raises(StoreError, match="not supported on the PostgreSQL store yet"):
        pg.use_semantic(lambda texts, query: None)
    with pytest.raises(StoreError, match="not supported on the PostgreSQL store yet"):
        pg.import_from("/tmp")
    assert pg.semantic_backlog() == 0


def test_a_closed_store_says_so(postgres_url):
    store = PostgresSessionStore(postgres_url)
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.list_sessions()


def test_index_words_split_as_unicode61_does():
    assert (
        index_words("src/billing/Load_Call.py café ｆｕｌｌ")
        == "src billing load call py cafe full"
    )


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("cats NOT dogs", "(cats & !dogs)"),
        ("cat* OR nothing", "(cat:* | nothing)"),
        ('"load call" AND (a OR b)', "((load <-> call) & (a | b))"),
        ("数据库", "(数据 <-> 据库)"),
    ],
)
def test_raw_queries_read_as_fts5(query, expected):
    assert RawQuery(query).parse() == expected


words = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


@given(query=words)
def test_literal_queries_are_only_words_and_operators(query):
    expr = literal_query(query)
    if expr is not None:
        stripped = expr.replace("<->", " ").replace(":*", " ")
        assert not set(stripped) & set("!'\\:()") - set("()")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    contents=st.lists(st.text(max_size=40), min_size=1, max_size=6),
    start=st.integers(min_value=0, max_value=5),
)
def test_prepend_then_append_keeps_every_message_in_order(pg, contents, start):
    sid = pg.create_session()
    messages = [{"role": "user", "content": c} for c in contents]
    cut = min(start, len(messages))
    pg.append_messages(sid, messages[cut:])
    pg.prepend_messages(sid, messages[:cut])
    assert pg.get_messages(sid) == messages


def test_a_schema_a_newer_version_wrote_is_refused(postgres_url, pg):
    pg._write(
        lambda c: c.execute(
            "UPDATE hc_schema_versions SET version = 99 WHERE component = 'sessions'"
        )
    )
    with pytest.raises(StoreError, match="sessions schema is version 99, newer than this"):
        PostgresSessionStore(postgres_url)


def test_writes_to_one_session_wait_for_each_other_and_not_for_other_sessions(postgres_url, pg):
    import psycopg

    from hermes_context.sessions.postgres import schema

    first, second = pg.create_session(title="held"), pg.create_session(title="free")
    holder = psycopg.connect(postgres_url)  # another replica, mid-write to ``first``
    try:
        holder.execute(schema.SESSION_LOCK, (schema.LOCK_NAMESPACE, first))
        done = threading.Event()

        def append_first():
            pg.append_messages(first, [{"role": "user", "content": "after the holder"}])
            done.set()

        waiting = threading.Thread(target=append_first)
        waiting.start()
        # Another session's append, and a new session (the store-wide lock), go on meanwhile.
        pg.append_messages(second, [{"role": "user", "content": "side by side"}])
        third = pg.create_session(title="new")
        assert not done.wait(0.5)  # ``first`` waits for the holder
        holder.commit()
        assert done.wait(10)
        waiting.join()
    finally:
        holder.close()
    assert [m["content"] for m in pg.get_messages(first)] == ["after the holder"]
    assert [m["content"] for m in pg.get_messages(second)] == ["side by side"]
    assert pg.get_session(third)["title"] == "new"


def test_concurrent_appends_to_many_sessions_keep_each_sessions_order(postgres_url, pg):
    with PostgresSessionStore(postgres_url, max_size=4) as other:  # a second replica
        sessions = [pg.create_session() for _ in range(4)]
        errors = []

        def work(store, sid, n):
            try:
                for i in range(12):
                    store.append_messages(sid, [{"role": "user", "content": f"w{n} m{i}"}])
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        workers = [
            threading.Thread(target=work, args=(store, sid, n))
            for n, (store, sid) in enumerate(
                (store, sid) for sid in sessions for store in (pg, other)
            )
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert errors == []
    for k, sid in enumerate(sessions):
        records = pg.get_message_records(sid)
        assert len(records) == 24 == pg.get_session(sid)["message_count"]
        ids = [r["id"] for r in records]
        assert ids == sorted(ids) and len(set(ids)) == 24  # one session: ids in its order
        for n in (2 * k, 2 * k + 1):
            mine = [
                r["message"]["content"]
                for r in records
                if r["message"]["content"].startswith(f"w{n} ")
            ]
            assert mine == [f"w{n} m{i}" for i in range(12)]
