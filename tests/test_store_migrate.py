"""``store migrate``: a home to PostgreSQL and back, idempotent, refusing conflicts, verified."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_context import CompressionResult, Config, MemoryStore, StoreConflictError
from hermes_context.bridge import store_migration
from hermes_context.bridge.store_migration import check_store_url, migrate_store
from hermes_context.bridge.tokens import TokenStore
from hermes_context.bridge.views import user_home
from hermes_context.cli.main import cli
from hermes_context.memory.backing import FileBacking
from hermes_context.memory.transfer import read_snapshot
from hermes_context.sessions import PostgresSessionStore, SessionDB

pytestmark = pytest.mark.sqlite_only


def _call(cid, name, args):
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


BEFORE = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the flaky quokka test."},
    {"role": "assistant", "content": "Running tests.", "tool_calls": [_call("c1", "bash", "{}")]},
    {"role": "tool", "tool_call_id": "c1", "content": "FAILED test_quokka - AssertionError"},
    {"role": "assistant", "content": "Found it in wombat.py."},
    {"role": "user", "content": "Great, go on."},
]
SUMMARY = {
    "role": "user",
    "content": "[CONTEXT SUMMARY] quokka test fixed",
    "_compressed_summary": True,
}
CJK = [
    {"role": "user", "content": "数据库的连接池配置在哪里？"},
    {"role": "assistant", "content": "", "tool_calls": [_call("k1", "grep", '{"q": "连接池"}')]},
    {"role": "tool", "tool_call_id": "k1", "content": "config/数据库.yaml: pool_size: 8"},
    {"role": "assistant", "content": "在 config/数据库.yaml 里。", "_ms": 12},
]
QUERIES = ("quokka", "连接池", "wombat", "pool_size", "数据库")


def _compacted(db):
    sid = db.create_session("s-main", title="quokka", user_id="alice", model="m")
    db.append_messages(sid, BEFORE)
    result = CompressionResult(
        messages=[BEFORE[0], SUMMARY, BEFORE[5]],
        tokens_before=90,
        tokens_after=20,
        dropped=4,
        summary=SUMMARY["content"],
        lineage=[[0], [1, 2, 3, 4], [5]],
        compressor_state={"compression_count": 1, "cooldown_until": 1.9e9},
    )
    db.persist_compression(sid, BEFORE, result)
    live = db.get_messages(sid)
    rotated = dataclasses.replace(result, messages=[SUMMARY], lineage=[list(range(len(live)))])
    return sid, db.persist_compression(sid, live, rotated, in_place=False)


def _memory(base, words):
    store = MemoryStore(base / "memories", memory_char_limit=120)
    store.add("memory", f"{words}: the build runs on Python 3.12", origin="user")
    store.add("user", f"{words} prefers short answers, 简洁", origin="user")
    store.add("memory", f"{words}: " + "x" * 100, origin="user")  # over the limit: archived
    store.pending.stage(
        kind="add",
        target="memory",
        operations=[{"action": "add", "content": f"{words} staged"}],
        origin="agent",
        session_id=None,
    )


@pytest.fixture
def home(tmp_path):
    """A real-looking home: compacted and rotated sessions, CJK, memories, users and tokens."""
    home = tmp_path / "home"
    with SessionDB(home / "state.db") as db:
        _compacted(db)
        cjk = db.create_session("s-cjk", title="数据库", user_id="bob", source="bridge")
        db.append_messages(cjk, CJK)
        db.save_compressor_state(cjk, {"compression_count": 0})
        db.end_session(cjk, "user_exit")
    _memory(home, "home")
    config = Config(hermes_home=home)
    for user in ("alice", "bob"):
        _memory(user_home(config, user), user)
    tokens = TokenStore(home)
    home.joinpath("tokens.txt").write_text(tokens.add("alice")[1] + "\n" + tokens.add("bob")[1])
    return home


def _url(path):
    return f"sqlite://{path / 'state.db'}"


def _backings(home):
    config = Config(hermes_home=home)
    out = {"": FileBacking(home / "memories", home / "pending" / "memory")}
    for user in ("alice", "bob"):
        base = user_home(config, user)
        out[user] = FileBacking(base / "memories", base / "pending" / "memory")
    return out


def _hits(store, query):
    return [(h["session_id"], h["message_id"]) for h in store.search(query, limit=10)]


def test_round_trip_keeps_sessions_memory_and_tokens(home, tmp_path, postgres_url):
    there = migrate_store(_url(home), postgres_url)
    assert there.ok and there.sessions.copied == 3 and there.sessions.present == 0
    assert there.memory_scopes.copied == 3 and there.tokens.copied == 2
    back_home = tmp_path / "back"
    back = migrate_store(postgres_url, _url(back_home))
    assert back.ok and back.to_dict()["messages"] == there.to_dict()["messages"]
    with SessionDB(home / "state.db") as a, PostgresSessionStore(postgres_url) as pg:
        with SessionDB(back_home / "state.db") as b:
            for sid in a.session_ids():
                assert a.export_session(sid).digest() == b.export_session(sid).digest()
                assert a.get_messages(sid) == pg.get_messages(sid) == b.get_messages(sid)
            child = [s for s in b.session_ids() if s.startswith("2")][0]
            assert b.get_session(child)["parent_session_id"] == "s-main"
            summary = next(r for r in b.get_message_records("s-main") if r["is_summary"])
            assert b.recall("s-main", summary["id"]) == a.recall("s-main", summary["id"])
            assert pg.recall("s-main", summary["id"]) == BEFORE[1:5]
            assert b.get_compressor_state("s-main") == a.get_compressor_state("s-main")
            for query in QUERIES:
                assert _hits(a, query) == _hits(pg, query) == _hits(b, query), query
    for scope, backing in _backings(home).items():
        assert read_snapshot(backing) == read_snapshot(_backings(back_home)[scope]), scope
    token = home.joinpath("tokens.txt").read_text().splitlines()[0]
    assert TokenStore(back_home).user_for(token) == "alice"


def test_second_run_copies_nothing(home, postgres_url):
    first = migrate_store(_url(home), postgres_url)
    again = migrate_store(_url(home), postgres_url)
    assert again.ok
    for name, tally in again.counts().items():
        assert tally.copied == 0, name
        assert tally.present == first.counts()[name].copied, name


def test_a_changed_session_is_a_conflict(home, postgres_url):
    migrate_store(_url(home), postgres_url)
    with PostgresSessionStore(postgres_url) as pg:
        pg.append_messages("s-cjk", [{"role": "user", "content": "one more"}])
        with pytest.raises(StoreConflictError, match="s-cjk") as caught:
            migrate_store(_url(home), postgres_url)
        assert caught.value.what == "session 's-cjk'"
        assert len(pg.get_messages("s-cjk")) == len(CJK) + 1  # not overwritten


def test_other_notes_are_a_conflict_unless_merged(home, tmp_path):
    other = tmp_path / "other"
    MemoryStore(other / "memories").add("memory", "the other home's note", origin="user")
    with pytest.raises(StoreConflictError, match="home's memory"):
        migrate_store(_url(home), _url(other))
    merged = migrate_store(_url(home), _url(other), merge=True)
    assert merged.ok and merged.merged_scopes == [""]
    entries = MemoryStore(other / "memories").entries("memory")
    assert entries[0] == "the other home's note"
    assert set(MemoryStore(home / "memories").entries("memory")) < set(entries)
    assert migrate_store(_url(home), _url(other), merge=True).memory_entries.copied == 0


def test_an_interrupted_run_is_finished_by_the_next(home, postgres_url, monkeypatch):
    real = PostgresSessionStore.restore_session
    calls = []

    def dies_on_the_second(self, copy):
        calls.append(copy.session_id)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, copy)

    monkeypatch.setattr(PostgresSessionStore, "restore_session", dies_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        migrate_store(_url(home), postgres_url)
    with PostgresSessionStore(postgres_url) as pg:
        assert pg.session_ids() == calls[:1]  # the first whole, nothing of the second
    monkeypatch.setattr(PostgresSessionStore, "restore_session", real)
    report = migrate_store(_url(home), postgres_url)
    assert report.ok and (report.sessions.copied, report.sessions.present) == (2, 1)


def test_a_lossy_copy_fails_verification(home, postgres_url, monkeypatch):
    real = PostgresSessionStore.restore_session

    def drops_a_message(self, copy):
        if copy.session_id == "s-cjk":  # no summary there: a row can go without a trace
            copy = dataclasses.replace(copy, messages=copy.messages[:-1])
        return real(self, copy)

    monkeypatch.setattr(PostgresSessionStore, "restore_session", drops_a_message)
    result = CliRunner().invoke(
        cli, ["store", "migrate", "--from", _url(home), "--to", postgres_url]
    )
    assert result.exit_code == 9
    assert "session 's-cjk'" in result.stderr


def _migrate(*args):
    return CliRunner().invoke(cli, ["store", "migrate", *args])


def test_cli_json_counts_and_exit_codes(home, postgres_url):
    dry = _migrate("--from", _url(home), "--to", postgres_url, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.stdout)["sessions"] == {"copied": 3, "present": 0}
    result = _migrate("--from", _url(home), "--to", postgres_url, "--json")
    data = json.loads(result.stdout)
    assert result.exit_code == 0 and data["verified"] is True
    assert data["sessions"] == {"copied": 3, "present": 0}
    assert data["tokens"] == {"copied": 2, "present": 0}
    # the originals, the summary in place, the summary the rotation opened with
    assert data["messages"]["copied"] == len(BEFORE) + 1 + 1 + len(CJK)
    again = _migrate("--from", _url(home), "--to", postgres_url)
    assert again.exit_code == 0
    assert "sessions         copied 0, already there 3" in again.stdout
    assert again.stdout.rstrip().splitlines()[-1].startswith("verified:")
    with PostgresSessionStore(postgres_url) as pg:
        pg.append_messages("s-main", [{"role": "user", "content": "changed"}])
    conflict = _migrate("--from", _url(home), "--to", postgres_url, "--json")
    assert conflict.exit_code == 8
    assert json.loads(conflict.stdout)["error"]["type"] == "conflict"


def test_a_dry_run_writes_nothing(home, tmp_path):
    report = migrate_store(_url(home), _url(tmp_path / "new"), dry_run=True)
    assert report.sessions.copied == 3 and report.memory_scopes.copied == 3
    with SessionDB(tmp_path / "new" / "state.db") as db:
        assert db.session_ids() == []
    assert not (tmp_path / "new" / "memories").exists()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://h/db", "accepted schemes: sqlite:///, postgresql://, postgres://"),
        ("sqlite://relative/state.db", "accepted schemes"),
        ("sqlite:///", "absolute path"),
        ("http://u:hunter2@h/db", "accepted schemes"),
    ],
)
def test_bad_urls_are_usage_errors(url, says, home):
    result = _migrate("--from", url, "--to", _url(home))
    assert result.exit_code == 2
    assert says in result.output
    assert "hunter2" not in result.output
    with pytest.raises(ValueError, match="accepted schemes|absolute"):
        check_store_url(url)


def test_the_same_store_twice_is_refused(home):
    result = _migrate("--from", _url(home), "--to", _url(home))
    assert result.exit_code == 2 and "same store" in result.output


def test_passwords_are_never_printed(home):
    result = _migrate("--from", _url(home), "--to", "postgresql://me:s3cret@127.0.0.1:1/none")
    assert result.exit_code == 6
    assert "s3cret" not in result.output and "***" in result.output


def test_user_folders_nobody_names_are_reported(home, tmp_path):
    stray = home / "users" / "ghost-0123456789"
    MemoryStore(stray / "memories").add("memory", "a ghost's note", origin="user")
    report = migrate_store(_url(home), _url(tmp_path / "copy"))
    assert report.unmatched == [str(stray)]


MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "tool", "system"]),
        "content": st.one_of(st.none(), st.text(max_size=40)),
    },
    optional={
        "tool_call_id": st.text(max_size=8),
        "_meta": st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5)),
    },
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(messages=st.lists(MESSAGE, max_size=8))
def test_any_messages_survive_the_round_trip(messages, tmp_path, postgres_url):
    # One home for every example: its message ids keep growing, as one home's do.
    first, last = tmp_path / "a", tmp_path / "b"
    with SessionDB(first / "state.db") as db:
        sid = db.create_session()
        db.append_messages(sid, messages)
    assert migrate_store(_url(first), postgres_url).ok
    assert migrate_store(postgres_url, _url(last)).ok
    with SessionDB(last / "state.db") as db:
        assert db.get_messages(sid) == messages


def test_progress_counts_every_session(home, tmp_path):
    seen = []
    migrate_store(
        _url(home), _url(tmp_path / "c"), progress=lambda done, total: seen.append((done, total))
    )
    assert seen == [(1, 3), (2, 3), (3, 3)]


def test_store_migration_names_its_schemes():
    assert store_migration.ACCEPTED_SCHEMES[0] == "sqlite:///"
