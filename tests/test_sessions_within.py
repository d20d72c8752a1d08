"""Search narrowed to sources and a time range (``Within``), and paging with ``offset``."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_context.memory import e5
from hermes_context.sessions import SessionDB, Within

DAY = 86_400.0
T0 = 1_780_000_000.0


def _store(db: SessionDB, sources_days: list[tuple[str, float]], text: str = "flaky socket"):
    ids = []
    for i, (source, day) in enumerate(sources_days):
        sid = db.create_session(source=source)
        db.append_messages(
            sid,
            [
                {"role": "user", "content": f"why is the {text} test failing ({i})?", "timestamp": T0 + day * DAY},
                {"role": "assistant", "content": f"the {text} closes early ({i})", "timestamp": T0 + day * DAY + 1},
            ],
        )  # fmt: skip
        ids.append(sid)
    return ids


def _roots(found: dict) -> list[str]:
    key = "results" if found["mode"] == "discover" else "sessions"
    return [g.get("root_session_id") or g.get("session_id") for g in found[key]]


def test_sources_keep_only_those_agents_sessions(session_db):
    cli, claude, codex = _store(session_db, [("cli", 0), ("claude-code", 1), ("codex", 2)])
    found = session_db.session_search(
        query="socket", limit=10, within=Within(frozenset({"codex", "claude-code"}))
    )
    assert set(_roots(found)) == {claude, codex}
    hits = session_db.search("socket", limit=10, within=Within(frozenset({"cli"})))
    assert {h["session_id"] for h in hits} == {cli}
    browse = session_db.session_search(limit=10, within=Within(frozenset({"cli"})))
    assert _roots(browse) == [cli]


def test_time_range_is_since_inclusive_until_exclusive(session_db):
    first, second, third = _store(session_db, [("cli", 0), ("cli", 1), ("cli", 2)])
    since = T0 + DAY  # the second session's first message, exactly
    found = session_db.session_search(query="socket", limit=10, within=Within(since=since))
    assert set(_roots(found)) == {second, third}
    found = session_db.session_search(query="socket", limit=10, within=Within(until=since))
    assert set(_roots(found)) == {first}
    found = session_db.session_search(
        query="socket", limit=10, within=Within(since=since, until=since + 1)
    )
    assert _roots(found) == [second]
    browse = session_db.session_search(limit=10, within=Within(until=T0 + 3 * DAY))
    assert browse["sessions"] == []  # browse ranges on when sessions started: all today


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(count=st.integers(1, 14), page=st.integers(1, 10))
def test_pages_partition_the_single_call_ranking(tmp_path_factory, count, page):
    with SessionDB(tmp_path_factory.mktemp("paging") / "state.db") as db:
        _store(db, [("cli", i) for i in range(count)])
        wanted = min(count, 10)
        for query in ("socket", None):
            whole = _roots(db.session_search(query=query, limit=10))
            assert len(whole) == wanted
            pages: list[str] = []
            offset = 0
            while offset < wanted:
                pages += _roots(db.session_search(query=query, limit=page, offset=offset))
                offset += page
            assert pages[:wanted] == whole
            assert len(set(pages)) == len(pages)  # no conversation twice


def test_offset_is_bounded(session_db):
    with pytest.raises(ValueError, match="offset must be an integer"):
        session_db.session_search(query="x", offset="2")
    assert session_db.session_search(query="socket", offset=10_000)["results"] == []


@pytest.mark.sqlite_only
@pytest.mark.skipif(not e5.available(), reason='needs pip install "hermes-context[semantic]"')
def test_the_semantic_half_respects_the_filters_too(session_db):
    cli, codex = _store(session_db, [("cli", 0), ("codex", 1)], text="websocket handshake")
    session_db.use_semantic(e5.embed)
    assert session_db.index_semantic() == 4
    # Shares no word with the stored text: only the semantic half can find it.
    query = "connection negotiation problem"
    found = session_db.session_search(query=query, limit=10, within=Within(frozenset({"codex"})))
    assert _roots(found) == [codex]
    found = session_db.session_search(query=query, limit=10, within=Within(until=T0 + DAY))
    assert _roots(found) == [cli]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"since": "2026-11-30"}, Within(since=1_795_996_800.0)),
        ({"since": "2026-11-30T02:00+02:00"}, Within(since=1_795_996_800.0)),
        ({"until": "2026-11-30T00:00:00Z"}, Within(until=1_795_996_800.0)),
        ({"sources": "codex"}, Within(frozenset({"codex"}))),
        ({"sources": [" codex", "cli"]}, Within(frozenset({"codex", "cli"}))),
        ({}, None),
        ({"sources": []}, None),
    ],
)
def test_within_parse_reads_what_people_and_models_write(args, expected):
    assert Within.parse(**args) == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"since": "last tuesday"}, "since 'last tuesday' is not an ISO 8601"),
        ({"until": 1_795_996_800}, "until must be an ISO 8601"),
        ({"since": "2026-12-01", "until": "2026-11-30"}, "until must be later than since"),
        ({"sources": [1]}, "source must be agent names"),
        ({"sources": {"codex": 1}}, "source must be agent names"),
    ],
)
def test_within_parse_says_what_is_wrong(args, message):
    with pytest.raises(ValueError, match=message):
        Within.parse(**args)


@pytest.mark.sqlite_only
def test_sessions_search_command_takes_the_filters(session_db, hermes_home):
    from click.testing import CliRunner

    from hermes_context.cli.main import cli

    cli_id, codex = _store(session_db, [("cli", 0), ("codex", 1)])
    runner = CliRunner()
    home = ["--home", str(hermes_home), "--json"]
    out = runner.invoke(cli, ["sessions", "search", "socket", "--source", "codex", *home])
    assert out.exit_code == 0, out.output
    assert {h["session_id"] for h in json.loads(out.output)} == {codex}
    out = runner.invoke(cli, ["sessions", "search", "socket", "--until", "2026-05-29", *home])
    assert {h["session_id"] for h in json.loads(out.output)} == {cli_id}
    out = runner.invoke(
        cli, ["sessions", "search", "socket", "--since", "soon", "--home", str(hermes_home)]
    )
    assert out.exit_code == 2 and "since 'soon' is not an ISO 8601" in out.output


@pytest.mark.sqlite_only
def test_a_time_no_date_can_show_is_shown_as_none_not_an_error(session_db, hermes_home):
    # Another program may write any number into the timestamp column.
    sid = session_db.create_session()
    session_db.append_messages(sid, [{"role": "user", "content": "odd clock", "timestamp": 1e17}])
    with sqlite3.connect(hermes_home / "state.db") as conn:
        conn.execute("UPDATE sessions SET started_at = 1e17")
    conn.close()
    (entry,) = session_db.session_search()["sessions"]
    assert entry["started_at"] is None
    hit = session_db.session_search(query="clock")["results"][0]["hits"][0]
    assert hit["time"] is None
    from click.testing import CliRunner

    from hermes_context.cli.main import cli

    out = CliRunner().invoke(cli, ["sessions", "list", "--home", str(hermes_home)])
    assert out.exit_code == 0 and "?" in out.output
