"""``sessions import --from claude-code|codex|openai-jsonl``, on real transcripts.

The files under ``tests/data/imports`` were written by other projects (see
each ``.source.txt``); nothing here edits them. Expected counts are computed
in this file from the raw lines, by rules simpler than the importer's.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_context import SessionDB, validate_messages
from hermes_context.cli.main import cli
from hermes_context.sessions import foreign

# Foreign transcripts are imported into SQLite stores only (PostgreSQL: not yet).
pytestmark = pytest.mark.sqlite_only

DATA = Path(__file__).parent / "data" / "imports"
CLAUDE = {p.name: p for p in sorted((DATA / "claude-code").glob("*.jsonl"))}
CODEX = {p.name: p for p in sorted((DATA / "codex").glob("*.jsonl"))}
MAIN = CLAUDE["fasthooks-main-transcript.jsonl"]
MAIN_ID = "claude-code:c45af7b1-cb7c-4e51-93db-8cbb250a877a"
ROLLOUT = CODEX["rollout-agent-history-compaction.jsonl"]
ROLLOUT_ID = "codex:compact-codex-001"
# Sessions per file: the main conversation, and one per sidechain agent.
SESSIONS_PER_FILE = {
    "agent-sessions-small.jsonl": 2,
    "claude-code-transcripts-sample.jsonl": 1,
    "fasthooks-agent-sidechain.jsonl": 1,
    "fasthooks-main-transcript.jsonl": 1,
    "rollout-agent-history-compaction.jsonl": 1,
    "rollout-agent-history-golden.jsonl": 1,
    "rollout-agent-sessions-large.jsonl": 1,
    "rollout-agent-sessions-small.jsonl": 1,
}
# The real transcripts whose every tool call is answered in order: counted independently.
WELL_FORMED = [
    ("claude-code", "fasthooks-main-transcript.jsonl"),
    ("claude-code", "fasthooks-agent-sidechain.jsonl"),
    ("claude-code", "claude-code-transcripts-sample.jsonl"),
    ("codex", "rollout-agent-history-compaction.jsonl"),
    ("codex", "rollout-agent-history-golden.jsonl"),
]
_SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture
def run(hermes_home, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    runner = CliRunner()

    def invoke(*args):
        return runner.invoke(cli, ["sessions", *args], catch_exceptions=False)

    return invoke


def _path(fmt, name):
    return (CLAUDE if fmt == "claude-code" else CODEX)[name]


def _lines(path):
    return [json.loads(raw) for raw in path.read_bytes().split(b"\n") if raw.strip()]


def _epoch(text):
    return datetime.fromisoformat(text).timestamp()


# -- counts computed from the raw lines ------------------------------------------


def _claude_expected(path):
    """Messages and compactions per conversation: each user text line, each tool result,
    each run of assistant lines (one reply split over lines), each compaction summary."""
    counts = {}
    previous = {}
    for obj in _lines(path):
        if obj.get("type") not in ("user", "assistant", "system"):
            continue
        who = (obj.get("isSidechain") is True, obj.get("agentId"))
        messages, compactions = counts.get(who, (0, 0))
        if obj["type"] == "system":
            if obj.get("subtype") == "compact_boundary":
                previous[who] = "boundary"
            continue
        content = obj["message"]["content"]
        if obj.get("isCompactSummary"):
            compactions += 1
        elif obj["type"] == "assistant":
            messages += previous.get(who) != "assistant"
        else:
            blocks = content if isinstance(content, list) else [content]
            results = [b for b in blocks if isinstance(b, dict) and b["type"] == "tool_result"]
            messages += len(results) + (len(results) < len(blocks))
        previous[who] = obj["type"] if obj.get("isCompactSummary") is not True else "summary"
        if obj["type"] == "user" and not obj.get("isCompactSummary"):
            previous[who] = "user"
        counts[who] = (messages, compactions)
    return counts


def _codex_expected(path):
    """Messages and compactions: each user/developer message, each call output, each run
    of assistant items (text and calls, reasoning in between), each ``compacted`` line."""
    messages = compactions = 0
    in_reply = False
    for obj in _lines(path):
        payload = obj.get("payload", {})
        if obj["type"] == "compacted":
            compactions += 1
            in_reply = False
        if obj["type"] != "response_item" or payload["type"] == "reasoning":
            continue
        is_reply = payload["type"] == "function_call" or payload.get("role") == "assistant"
        messages += is_reply and not in_reply
        messages += not is_reply
        in_reply = is_reply
    return {(False, None): (messages, compactions)}


@pytest.mark.parametrize(("fmt", "name"), WELL_FORMED)
def test_counts_match_the_raw_lines(session_db, fmt, name):
    path = _path(fmt, name)
    expected = (_claude_expected if fmt == "claude-code" else _codex_expected)(path)
    parsed = foreign.parse_file(path, fmt)
    report = session_db.import_foreign(parsed)
    assert len(parsed.sessions) == len(expected) == SESSIONS_PER_FILE[name]
    assert report.messages == sum(m for m, _ in expected.values())
    assert report.compactions == sum(c for _, c in expected.values())
    for session in parsed.sessions:
        rows = session_db.get_message_records(session.key, include_compacted=True)
        summaries = [r for r in rows if r["is_summary"]]
        assert len(rows) - len(summaries) == len(session.messages)
        assert len(summaries) == len(session.compactions)
    assert not parsed.skipped


@pytest.mark.parametrize("name", sorted(SESSIONS_PER_FILE))
def test_sessions_per_file_and_every_history_is_valid(session_db, name):
    fmt = "claude-code" if name in CLAUDE else "codex"
    parsed = foreign.parse_file(_path(fmt, name), fmt)
    report = session_db.import_foreign(parsed)
    assert len(report.added) == SESSIONS_PER_FILE[name] and not parsed.skipped
    for sid in report.added:
        stored = session_db.get_messages(sid)
        validate_messages(stored, allow_consecutive_roles=True)
        session = session_db.get_session(sid)
        assert session["source"] == fmt and session["message_count"] == len(stored)


# -- what each session keeps --------------------------------------------------------


def _session_row(hermes_home, sid):
    conn = sqlite3.connect(hermes_home / "state.db")
    try:
        return conn.execute(
            "SELECT source, cwd, git_branch, started_at, title, model FROM sessions WHERE id = ?",
            (sid,),
        ).fetchone()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("fmt", "name", "sid", "row"),
    [
        ("claude-code", "fasthooks-main-transcript.jsonl", MAIN_ID,
         ("claude-code", "/workspace", None, "2026-01-02T19:18:31.028+00:00",
          "can you run a command ls -la", "claude-haiku-4-5-20251001")),
        ("claude-code", "claude-code-transcripts-sample.jsonl", "claude-code:test-session-id",
         ("claude-code", "/project", "main", "2025-12-24T10:00:00+00:00",
          "Test session for JSONL parsing", None)),
        ("claude-code", "agent-sessions-small.jsonl", "claude-code:ses_stage0_small",
         ("claude-code", "/tmp", "main", None, "Stage0 small fixture", "claude-opus-5")),
        ("codex", "rollout-agent-history-compaction.jsonl", ROLLOUT_ID,
         ("codex", "/home/testuser/codex-compact-project", "feature/api",
          "2025-10-28T04:00:00+00:00", "Help me build the API endpoints", "gpt-4.5-turbo")),
    ],
)  # fmt: skip
def test_source_project_branch_start_and_title(run, hermes_home, fmt, name, sid, row):
    assert run("import", "--from", fmt, str(_path(fmt, name))).exit_code == 0
    source, cwd, branch, started, title, model = _session_row(hermes_home, sid)
    assert (source, cwd, branch, title, model) == row[:3] + row[4:]
    if row[3] is not None:
        assert started == _epoch(row[3])


def test_messages_keep_their_own_times(session_db):
    session_db.import_foreign(foreign.parse_file(MAIN, "claude-code"))
    records = session_db.get_message_records(MAIN_ID, include_compacted=True)
    first = records[0]
    assert first["message"]["content"] == "can you run a command ls -la "
    assert first["timestamp"] == _epoch("2026-01-02T19:18:31.028+00:00")
    assert first["message"]["_timestamp"] == first["timestamp"]
    times = [r["timestamp"] for r in records if not r["is_summary"]]
    assert times[:27] == sorted(times[:27])


def test_tool_calls_become_openai_tool_messages(session_db):
    session_db.import_foreign(foreign.parse_file(MAIN, "claude-code"))
    originals = session_db.get_messages(MAIN_ID, include_compacted=True)
    several = next(m for m in originals if len(m.get("tool_calls", [])) == 3)
    assert [c["function"]["name"] for c in several["tool_calls"]] == ["Read", "Bash", "Bash"]
    assert json.loads(several["tool_calls"][1]["function"]["arguments"])["command"]
    assert several["_reasoning"]  # thinking is kept as metadata, not as content
    at = originals.index(several)
    answers = originals[at + 1 : at + 4]
    assert [a["tool_call_id"] for a in answers] == [c["id"] for c in several["tool_calls"]]
    assert "command not found" in answers[1]["content"]


# -- search -----------------------------------------------------------------------------


def _openai_export(run, tmp_path):
    """A real session exported as OpenAI JSONL: the openai-jsonl format's sample."""
    run("import", "--from", "codex", str(ROLLOUT))
    path = tmp_path / "exported.jsonl"
    assert run("export", ROLLOUT_ID, "--all", "-o", str(path)).exit_code == 0
    return path


