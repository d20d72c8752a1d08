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

# The CLI opens $HERMES_HOME/state.db: the store under test is SQLite's.
pytestmark = pytest.mark.sqlite_only

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


def test_import_lone_surrogate_is_stored_exactly(run, session_db, tmp_path):
    path = tmp_path / "sur.json"
    path.write_text(
        '[{"role": "user", "content": "ok"}, {"role": "user", "content": "hi \\ud800"}]'
    )
    result = run("import", str(path), "--json")
    assert result.exit_code == 0
    sid = json.loads(result.output)["session_id"]
    assert session_db.get_messages(sid) == [
        {"role": "user", "content": "ok"},
        {"role": "user", "content": "hi \ud800"},
    ]


HOSTILE_TITLE = "llama [/INST] [red]q[/red]"
HOSTILE = [
    {"role": "user", "content": "Why does it end with [/INST] ?"},
    {"role": "assistant", "content": "[red]alarm[/red] done\rOVERWRITE \x1b[31mred\x1b[0m bell\x07"},
]  # fmt: skip


def _hostile(session_db):
    session_db.create_session("s1", title=HOSTILE_TITLE, source="cli")
    ids = session_db.append_messages("s1", HOSTILE)
    return ids, _when(session_db.get_session("s1")["started_at"])


def test_list_prints_markup_and_controls_literally(run, session_db):
    _, started = _hostile(session_db)
    result = run("list")
    assert result.exit_code == 0
    assert result.output == (
        "┏━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━┳━━━━━━━┓\n"
        "┃ id ┃ title                      ┃ source ┃ started          ┃ messages ┃ ended ┃\n"
        "┡━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━╇━━━━━━━┩\n"
        f"│ s1 │ llama [/INST] [red]q[/red] │ cli    │ {started} │ 2        │       │\n"
        "└────┴────────────────────────────┴────────┴──────────────────┴──────────┴───────┘\n"
    )


def test_show_prints_markup_and_controls_literally(run, session_db):
    ids, started = _hostile(session_db)
    result = run("show", "s1")
    assert result.exit_code == 0
    assert result.output == (
        "session s1  llama [/INST] [red]q[/red]\n"
        f"source cli · started {started} · 2 messages, 0 compactions\n"
        "┏━━━━┳━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓\n"
        "┃ id ┃ role      ┃ flags ┃ content                                                      ┃\n"
        "┡━━━━╇━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩\n"
        f"│ {ids[0]}  │ user      │       │ Why does it end with [/INST] ?                               │\n"
        f"│ {ids[1]}  │ assistant │       │ [red]alarm[/red] done\\rOVERWRITE \\x1b[31mred\\x1b[0m bell\\x07 │\n"
        "└────┴───────────┴───────┴──────────────────────────────────────────────────────────────┘\n"
    )


def test_search_prints_markup_and_controls_literally(run, session_db):
    ids, _ = _hostile(session_db)
    assert run("search", "INST").output == (
        "┏━━━━━━━━━┳━━━━━━━━━┳━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓\n"
        "┃ session ┃ message ┃ role ┃ snippet                        ┃\n"
        "┡━━━━━━━━━╇━━━━━━━━━╇━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩\n"
        f"│ s1      │ {ids[0]}       │ user │ Why does it end with [/INST] ? │\n"
        "└─────────┴─────────┴──────┴────────────────────────────────┘\n"
    )
    # The snippet folds the CR into a space; the escape sequence is shown, not obeyed.
    assert run("search", "alarm").output == (
        "┏━━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┓\n"
        "┃ session ┃ message ┃ role      ┃ snippet                                                     ┃\n"
        "┡━━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┩\n"
        f"│ s1      │ {ids[1]}       │ assistant │ [red]alarm[/red] done OVERWRITE \\x1b[31mred\\x1b[0m bell\\x07 │\n"
        "└─────────┴─────────┴───────────┴─────────────────────────────────────────────────────────────┘\n"
    )


def test_recall_and_markdown_export_show_controls_as_escapes(run, session_db):
    ids, started = _hostile(session_db)
    summary = {"role": "user", "content": "summary", "_compressed_summary": True}
    result = CompressionResult(
        messages=[summary], tokens_before=10, tokens_after=5, dropped=2, lineage=[[0, 1]]
    )
    session_db.persist_compression("s1", HOSTILE, result)
    summary_id = next(r["id"] for r in session_db.get_message_records("s1") if r["is_summary"])
    assert run("recall", "s1", str(summary_id)).output == (
        f"--- #{ids[0]} user\nWhy does it end with [/INST] ?\n"
        f"--- #{ids[1]} assistant\n"
        "[red]alarm[/red] done\\rOVERWRITE \\x1b[31mred\\x1b[0m bell\\x07\n"
    )
    assert run("export", "s1", "--all", "--format", "md").output == (
        f"# llama [/INST] [red]q[/red] (s1)\nsource: cli · model: - · started: {started} UTC\n"
        f"\n## user #{ids[0]} (compacted,inactive)\n\nWhy does it end with [/INST] ?\n"
        f"\n## assistant #{ids[1]} (compacted,inactive)\n\n"
        "[red]alarm[/red] done\\rOVERWRITE \\x1b[31mred\\x1b[0m bell\\x07\n"
        f"\n## user #{summary_id} (summary)\n\nsummary\n"
    )
    # JSONL stays exact: JSON escapes the controls.
    lines = run("export", "s1", "--all").output.splitlines()
    assert [json.loads(line) for line in lines[:2]] == HOSTILE


