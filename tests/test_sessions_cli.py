"""``hermes-context sessions ...`` through the real entry point."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from hermes_context import CompressionResult
from hermes_context.cli.main import cli

SUBCOMMANDS = ["list", "show", "search", "recall", "export", "import", "delete", "reindex"]


@pytest.fixture
def run(hermes_home, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    runner = CliRunner()

    def invoke(*args, input=None):
        return runner.invoke(cli, ["sessions", *args], input=input, catch_exceptions=False)

    return invoke


MESSAGES = [
    {"role": "user", "content": "Why does the echidna test fail?"},
    {"role": "assistant", "content": "Let me look.", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pytest -k echidna"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "1 failed: echidna spines", "_ms": 12},
]  # fmt: skip


def _stored(session_db, sid="s1", title="spiky"):
    session_db.create_session(sid, title=title, source="cli", model="m")
    return session_db.append_messages(sid, MESSAGES)


def _when(ts):
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(ts))


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_has_help(run, sub):
    result = run(sub, "--help")
    assert result.exit_code == 0
    assert result.output.startswith("Usage: cli sessions " + sub)


def test_group_help_lists_subcommands(run):
    out = run("--help").output
    for sub in SUBCOMMANDS:
        assert f"  {sub} " in out


def test_list_empty_and_json(run, session_db):
    assert run("list").output == "no sessions\n"
    assert run("list", "--json").output == "[]\n"
    _stored(session_db)
    rows = json.loads(run("list", "--json").output)
    assert rows == json.loads(json.dumps(session_db.list_sessions(), default=str))


def test_list_table_exact(run, session_db):
    _stored(session_db)
    started = _when(session_db.get_session("s1")["started_at"])
    assert run("list").output == (
        "┏━━━━┳━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━┓\n"
        "┃ id ┃ title ┃ source ┃ started          ┃ messages ┃ ended ┃\n"
        "┡━━━━╇━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━┩\n"
        f"│ s1 │ spiky │ cli    │ {started} │ 3        │       │\n"
        "└────┴───────┴────────┴──────────────────┴──────────┴───────┘\n"
    )


def test_show_json_and_table(run, session_db):
    ids = _stored(session_db)
    data = json.loads(run("show", "s1", "--json").output)
    assert data["session"]["id"] == "s1"
    assert [r["message"] for r in data["messages"]] == MESSAGES
    assert [r["id"] for r in data["messages"]] == ids
    out = run("show", "s1").output.splitlines()
    assert out[0] == "session s1  spiky"
    assert (
        out[1]
        == f"source cli · started {_when(session_db.get_session('s1')['started_at'])} · 3 messages, 0 compactions"
    )
    assert f"│ {ids[2]}  │ tool bash │       │ 1 failed: echidna spines" in "\n".join(out)


def test_missing_session_exit_code_and_one_line_error(run):
    result = run("show", "nope")
    assert result.exit_code == 4
    assert (
        result.output
        == "error: session 'nope' not found; list them with 'hermes-context sessions list'\n"
    )


def test_search_outputs(run, session_db):
    ids = _stored(session_db)
    assert run("search", "platypus").output == "no matches\n"
    hits = json.loads(run("search", "echidna", "--json").output)
    assert [h["message_id"] for h in hits] == [ids[0], ids[2], ids[1]] or sorted(
        h["message_id"] for h in hits
    ) == sorted(ids)
    assert {h["message_id"] for h in hits} == set(ids)
    table = run("search", "spines").output
    assert f"│ s1      │ {ids[2]}       │ tool │ 1 failed: echidna spines │" in table


def test_malformed_raw_search_is_a_usage_error(run, session_db):
    _stored(session_db)
    result = run("search", "echidna AND", "--raw")
    assert result.exit_code == 2
    assert result.output == (
        "error: invalid search query 'echidna AND': fts5: syntax error near \"\" "
        "(drop raw mode to search the words literally)\n"
    )
    assert run("search", "echidna AND").exit_code == 0


def test_recall_prints_originals(run, session_db):
    ids = _stored(session_db)
    summary = {
        "role": "user",
        "content": "summary of the echidna hunt",
        "_compressed_summary": True,
    }
    result = CompressionResult(
        messages=[summary, MESSAGES[2]], tokens_before=10, tokens_after=5, dropped=2,
        lineage=[[0, 1], [2]],
    )  # fmt: skip
    session_db.persist_compression("s1", MESSAGES, result)
    summary_id = next(r["id"] for r in session_db.get_message_records("s1") if r["is_summary"])
    out = run("recall", "s1", str(summary_id)).output
    assert out == (
        f"--- #{ids[0]} user\nWhy does the echidna test fail?\n"
        f'--- #{ids[1]} assistant\nLet me look.\n[call bash] {{"command": "pytest -k echidna"}}\n'
    )
    data = json.loads(run("recall", "s1", str(summary_id), "--json").output)
    assert [r["message"] for r in data] == MESSAGES[:2]
    bad = run("recall", "s1", str(ids[2]))
    assert bad.exit_code == 6
    assert "nothing to recall" in bad.output


def test_export_jsonl_import_round_trip(run, session_db, tmp_path):
    _stored(session_db)
    exported = run("export", "s1").output
    assert exported == "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in MESSAGES)
    path = tmp_path / "copy.jsonl"
    result = run("export", "s1", "-o", str(path))
    assert result.output == f"wrote 3 messages to {path}\n"
    imported = json.loads(run("import", str(path), "--json").output)
    assert imported["messages"] == 3
    assert session_db.get_messages(imported["session_id"]) == MESSAGES
    assert session_db.get_session(imported["session_id"])["title"] == "copy"


def test_export_markdown_exact(run, session_db):
    ids = _stored(session_db)
    started = _when(session_db.get_session("s1")["started_at"])
    assert run("export", "s1", "--format", "md").output == (
        f"# spiky (s1)\nsource: cli · model: m · started: {started} UTC\n"
        f"\n## user #{ids[0]}\n\nWhy does the echidna test fail?\n"
        f"\n## assistant #{ids[1]}\n\nLet me look.\n"
        '\ncall `bash`:\n\n```json\n{"command": "pytest -k echidna"}\n```\n'
        f"\n## tool `bash` #{ids[2]}\n\n```\n1 failed: echidna spines\n```\n"
    )


def test_import_json_list_with_title_and_plain_output(run, session_db, tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"messages": MESSAGES}), encoding="utf-8")
    out = run("import", str(path), "--title", "T", "--user", "ann").output
    sid = out.removeprefix("imported 3 messages into session ").strip()
    assert out == f"imported 3 messages into session {sid}\n"
    session = session_db.get_session(sid)
    assert (session["title"], session["user_id"], session["source"]) == ("T", "ann", "import")


@pytest.mark.parametrize(
    ("name", "text", "error"),
    [
        ("bad.jsonl", '{"role": "user", "content": "ok"}\n{nope\n', "line 2: invalid JSON (Expecting property name enclosed in double quotes)\n"),
        ("bad.jsonl", '{"role": "user", "content": "ok"}\n\n{"role": "wizard"}\n', "message 1: role 'wizard' is not one of assistant, developer, system, tool, user\n"),
        ("bad.json", '[{"role": "user"}, 5]', "message 1: expected an object, got int\n"),
        ("bad.json", '{"foo": 1}', "expected a JSON array of messages or an object with 'messages'\n"),
        ("bad.json", "", "the file is empty: expected a JSON array of messages\n"),
    ],
)  # fmt: skip
def test_import_bad_file_names_file_and_line(run, session_db, tmp_path, name, text, error):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    result = run("import", str(path))
    assert result.exit_code == 2
    assert result.output == f"error: {path}: {error}"
    assert session_db.list_sessions() == []


def test_delete_confirms(run, session_db):
    _stored(session_db)
    declined = run("delete", "s1", input="n\n")
    assert declined.exit_code == 1
    assert session_db.get_session("s1") is not None
    accepted = run("delete", "s1", input="y\n")
    assert (
        accepted.output
        == "delete session s1 (3 messages)? [y/N]: y\ndeleted session s1 (3 messages)\n"
    )
    assert session_db.get_session("s1") is None


def test_delete_parent_needs_cascade(run, session_db):
    _stored(session_db, "p")
    session_db.create_session("c", parent_session_id="p")
    refused = run("delete", "p", "--yes")
    assert refused.exit_code == 6
    assert refused.output == (
        "error: session 'p' has 1 child session(s); delete them too with cascade (--cascade) "
        "or delete the children first\n"
    )
    assert run("delete", "p", "--yes", "--cascade").output == "deleted session p (3 messages)\n"


def test_reindex(run, session_db):
    _stored(session_db)
    assert run("reindex").output == "reindexed 3 messages\n"
    assert len(session_db.search("echidna", limit=5)) == 3


def test_not_a_database_is_a_store_error(run, hermes_home):
    (hermes_home / "state.db").write_text("hello", encoding="utf-8")
    result = run("list")
    assert result.exit_code == 6
    assert result.output.startswith(f"error: {hermes_home / 'state.db'} is not an SQLite database")
    assert (hermes_home / "state.db").read_text(encoding="utf-8") == "hello"


def test_installed_console_script(hermes_home, session_db):
    _stored(session_db)
    exe = shutil.which("hermes-context", path=os.path.dirname(sys.executable))
    if exe is None:
        pytest.skip("hermes-context is not installed next to this interpreter")
    env = {**os.environ, "HERMES_HOME": str(hermes_home)}
    done = subprocess.run(
        [exe, "sessions", "search", "spines", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    [hit] = json.loads(done.stdout)
    assert (hit["session_id"], hit["role"], hit["snippet"]) == (
        "s1",
        "tool",
        "1 failed: echidna spines",
    )
    missing = subprocess.run(
        [exe, "sessions", "show", "zzz"], capture_output=True, text=True, env=env, timeout=60
    )
    assert (missing.returncode, missing.stdout) == (4, "")
    assert (
        missing.stderr
        == "error: session 'zzz' not found; list them with 'hermes-context sessions list'\n"
    )


def test_recall_refuses_an_id_beyond_sqlite_range(run, session_db):
    _stored(session_db)
    result = run("recall", "s1", "99999999999999999999999")
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        "Error: Invalid value for 'SUMMARY_ID': 99999999999999999999999 is not in the range "
        "1<=x<=9223372036854775807."
    )


def test_export_to_a_missing_folder_names_the_path(run, session_db, tmp_path):
    _stored(session_db)
    target = tmp_path / "missing" / "x.jsonl"
    result = run("export", "s1", "-o", str(target))
    assert result.exit_code == 6
    assert result.output == f"error: cannot write {target}: No such file or directory\n"
    assert not target.parent.exists()


def test_import_lone_surrogate_is_refused_with_file_and_message(run, session_db, tmp_path):
    path = tmp_path / "sur.json"
    path.write_text(
        '[{"role": "user", "content": "ok"}, {"role": "user", "content": "hi \\ud800"}]'
    )
    result = run("import", str(path))
    assert result.exit_code == 2
    assert result.output == (
        f"error: {path}: message 1: holds a lone surrogate (U+D800), which is not valid Unicode "
        "text and cannot be stored\n"
    )
    assert session_db.list_sessions() == []