@pytest.mark.parametrize(
    ("fmt", "file", "phrase", "sid_prefix"),
    [
        ("claude-code", MAIN, "Generated numbers", MAIN_ID),
        ("codex", ROLLOUT, "Blueprint", ROLLOUT_ID),
        ("openai-jsonl", None, "Blueprint", "openai-jsonl:exported-"),
    ],
)
def test_search_finds_text_inside_a_tool_result(
    run, session_db, tmp_path, fmt, file, phrase, sid_prefix
):
    path = file or _openai_export(run, tmp_path)
    assert run("import", "--from", fmt, str(path)).exit_code == 0
    hits = [
        h for h in session_db.search(phrase, limit=10) if h["session_id"].startswith(sid_prefix)
    ]
    assert "tool" in {h["role"] for h in hits}
    out = json.loads(run("search", phrase, "--json", "--limit", "20").output)
    assert any(h["session_id"].startswith(sid_prefix) and h["role"] == "tool" for h in out)


# -- idempotency -------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "path"), [("claude-code", MAIN), ("codex", ROLLOUT)])
def test_import_again_adds_nothing(run, fmt, path):
    first = json.loads(run("import", "--from", fmt, str(path), "--json").output)
    again = json.loads(run("import", "--from", fmt, str(path), "--json").output)
    assert first["sessions_added"] == 1 and first["messages_added"] > 0
    assert (again["sessions_added"], again["sessions_unchanged"], again["messages_added"]) == (
        0, 1, 0,
    )  # fmt: skip
    assert again["files_read"] == 0  # unchanged since: not even read