def test_export_never_writes_through_a_planted_temp_symlink(run, session_db, tmp_path):
    _stored(session_db)
    victim = tmp_path / "victim"
    victim.write_text("precious data", encoding="utf-8")
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "x.jsonl.tmp").symlink_to(victim)
    result = run("export", "s1", "-o", str(folder / "x.jsonl"))
    assert result.output == f"wrote 3 messages to {folder / 'x.jsonl'}\n"
    assert victim.read_text(encoding="utf-8") == "precious data"
    target = folder / "x.jsonl"
    assert not target.is_symlink()
    assert target.read_text(encoding="utf-8") == run("export", "s1").output
    assert sorted(p.name for p in folder.iterdir()) == ["x.jsonl", "x.jsonl.tmp"]


def test_failed_export_leaves_no_temporary_file(run, session_db, tmp_path, monkeypatch):
    _stored(session_db)

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    result = run("export", "s1", "-o", str(tmp_path / "x.jsonl"))
    assert (result.exit_code, result.output) == (
        6,
        f"error: cannot write {tmp_path / 'x.jsonl'}: No space left on device\n",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hermes-home"]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["list", "--limit", str(10**23)], "Error: Invalid value for '--limit': 100000000000000000000000 is not in the range 1<=x<=100000."),
        (["list", "--limit", "0"], "Error: Invalid value for '--limit': 0 is not in the range 1<=x<=100000."),
        (["search", "x", "--limit", str(10**23)], "Error: Invalid value for '--limit': 100000000000000000000000 is not in the range 1<=x<=100."),
        (["recall", "s1", str(2**63)], "Error: Invalid value for 'SUMMARY_ID': 9223372036854775808 is not in the range 1<=x<=9223372036854775807."),
    ],
)  # fmt: skip
def test_integer_arguments_are_bounded(run, session_db, args, error):
    _stored(session_db)
    result = run(*args)
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == error


@pytest.mark.parametrize(
    "args", [["list", "--limit"], ["search", "x", "--limit"], ["recall", "s1"]]
)
def test_five_thousand_digit_integer_is_a_usage_error(run, session_db, args):
    _stored(session_db)
    result = run(*args, "9" * 5_000)
    assert result.exit_code == 2
    last = result.output.splitlines()[-1]
    assert last.startswith("Error: Invalid value for ")
    assert last.endswith("' is not a valid integer range.")


def test_lone_surrogates_survive_show_json_export_and_import(run, session_db, tmp_path):
    messages = [
        {"role": "user", "content": "hi \ud800 there"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "t", "arguments": '{"a": "\\udcff"}'}}]},
    ]  # fmt: skip
    session_db.create_session("s1")
    session_db.append_messages("s1", messages)
    data = json.loads(run("show", "s1", "--json").output)
    assert [r["message"] for r in data["messages"]] == messages
    assert "hi \\ud800 there" in run("show", "s1").output
    path = tmp_path / "copy.jsonl"
    assert run("export", "s1", "-o", str(path)).exit_code == 0
    assert (
        path.read_text(encoding="utf-8").splitlines()[0]
        == '{"role": "user", "content": "hi \\ud800 there"}'
    )
    imported = json.loads(run("import", str(path), "--json").output)
    assert session_db.get_messages(imported["session_id"]) == messages


needs_non_root = pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root ignores file permissions, so a read-only state.db cannot be observed",
)


@needs_non_root
@pytest.mark.parametrize("locked", ["file", "folder"])
def test_read_only_database_can_be_listed_shown_searched_and_exported(
    run, session_db, hermes_home, locked
):
    ids = _stored(session_db)
    session_db.close()
    db_path = hermes_home / "state.db"
    if locked == "file":
        os.chmod(db_path, 0o444)
    else:
        os.chmod(hermes_home, 0o555)
    try:
        assert run("list").output.splitlines()[3].startswith("│ s1 │ spiky │")
        assert f"│ {ids[2]}  │ tool bash │" in run("show", "s1").output
        assert (
            f"│ s1      │ {ids[2]}       │ tool │ 1 failed: echidna spines │"
            in run("search", "spines").output
        )
        assert run("export", "s1").output == "".join(
            json.dumps(m, ensure_ascii=False) + "\n" for m in MESSAGES
        )
        refused = run("delete", "s1", "--yes")
        assert refused.exit_code == 6
        assert refused.output == (
            f"error: {db_path} is read-only (opened read-only); nothing was changed — make the "
            "file and its folder writable (chmod u+w) to change it\n"
        )
    finally:
        os.chmod(hermes_home, 0o755)
        os.chmod(db_path, 0o644)
