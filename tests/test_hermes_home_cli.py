"""A Hermes user's home through the real entry point: every ``sessions`` command, ``doctor``,
``run --session`` — and Hermes still writes the file afterwards."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from hermes_context.cli.main import cli
from hermes_context.llm.testing import Reply, ScriptedLLMServer
from hermes_homes import (
    CJK_PHRASE,
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
FIXTURE_SESSIONS = {S1, S2, S3, S4}
ANSWER = "capybara_answer_marker"


def invoke(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def as_json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def server():
    with ScriptedLLMServer() as srv:
        yield srv


@pytest.mark.parametrize(("name", "version"), [("v2", 2), ("v25", 25), ("v25-cjk", 25)])
def test_doctor_reports_a_hermes_home_and_changes_nothing(tmp_path, name, version):
    home = copy_home(name, tmp_path / name)
    (home / ".env").write_text("OPENAI_API_KEY=sk-never-shown\n", encoding="utf-8")
    db_before, files_before = _digest(home / "state.db"), sorted(os.listdir(home))
    report = as_json(invoke("doctor", "--home", str(home), "--json"))
    assert "sk-never-shown" not in json.dumps(report)
    assert _digest(home / "state.db") == db_before
    sidecars = {"state.db-shm", "state.db-wal"}  # SQLite's own, when a WAL file is read
    assert sorted(set(os.listdir(home)) - sidecars) == sorted(set(files_before) - sidecars)
    db = report["state_db"]
    assert (db["hermes_schema_version"], db["sessions"], db["messages"]) == (version, 4, 21)
    assert db["migrations_applied"] == [] and "sessions_and_messages" in db["migrations_pending"]
    assert db["journal_mode"] == ("wal" if name == "v2" else "delete")
    fts = {t["name"]: t for t in db["fts"]}
    assert fts["messages_fts"]["usable"] and fts["messages_fts"]["owner"] == "other (Hermes)"
    if name == "v25-cjk":
        assert fts["messages_fts_cjk"]["tokenizer"] == "cjk_unicode61"
        assert not fts["messages_fts_cjk"]["usable"] and not db["writable"]
        assert "cjk_unicode61" in db["read_only_reason"]
    else:
        assert db["writable"]
    assert [(m["file"], m["entries"]) for m in report["memory"]] == [
        ("memories/MEMORY.md", 3),
        ("memories/USER.md", 2),
    ]
    assert all(m["chars"] <= m["limit"] for m in report["memory"])
    assert report["skills"]["count"] == 3
    assert "model.default" in report["config"]["known"] and report["config"]["unknown"] == []
    assert "model.default" in report["config"]["hermes_mapped"]["model.name"]
    assert "_config_version" in report["config"]["hermes_ignored"]
    assert "compression.threshold" in report["config"]["known"]
    assert report["credential_files"] == [".env"]
    text = invoke("doctor", "--home", str(home))
    assert text.exit_code == 0 and f"Hermes schema {version}" in text.stdout
    assert ".env (contents not read)" in text.stdout


@pytest.mark.parametrize("name", ["v2", "v25"])
def test_every_sessions_command_on_a_hermes_home_then_hermes_writes_on(tmp_path, server, name):
    home = copy_home(name, tmp_path / name)
    path, h = home / "state.db", ["--home", str(home)]
    journal = header_journal_bytes(path)
    listed = as_json(invoke("sessions", "list", *h, "--json"))
    assert {s["id"] for s in listed} == FIXTURE_SESSIONS
    shown = invoke("sessions", "show", S1, *h)
    assert shown.exit_code == 0 and "terminal" in shown.stdout and "KeyError" in shown.stdout
    hits = as_json(invoke("sessions", "search", TOOL_WORD, *h, "--json"))
    assert [(x["session_id"], x["message_id"]) for x in hits] == [(S1, 3)]
    hits = as_json(invoke("sessions", "search", CJK_PHRASE, *h, "--json"))
    assert {x["session_id"] for x in hits} == {S2}
    md = invoke("sessions", "export", S1, "--format", "md", *h)
    assert md.exit_code == 0 and "call `terminal`" in md.stdout and TOOL_WORD in md.stdout
    lines = invoke("sessions", "export", S1, *h).stdout.splitlines()
    roles = [json.loads(line)["role"] for line in lines]
    assert roles[-4:] == ["user", "assistant", "tool", "assistant"]
    recalled = as_json(invoke("sessions", "recall", S4, "19", *h, "--json"))
    assert [r["session_id"] for r in recalled] == [S3] * 12
    assert invoke("sessions", "delete", S2, "-y", *h).exit_code == 0
    assert invoke("sessions", "reindex", *h).exit_code == 0
    server.enqueue(Reply.text(ANSWER))
    run = invoke(
        "run", "what was the fix?", "--session", S1, "--base-url", server.base_url,
        "--model", "scripted-model", *h,
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    assert ANSWER in run.stdout
    sent = server.chat_requests[-1].body["messages"]
    assert sent[0]["role"] == "system" and [m["role"] for m in sent[1:]] == [
        "user", "assistant", "tool", "assistant", "user",
    ]  # fmt: skip
    # Hermes, afterwards: its INSERTs succeed; its search finds old, new and our rows.
    theirs = hermes_writes(path, name)
    assert hermes_fts(path, TOOL_WORD) == [3]
    assert hermes_fts(path, HERMES_WORD) == [theirs]
    assert hermes_fts(path, ANSWER)
    assert header_journal_bytes(path) == journal
    assert integrity(path) == "ok"
    found = as_json(invoke("sessions", "search", HERMES_WORD, *h, "--json"))
    assert [x["message_id"] for x in found] == [theirs]


def test_a_read_only_hermes_home_reads_and_says_how_to_write(tmp_path):
    home = copy_home("v25-cjk", tmp_path / "cjk")
    path, h = home / "state.db", ["--home", str(home)]
    before = _digest(path)
    assert {s["id"] for s in as_json(invoke("sessions", "list", *h, "--json"))} == FIXTURE_SESSIONS
    hits = as_json(invoke("sessions", "search", CJK_PHRASE, *h, "--json"))
    assert {x["session_id"] for x in hits} == {S2}
    assert invoke("sessions", "show", S4, *h).exit_code == 0
    assert len(as_json(invoke("sessions", "recall", S4, "19", *h, "--json"))) == 12
    assert TOOL_WORD in invoke("sessions", "export", S1, "--format", "md", *h).stdout
    deleted = invoke("sessions", "delete", S2, "-y", *h)
    assert deleted.exit_code == 6 and "Traceback" not in deleted.output
    assert "read-only" in deleted.output and "--from-hermes" in deleted.output
    assert _digest(path) == before
    # The command line says it once, on one line, before anything else.
    proc = subprocess.run(
        [sys.executable, "-m", "hermes_context.cli.main", "sessions", "list", *h],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONWARNINGS": "ignore::UserWarning:hermes_context.config"},
    )  # fmt: skip
    warned = [line for line in proc.stderr.splitlines() if "read-only" in line]
    assert proc.returncode == 0 and len(warned) == 1, proc.stderr
    assert warned[0].startswith("warning: ") and "cjk_unicode61" in warned[0]
    assert _digest(path) == before


@pytest.mark.parametrize("name", ["v2", "v25", "v25-cjk"])
def test_import_from_hermes_copies_everything_once(tmp_path, server, name):
    source = copy_home(name, tmp_path / name)
    before = _digest(source / "state.db")
    ours = ["--home", str(tmp_path / "ours")]
    first = as_json(invoke("sessions", "import", "--from-hermes", str(source), *ours, "--json"))
    assert (first["sessions_added"], first["messages_added"]) == (4, 21)
    again = as_json(invoke("sessions", "import", "--from-hermes", str(source), *ours, "--json"))
    assert (again["sessions_added"], again["sessions_unchanged"], again["messages_added"]) == (
        0, 4, 0,
    )  # fmt: skip
    text = invoke("sessions", "import", "--from-hermes", str(source / "state.db"), *ours)
    assert text.stdout.endswith("0 sessions added, 0 extended, 4 already here; 0 messages\n")
    assert _digest(source / "state.db") == before  # the source is only read
    # The copy is a home of our own: it searches, resumes, and takes Hermes's writes.
    hits = as_json(invoke("sessions", "search", TOOL_WORD, *ours, "--json"))
    assert [x["session_id"] for x in hits] == [S1]
    copied = tmp_path / "ours" / "state.db"
    server.enqueue(Reply.text(ANSWER))
    run = invoke(
        "run", "and now?", "--session", S4, "--base-url", server.base_url,
        "--model", "scripted-model", *ours,
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    theirs = hermes_writes(copied, LATEST)
    assert hermes_fts(copied, HERMES_WORD) == [theirs] and hermes_fts(copied, TOOL_WORD)
    assert hermes_fts(copied, ANSWER)
    assert header_journal_bytes(copied) == b"\x02\x02" and integrity(copied) == "ok"


def test_a_home_we_create_takes_every_command_and_hermes_writes(tmp_path, server):
    h = ["--home", str(tmp_path / "fresh")]
    server.enqueue(Reply.text(f"{ANSWER} one"))
    first = invoke("run", "hello there", "--json", "--base-url", server.base_url,
                   "--model", "scripted-model", *h)  # fmt: skip
    sid = as_json(first)["session_id"]
    server.enqueue(Reply.text(f"{ANSWER} two"))
    again = invoke("run", "and again", "--session", sid, "--base-url", server.base_url,
                   "--model", "scripted-model", *h)  # fmt: skip
    assert again.exit_code == 0, again.output
    path = tmp_path / "fresh" / "state.db"
    report = as_json(invoke("doctor", *h, "--json"))["state_db"]
    assert report["hermes_schema_version"] is None and report["migrations_pending"] == []
    assert report["journal_mode"] == "wal" and report["writable"]
    assert [s["id"] for s in as_json(invoke("sessions", "list", *h, "--json"))] == [sid]
    assert invoke("sessions", "show", sid, *h).exit_code == 0
    assert len(as_json(invoke("sessions", "search", ANSWER, *h, "--json"))) == 2
    assert "and again" in invoke("sessions", "export", sid, "--format", "md", *h).stdout
    theirs = hermes_writes(path, LATEST)
    assert hermes_fts(path, HERMES_WORD) == [theirs]
    assert len(hermes_fts(path, ANSWER)) == 2
    assert header_journal_bytes(path) == b"\x02\x02" and integrity(path) == "ok"
    found = as_json(invoke("sessions", "search", HERMES_WORD, *h, "--json"))
    assert [x["message_id"] for x in found] == [theirs]
    assert invoke("sessions", "delete", sid, "-y", *h).exit_code == 0