@pytest.mark.parametrize(("fmt", "path", "cut"), [("claude-code", MAIN, 24), ("codex", ROLLOUT, 9)])
def test_appended_lines_add_only_themselves(run, session_db, tmp_path, fmt, path, cut):
    lines = path.read_bytes().split(b"\n")
    grown = tmp_path / path.name
    grown.write_bytes(b"\n".join(lines[:cut]) + b"\n")
    first = json.loads(run("import", "--from", fmt, str(grown), "--json").output)
    grown.write_bytes(path.read_bytes())
    later = json.loads(run("import", "--from", fmt, str(grown), "--json").output)
    assert (later["sessions_added"], later["sessions_extended"]) == (0, 1)
    whole = foreign.parse_file(path, fmt)
    assert first["messages_added"] + later["messages_added"] == len(whole.sessions[0].messages)
    sid = whole.sessions[0].key
    with SessionDB(tmp_path / "direct" / "state.db") as direct:
        direct.import_foreign(whole)
        expected = direct.get_messages(sid, include_compacted=True)
    assert session_db.get_messages(sid, include_compacted=True) == expected


@pytest.mark.parametrize("name", sorted(SESSIONS_PER_FILE))
def test_a_file_read_while_it_is_written_ends_as_if_read_whole(tmp_path, name):
    fmt = "claude-code" if name in CLAUDE else "codex"
    data = _path(fmt, name).read_bytes()
    whole = foreign.parse_bytes(data, fmt, path=name)
    with SessionDB(tmp_path / "grown.db") as grown, SessionDB(tmp_path / "whole.db") as direct:
        for size in range(0, len(data), max(1, len(data) // 25)):  # cuts mid-line too
            grown.import_foreign(foreign.parse_bytes(data[:size], fmt, path=name, final=False))
        grown.import_foreign(whole)
        direct.import_foreign(whole)
        for session in whole.sessions:
            stored = grown.get_messages(session.key, include_compacted=True)
            assert stored == direct.get_messages(session.key, include_compacted=True)
            assert grown.get_session(session.key)["title"] == session.title


def test_a_touched_file_without_new_lines_is_unchanged(run):
    copy = Path(tempfile.mkdtemp()) / MAIN.name
    copy.write_bytes(MAIN.read_bytes())
    run("import", "--from", "claude-code", str(copy))
    with copy.open("ab") as fh:
        fh.write(b'{"type":"file-history-snapshot","messageId":"x","snapshot":{}}\n')
    again = json.loads(run("import", "--from", "claude-code", str(copy), "--json").output)
    assert (again["files_read"], again["sessions_unchanged"], again["messages_added"]) == (1, 1, 0)


# -- damaged lines ------------------------------------------------------------------------


def test_a_truncated_last_line_is_reported_and_the_rest_imported(run, session_db, tmp_path):
    data = MAIN.read_bytes()
    lines = data.split(b"\n")[:-1]
    damaged = tmp_path / "killed.jsonl"
    damaged.write_bytes(b"\n".join(lines[:-1]) + b"\n" + lines[-1][: len(lines[-1]) // 2])
    result = run("import", "--from", "claude-code", str(damaged), "--json")
    assert result.exit_code == 0
    assert f"warning: {damaged}:{len(lines)}: truncated last line" in result.stderr
    report = json.loads(result.stdout)
    assert report["lines_skipped"] == 1
    assert report["skipped_lines"][0]["line"] == len(lines)
    expected = foreign.parse_bytes(b"\n".join(lines[:-1]) + b"\n", "claude-code", path="x")
    assert report["messages_added"] == len(expected.sessions[0].messages)


def test_a_bad_line_inside_is_reported_with_its_number(run, session_db, tmp_path):
    lines = ROLLOUT.read_bytes().split(b"\n")
    bad = tmp_path / "rollout-bad.jsonl"
    bad.write_bytes(b"\n".join([*lines[:4], b'{"type": "response_item", "payload": ', *lines[4:]]))
    result = run("import", "--from", "codex", str(bad))
    assert result.exit_code == 0
    warning = [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")]
    assert warning == [
        f"warning: {bad}:5: invalid JSON (Expecting value: line 1 column 37 (char 36)); skipped"
    ]
    assert "1 line skipped" in result.stdout
    assert len(session_db.get_messages(ROLLOUT_ID, include_compacted=True)) == 12 + 1


def test_one_file_is_one_transaction(session_db, monkeypatch):
    parsed = foreign.parse_file(MAIN, "claude-code")
    from hermes_context.sessions import foreign_sync

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(foreign_sync, "_save_state", broken)
    with pytest.raises(RuntimeError):
        session_db.import_foreign(parsed)
    assert session_db.get_session(MAIN_ID) is None
    assert session_db.search("Generated numbers") == []


# -- compaction ------------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "path", "sid", "before"), [
    ("claude-code", MAIN, MAIN_ID, 27),
    ("codex", ROLLOUT, ROLLOUT_ID, 8),
])  # fmt: skip
def test_a_compaction_boundary_becomes_a_summary_that_recalls_its_originals(
    session_db, fmt, path, sid, before
):
    parsed = foreign.parse_file(path, fmt)
    session_db.import_foreign(parsed)
    live = session_db.get_message_records(sid)
    summary = live[0]
    assert (
        summary["is_summary"]
        and summary["message"]["content"] == parsed.sessions[0].compactions[0].summary
    )
    assert session_db.recall(sid, summary["id"]) == parsed.sessions[0].messages[:before]
    assert [r["message"] for r in live[1:]] == parsed.sessions[0].messages[before:]
    [compaction] = session_db.list_compactions(sid)
    assert compaction["mode"] == "in_place"
    run_recall = CliRunner().invoke(cli, ["sessions", "recall", sid, str(summary["id"]), "--json"])
    assert len(json.loads(run_recall.output)) == before


def test_two_compactions_recall_deep_down_to_the_originals(session_db):
    path = CODEX["rollout-agent-sessions-small.jsonl"]
    parsed = foreign.parse_file(path, "codex")
    session_db.import_foreign(parsed)
    sid = parsed.sessions[0].key
    assert len(session_db.list_compactions(sid)) == len(parsed.sessions[0].compactions) == 6
    last_summary = next(r for r in session_db.get_message_records(sid) if r["is_summary"])
    deep = session_db.recall(sid, last_summary["id"], deep=True)
    last_at = parsed.sessions[0].compactions[-1].at
    assert deep == parsed.sessions[0].messages[:last_at]


# -- history validity, on generated Claude Code transcripts -------------------------------

_IDS = st.sampled_from(["toolu_a", "toolu_b", "toolu_c", None])
_EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["user", "text", "thinking", "tool_use", "tool_result", "boundary",
                         "summary", "meta", "bad"]),
        _IDS,
        st.booleans(),  # a sidechain line
    ),
    max_size=30,
)  # fmt: skip


