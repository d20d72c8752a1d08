"""``hermes-context compress`` through the real entry point."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_context.cli.main import cli
from hermes_context.llm.testing import Reply
from hermes_context.synthetic import generate_transcript

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "agent_session.json"


@pytest.fixture
def session_file(tmp_path):
    path = tmp_path / "session.json"
    path.write_text(json.dumps(generate_transcript(150, seed=21)))
    return path


def run(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_report_is_printed(session_file):
    res = run("compress", str(session_file), "--context-length", "8000")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    count = len(json.loads(session_file.read_text()))
    assert lines[0].startswith(f"{session_file}: {count} messages, ")
    assert "stage                tokens before -> after" in res.output
    assert "summariser: deterministic" in res.output
    assert lines[-1] == "use -o FILE to write the compressed messages, or --json to print them"


def test_json_output_holds_messages_and_report(session_file):
    res = run("compress", str(session_file), "--context-length", "8000", "--json")
    data = json.loads(res.stdout)
    assert set(data) >= {
        "messages",
        "report",
        "tokens_before",
        "tokens_after",
        "summary",
        "dropped",
    }
    assert data["tokens_after"] < data["tokens_before"]
    assert data["report"]["summariser"] == "deterministic"
    assert any(m.get("_compressed_summary") for m in data["messages"])


def test_output_file_and_dry_run(session_file, tmp_path):
    out = tmp_path / "out.jsonl"
    res = run("compress", str(session_file), "--context-length", "8000", "-o", str(out))
    assert res.exit_code == 0 and res.output.splitlines()[-1] == f"wrote {out}"
    lines = out.read_text().splitlines()
    assert all(json.loads(line)["role"] for line in lines)
    dry = tmp_path / "dry.json"
    res = run(
        "compress", str(session_file), "--context-length", "8000", "-o", str(dry), "--dry-run"
    )
    assert res.output.splitlines()[-1] == "dry run: nothing was written" and not dry.exists()


def test_stdin_and_target_tokens(session_file):
    res = run("compress", "-", "--target-tokens", "3000", "--json", input=session_file.read_text())
    assert res.exit_code == 0
    assert 2_700 <= json.loads(res.stdout)["tokens_after"] <= 3000


def test_an_unreachable_target_is_reported_with_exit_1(tmp_path):
    messages = [
        {"role": "system", "content": "You are an agent. " * 600},
        {"role": "user", "content": "Refactor the module."},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Now continue."},
    ]
    path = tmp_path / "big-system.json"
    path.write_text(json.dumps(messages))
    out = tmp_path / "out.json"
    res = run("compress", str(path), "--target-tokens", "500", "-o", str(out))
    assert res.exit_code == 1
    assert "is over --target-tokens 500" in res.stderr
    assert out.exists(), "the best result is still written"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            '[{"role": "user", "content": "a"}, oops]',
            "error: {p}: line 1: invalid JSON (Expecting value)",
        ),
        (
            '{"role": "user", "content": "a"}\n{"role": \n',
            "error: {p}: line 2: invalid JSON (Expecting value)",
        ),
        (
            '[{"role": "user", "content": "a"}, {"role": "tool", "tool_call_id": "x", "content": "r"}]',
            "error: {p}: message 1: tool result 'x' does not answer a tool call of the assistant message right before its run of tool results",
        ),
        (
            '[{"role": "wizard", "content": "a"}]',
            "error: {p}: message 0: role 'wizard' is not one of assistant, developer, system, tool, user",
        ),
        (
            '{"items": []}',
            "error: {p}: expected a JSON array of messages or an object with 'messages'",
        ),
        ("", "error: {p}: the file is empty: expected a JSON array of messages"),
    ],
)
def test_invalid_input_gives_one_line_error_and_exit_2(tmp_path, content, expected):
    path = tmp_path / "bad.json"
    path.write_text(content)
    res = CliRunner().invoke(cli, ["compress", str(path)])
    assert res.exit_code == 2
    assert res.output == expected.format(p=path) + "\n"


def test_missing_file(tmp_path):
    res = CliRunner().invoke(cli, ["compress", str(tmp_path / "nope.json")])
    assert res.exit_code == 2 and res.output == f"error: {tmp_path / 'nope.json'}: no such file\n"


def test_llm_requested_but_not_configured(session_file):
    res = CliRunner().invoke(cli, ["compress", str(session_file), "--llm"])
    assert res.exit_code == 3
    assert res.output.startswith("error: no LLM configured: set model.base_url and model.name")


def test_llm_from_flags_uses_scripted_server(session_file, scripted_llm):
    scripted_llm.enqueue(Reply.text("## Goal\n- from the model"), model="sum-model")
    res = run(
        "compress",
        str(session_file),
        "--context-length",
        "8000",
        "--json",
        "--base-url",
        scripted_llm.base_url,
        "--summary-model",
        "sum-model",
    )
    data = json.loads(res.stdout)
    assert data["report"]["summariser"] == "llm:sum-model"
    assert data["summary"].startswith("## Goal\n- from the model")


def test_llm_auth_failure_exits_5_and_writes_nothing(session_file, scripted_llm, tmp_path):
    scripted_llm.enqueue(Reply.error(401, "bad key"))
    out = tmp_path / "o.json"
    res = CliRunner().invoke(
        cli,
        [
            "compress",
            str(session_file),
            "--context-length",
            "8000",
            "-o",
            str(out),
            "--base-url",
            scripted_llm.base_url,
            "--summary-model",
            "m",
        ],
    )
    assert res.exit_code == 5 and not out.exists()
    assert "compression aborted: the messages are unchanged, nothing was lost" in res.output


def test_help_everywhere():
    for args in (
        ["--help"],
        ["compress", "--help"],
        ["config", "--help"],
        ["config", "show", "--help"],
    ):
        res = run(*args)
        assert res.exit_code == 0 and "Usage:" in res.output


def test_installed_script_compresses_the_example():
    exe = shutil.which("hermes-context", path=str(Path(sys.executable).parent))
    assert exe, "the console script is not installed"
    proc = subprocess.run(
        [exe, "compress", str(EXAMPLE)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{EXAMPLE}: 242 messages, 84,460 -> ")


# -- compress --session --------------------------------------------------------


@pytest.fixture
def stored(session_db):
    messages = generate_transcript(150, seed=33)
    sid = session_db.create_session(title="stored work")
    session_db.append_messages(sid, messages)
    return sid, messages


def test_session_in_place_keeps_originals(stored, session_db):
    sid, messages = stored
    res = run("compress", "--session", sid, "--context-length", "8000")
    assert res.exit_code == 0, res.output
    assert res.output.splitlines()[-1] == f"persisted in session {sid}"
    live = session_db.get_messages(sid)
    assert len(live) < len(messages) and any(m.get("_compressed_summary") for m in live)
    everything = session_db.get_messages(sid, include_compacted=True)
    assert len(everything) > len(live)
    assert session_db.get_session(sid)["compressor_state"]["compression_count"] == 1


def test_session_rotate_starts_a_child(stored, session_db):
    sid, _ = stored
    res = run("compress", "--session", sid, "--context-length", "8000", "--rotate", "--json")
    data = json.loads(res.stdout)
    child = data["session_id"]
    assert child != sid
    assert session_db.get_session(child)["parent_session_id"] == sid
    assert session_db.get_session(sid)["end_reason"] == "compression"


def test_session_dry_run_changes_nothing(stored, session_db):
    sid, messages = stored
    res = run("compress", "--session", sid, "--context-length", "8000", "--dry-run")
    assert res.output.splitlines()[-1] == "dry run: nothing was written"
    assert session_db.get_messages(sid) == messages


def test_session_errors():
    res = CliRunner().invoke(cli, ["compress", "--session", "nope"])
    assert res.exit_code == 4 and res.output.startswith("error: no session 'nope' in ")
    res = CliRunner().invoke(cli, ["compress"])
    assert res.exit_code == 2 and "give either INPUT or --session ID" in res.output
    res = CliRunner().invoke(cli, ["compress", "x.json", "--rotate"])
    assert res.exit_code == 2 and "--rotate only applies with --session" in res.output
