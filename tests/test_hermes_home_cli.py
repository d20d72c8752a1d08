"""A Hermes user's home through the real entry point: every ``sessions`` command,
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