def _claude_lines(events):
    out = []
    for i, (kind, call_id, side) in enumerate(events):
        base = {"sessionId": "gen", "isSidechain": side, "timestamp": f"2026-01-01T00:00:{i:02d}Z"}
        if side:
            base["agentId"] = "helper"
        if kind == "bad":
            out.append(b'{"type": "user", "message": ')
            continue
        if kind in ("boundary",):
            line = {**base, "type": "system", "subtype": "compact_boundary"}
        elif kind in ("user", "summary", "meta"):
            line = {**base, "type": "user", "message": {"role": "user", "content": f"{kind} {i}"}}
            line["isCompactSummary"] = kind == "summary"
            line["isMeta"] = kind == "meta"
        elif kind == "tool_result":
            block = {"type": "tool_result", "content": [{"type": "text", "text": f"out {i}"}]}
            if call_id:
                block["tool_use_id"] = call_id
            line = {**base, "type": "user", "message": {"role": "user", "content": [block]}}
        else:
            block = {"text": {"type": "text", "text": f"say {i}"},
                     "thinking": {"type": "thinking", "thinking": f"hmm {i}"},
                     "tool_use": {"type": "tool_use", "name": "Bash", "input": {"n": i}}}[kind]  # fmt: skip
            if kind == "tool_use" and call_id:
                block["id"] = call_id
            line = {
                **base,
                "type": "assistant",
                "message": {"role": "assistant", "content": [block]},
            }
        out.append(json.dumps(line).encode())
    return out


def _parse(lines, *, final=True):
    return foreign.parse_bytes(
        b"".join(ln + b"\n" for ln in lines), "claude-code", path="gen.jsonl", final=final
    )


@_SETTINGS
@given(_EVENTS)
def test_any_transcript_gives_valid_histories(events):
    parsed = _parse(_claude_lines(events))
    for session in parsed.sessions:
        validate_messages(session.messages, allow_consecutive_roles=True)
        ats = [c.at for c in session.compactions]
        assert ats == sorted(ats) and all(at <= session.stable for at in ats)
        assert session.stable <= len(session.messages)
        ids = [c["id"] for m in session.messages for c in m.get("tool_calls", [])]
        assert len(ids) == len(set(ids))
    assert len(parsed.skipped) == sum(kind == "bad" for kind, _, _ in events)


@_SETTINGS
@given(_EVENTS)
def test_what_is_stable_never_changes_as_the_file_grows(events):
    lines = _claude_lines(events)
    full = {s.key: s for s in _parse(lines).sessions}
    for cut in range(len(lines) + 1):
        for early in _parse(lines[:cut], final=False).sessions:
            late = full[early.key]
            assert late.messages[: early.stable] == early.messages[: early.stable]
            assert late.compactions[: len(early.compactions)] == early.compactions
            assert all(c.at >= early.stable for c in late.compactions[len(early.compactions) :])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_EVENTS, st.integers(0, 30))
def test_importing_a_growing_file_stores_what_importing_it_whole_does(events, cut):
    lines = _claude_lines(events)
    with tempfile.TemporaryDirectory() as tmp:
        with SessionDB(Path(tmp) / "grown.db") as grown, SessionDB(Path(tmp) / "whole.db") as whole:
            grown.import_foreign(_parse(lines[:cut], final=False))
            grown.import_foreign(_parse(lines))
            whole.import_foreign(_parse(lines))
            for session in _parse(lines).sessions:
                stored = grown.get_messages(session.key, include_compacted=True)
                assert stored == whole.get_messages(session.key, include_compacted=True)
                validate_messages(grown.get_messages(session.key), allow_consecutive_roles=True)


# -- openai-jsonl -------------------------------------------------------------------------------


def test_openai_jsonl_one_message_per_line_round_trips_an_export(run, session_db, tmp_path):
    path = _openai_export(run, tmp_path)
    result = json.loads(run("import", "--from", "openai-jsonl", str(path), "--json").output)
    assert (result["sessions_added"], result["messages_added"]) == (1, 13)
    [session] = [s for s in session_db.list_sessions() if s["source"] == "openai-jsonl"]
    # The codex session it was exported from holds the title already.
    assert session["title"] == "Help me build the API endpoints #2"
    stored = session_db.get_messages(session["id"])
    exported = [json.loads(ln) for ln in path.read_text().splitlines()]
    assert [(m["role"], m.get("content")) for m in stored] == [
        (m["role"], m.get("content")) for m in exported
    ]


def test_openai_jsonl_one_conversation_per_line(run, session_db, tmp_path):
    path = tmp_path / "chats.jsonl"
    chats = [
        {"title": "first", "messages": [{"role": "user", "content": "hello"}]},
        {
            "messages": [
                {"role": "user", "content": "second chat"},
                {"role": "assistant", "content": "ok"},
            ]
        },
    ]
    path.write_text("".join(json.dumps(c) + "\n" for c in chats) + '{"role": "user"}\n')
    result = run("import", "--from", "openai-jsonl", str(path), "--json")
    report = json.loads(result.stdout)
    counts = [report[k] for k in ("sessions_added", "messages_added", "lines_skipped")]
    assert counts == [2, 3, 1]
    titles = sorted(s["title"] for s in session_db.list_sessions())
    assert titles == ["first", "second chat"]


# -- other formats, scoping and errors ---------------------------------------------------------


def test_from_hermes_is_the_same_as_from_hermes_option(run, tmp_path):
    with SessionDB(tmp_path / "other" / "state.db") as other:
        other.create_session("h1", title="elsewhere")
        other.append_messages("h1", [{"role": "user", "content": "hi"}])
    report = json.loads(run("import", "--from", "hermes", str(tmp_path / "other"), "--json").output)
    assert (report["sessions_added"], report["messages_added"]) == (1, 1)
    again = json.loads(run("import", "--from-hermes", str(tmp_path / "other"), "--json").output)
    assert again["sessions_unchanged"] == 1


def test_user_and_home_scope_the_import(run, tmp_path):
    home = ["--home", str(tmp_path / "elsewhere")]
    first = run("import", "--from", "claude-code", str(MAIN), "--user", "ann", *home, "--json")
    assert json.loads(first.output)["sessions_added"] == 1
    listed = json.loads(run("list", "--user", "ann", *home, "--json").output)
    assert [s["id"] for s in listed] == [MAIN_ID]
    assert json.loads(run("list", "--json").output) == []  # the default home got nothing
    copy = tmp_path / "grown" / MAIN.name
    copy.parent.mkdir()
    copy.write_bytes(
        MAIN.read_bytes() + b'{"type":"user","message":{"role":"user","content":"more"}}\n'
    )
    other = run("import", "--from", "claude-code", str(copy), "--user", "bob", *home, "--json")
    report = json.loads(other.stdout)
    assert report["sessions_diverged"] == [
        {"session_id": MAIN_ID, "reason": "it belongs to another user"}
    ]
    assert f"session {MAIN_ID}: left as it is: it belongs to another user" in other.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--from", "aider", "x"], 2, "error: unknown format 'aider' for --from: use one of claude-code, codex, openai-jsonl, hermes\n"),
        (["--from", "codex", "/no/such/place"], 2, "error: /no/such/place: no such file or folder; pass the codex transcripts to import (a .jsonl file or the folder holding them)\n"),
        (["--from", "openai-jsonl"], 2, "error: --from openai-jsonl needs the FILE to read\n"),
        (["--from", "hermes"], 2, "error: --from hermes needs the PATH of a Hermes home (or its state.db)\n"),
        (["--from", "codex", "--title", "x"], 2, "error: --title and --source are for a message FILE, not --from\n"),
        (["--watch"], 2, "error: --watch needs --from FORMAT (a transcript that grows)\n"),
    ],
)  # fmt: skip
def test_errors_are_one_line_with_an_exit_code(run, args, code, message):
    result = run("import", *args)
    assert (result.exit_code, result.output) == (code, message)


def _unreadable(monkeypatch, name):
    """Reading ``name`` fails as a file without read permission does (even for root)."""
    real = foreign.parse_file

    def parse(path, fmt, *, final=True):
        if path.name == name:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, fmt, final=final)

    monkeypatch.setattr(foreign, "parse_file", parse)


def test_an_unreadable_file_is_one_line_and_exit_6(run, tmp_path, monkeypatch):
    path = tmp_path / "secret.jsonl"
    path.write_bytes(MAIN.read_bytes())
    _unreadable(monkeypatch, path.name)
    result = run("import", "--from", "claude-code", str(path))
    assert (result.exit_code, result.output) == (
        6,
        f"error: {path}: cannot read it: permission denied\n",
    )


def test_an_unreadable_file_among_many_is_reported_and_the_rest_imported(
    run, tmp_path, monkeypatch
):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(MAIN.read_bytes())
    (folder / "b.jsonl").write_bytes(b"{}\n")
    _unreadable(monkeypatch, "b.jsonl")
    result = run("import", "--from", "claude-code", str(folder))
    assert result.exit_code == 6
    assert f"error: {folder / 'b.jsonl'}: cannot read it: permission denied\n" in result.stderr
    assert "sessions: 1 added" in result.stdout


# -- --watch ------------------------------------------------------------------------------------


def _wait_for(check, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def test_watch_picks_up_appended_lines_and_stops_on_ctrl_c(hermes_home, tmp_path):
    lines = MAIN.read_bytes().split(b"\n")
    path = tmp_path / "live.jsonl"
    path.write_bytes(b"\n".join(lines[:10]) + b"\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "hermes_context.cli.main", "sessions", "import", "--from",
         "claude-code", str(path), "--watch", "--interval", "0.05"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:

        def stored():
            if not (hermes_home / "state.db").exists():
                return 0
            with SessionDB(hermes_home / "state.db") as db:
                found = db.get_session(MAIN_ID)
                return len(db.get_messages(MAIN_ID, include_compacted=True)) if found else 0

        assert _wait_for(lambda: stored() == 5)
        half = len(lines[20]) // 2
        with path.open("ab") as fh:  # a line being written: not an error, retried
            fh.write(b"\n".join(lines[10:20]) + b"\n" + lines[20][:half])
        assert _wait_for(lambda: stored() == 10)
        with path.open("ab") as fh:
            fh.write(lines[20][half:] + b"\n")
        assert _wait_for(lambda: stored() == 11)
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "warning" not in err and "stopped" in err
    assert out.startswith(f"imported claude-code transcripts from {path}: 1 file")
    assert "sessions: 1 added, 0 extended, 0 unchanged; 11 messages" in out


def test_watch_with_a_bounded_number_of_polls(run, tmp_path):
    path = tmp_path / "live.jsonl"
    lines = ROLLOUT.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[:5]) + b"\n" + lines[5][:40])  # mid-line
    result = run(
        "import",
        "--from",
        "codex",
        str(path),
        "--watch",
        "--interval",
        "0.01",
        "--max-polls",
        "2",
        "--json",
    )
    assert result.exit_code == 0 and "warning" not in result.stderr
    assert json.loads(result.stdout)["lines_skipped"] == 0


def test_an_early_codex_rollout_without_wrappers(session_db, tmp_path):
    # Written for this test from the early-2025 format (no real file of it was found):
    # a first line of session metadata without a type, then bare response items.
    lines = [
        {"id": "0195aa00-0000-7000-8000-000000000001", "timestamp": "2025-04-20T10:00:00Z"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "ls"}]},
        {"type": "function_call", "name": "shell", "arguments": '{"command": ["ls"]}',
         "call_id": "call_1"},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.txt\n"},
        {"type": "message", "role": "assistant",
         "content": [{"type": "output_text", "text": "One file."}]},
    ]  # fmt: skip
    path = tmp_path / "rollout-2025-04-20T10-00-00-0195aa00-0000-7000-8000-000000000001.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    [session] = foreign.parse_file(path, "codex").sessions
    assert session.key == "codex:0195aa00-0000-7000-8000-000000000001"
    assert [m["role"] for m in session.messages] == ["user", "assistant", "tool", "assistant"]
    assert session.messages[2] == {
        "role": "tool", "tool_call_id": "call_1", "content": "a.txt\n",
        "_timestamp": _epoch("2025-04-20T10:00:00+00:00"),
    }  # fmt: skip


# -- shapes no agent writes (found by a review) ----------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1_733_000_000, 1_733_000_000.0),  # seconds
        (1_733_000_000_000, 1_733_000_000.0),  # milliseconds
        (1_733_000_000_000_000, 1_733_000_000.0),  # microseconds
        (1_733_000_000_000_000_000, 1_733_000_000.0),  # nanoseconds
        (1e23, None),
        (10**400, None),
        ("0001-01-01T00:00:00+05:00", None),
        ("9999-12-31T23:00:00-05:00", None),
        ("2024-11-30T21:33:20Z", 1_733_002_400.0),
    ],
)
def test_times_no_date_can_show_are_no_time(value, expected):
    assert foreign.parse_time(value) == expected


def test_an_impossible_time_never_breaks_listing_or_searching(tmp_path, run, hermes_home):
    path = tmp_path / "odd.jsonl"
    lines = [
        {"role": "user", "content": "why does the ledger drift?", "timestamp": 1e23},
        {"role": "assistant", "content": "rounding in the ledger", "timestamp": "0001-01-01T00:00:00+05:00"},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    assert run("import", "--from", "openai-jsonl", str(path)).exit_code == 0
    listed = run("list")
    assert listed.exit_code == 0 and "openai-jsonl" in listed.output
    with SessionDB(hermes_home / "state.db") as db:
        assert db.session_search()["sessions"]  # browse shows it
        assert db.session_search(query="ledger")["results"]


def test_lines_of_shapes_no_agent_writes_are_skipped_and_the_folder_imported(tmp_path, run):
    folder = tmp_path / "chats"
    folder.mkdir()
    good = {"role": "user", "content": "the cache key collides"}
    (folder / "a.jsonl").write_text(json.dumps(good) + "\n", encoding="utf-8")
    odd = {"role": "assistant", "content": "x", "tool_calls": 5}
    (folder / "b.jsonl").write_text(
        json.dumps(good) + "\n" + json.dumps(odd) + "\n", encoding="utf-8"
    )
    (folder / "c.jsonl").write_text(json.dumps(good) + "\n", encoding="utf-8")
    done = run("import", "--from", "openai-jsonl", str(folder), "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["sessions_added"] == 3
    claude = tmp_path / "claude"
    claude.mkdir()
    main = MAIN.read_bytes()
    (claude / MAIN.name).write_bytes(b'{"type": ["user"], "sessionId": "s1"}\n' + main)
    done = run("import", "--from", "claude-code", str(claude), "--json")
    report = json.loads(done.stdout)
    assert done.exit_code == 0 and report["sessions_added"] >= 1
    assert report["skipped_lines"][0]["line"] == 1
    rollout = tmp_path / "codex"
    rollout.mkdir()
    (rollout / ROLLOUT.name).write_bytes(b'{"type": {"a": 1}}\n' + ROLLOUT.read_bytes())
    done = run("import", "--from", "codex", str(rollout), "--json")
    assert done.exit_code == 0 and json.loads(done.stdout)["lines_skipped"] == 1


def test_a_transcripts_own_title_is_kept_to_one_short_line(tmp_path, run, hermes_home):
    path = tmp_path / "titled.jsonl"
    line = {"title": "long\n" + "x" * 100_000, "messages": [{"role": "user", "content": "hi"}]}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    assert run("import", "--from", "openai-jsonl", str(path)).exit_code == 0
    with SessionDB(hermes_home / "state.db") as db:
        (session,) = db.list_sessions()
    assert len(session["title"]) <= 200 and "\n" not in session["title"]
