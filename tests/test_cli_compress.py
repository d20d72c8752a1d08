"""``hermes-context compress`` through the real entry point."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hermes_context.cli.main import cli
from hermes_context.llm.testing import Reply
from hermes_context.synthetic import generate_transcript

# The CLI opens $HERMES_HOME/state.db: the store under test is SQLite's.
pytestmark = pytest.mark.sqlite_only

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
    for flag in ("--rotate", "--in-place"):
        res = CliRunner().invoke(cli, ["compress", "x.json", flag])
        assert res.exit_code == 2
        assert "--rotate and --in-place only apply with --session" in res.output


# -- output files ----------------------------------------------------------------


def test_output_in_a_missing_folder_is_refused_before_compressing(session_file, tmp_path):
    out = tmp_path / "missing" / "deeper" / "out.json"
    res = CliRunner().invoke(cli, ["compress", str(session_file), "-o", str(out)])
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr == (
        f"error: cannot write {out}: the folder {out.parent} does not exist; create it first\n"
    )
    assert not (tmp_path / "missing").exists()


@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="needs Linux /proc")
def test_output_that_cannot_be_written_is_one_line_exit_6(session_file):
    res = CliRunner().invoke(
        cli, ["compress", str(session_file), "--context-length", "8000", "-o", "/proc/version"]
    )
    assert res.exit_code == 6
    assert res.stderr == "error: cannot write /proc/version: /proc does not accept new files\n"
    assert isinstance(res.exception, SystemExit)


# -- a session that is not compressed records nothing ----------------------------


def _snapshot(session_db, sid):
    return (
        session_db.get_messages(sid, include_compacted=True),
        session_db.get_session(sid)["compression_count"],
        session_db.list_compactions(sid),
    )


def test_session_blocked_by_anti_thrash_exits_1_and_records_nothing(stored, session_db):
    sid, _ = stored
    state = {"ineffective_count": 2, "blocked_since": time.time()}
    session_db.save_compressor_state(sid, state)
    before = _snapshot(session_db, sid)
    res = CliRunner().invoke(cli, ["compress", "--session", sid, "--context-length", "8000"])
    assert res.exit_code == 1
    assert res.stdout.splitlines()[-1] == "nothing was written"
    assert res.stderr == (
        "hermes-context: the session was not compressed and nothing was recorded: recent "
        "compressions saved under 10%: automatic compression is paused (force overrides)\n"
    )
    assert _snapshot(session_db, sid) == before
    assert session_db.get_compressor_state(sid) == state


def test_session_with_nothing_to_summarise_exits_1_and_records_nothing(session_db):
    sid = session_db.create_session(title="short")
    session_db.append_messages(
        sid, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    )
    before = _snapshot(session_db, sid)
    for args in ([], ["--json"], ["--dry-run"]):
        res = CliRunner().invoke(cli, ["compress", "--session", sid, *args])
        assert res.exit_code == 1, args
        assert res.stderr == (
            "hermes-context: the session was not compressed and nothing was recorded: "
            "no summary: nothing to summarise\n"
        )
    assert _snapshot(session_db, sid) == before


def test_a_short_message_file_is_still_fine(tmp_path):
    path = tmp_path / "short.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    assert CliRunner().invoke(cli, ["compress", str(path)]).exit_code == 0


def test_session_in_place_comes_from_the_config(stored, session_db, hermes_home):
    sid, _ = stored
    (hermes_home / "config.yaml").write_text("compression:\n  in_place: false\n")
    res = run("compress", "--session", sid, "--context-length", "8000", "--json")
    child = json.loads(res.stdout)["session_id"]
    assert child != sid and session_db.get_session(child)["parent_session_id"] == sid


def test_in_place_flag_beats_the_config(stored, session_db, hermes_home):
    sid, _ = stored
    (hermes_home / "config.yaml").write_text("compression:\n  in_place: false\n")
    res = run("compress", "--session", sid, "--context-length", "8000", "--in-place")
    assert res.output.splitlines()[-1] == f"persisted in session {sid}"
    assert session_db.get_session(sid)["compression_count"] == 1


# -- an LLM failure with abort_on_summary_failure -----------------------------------


@pytest.fixture
def failing_llm(monkeypatch, hermes_home):
    from hermes_context import LLMAPIError
    from hermes_context.cli import compress_cmd
    from hermes_context.llm.testing import FailingSummarizer

    summarizer = FailingSummarizer(LLMAPIError("upstream down", status_code=503, kind="other"))
    real = compress_cmd._build_compressor

    def build(cfg, **kwargs):
        compressor = real(cfg, **kwargs)
        compressor.summarizer = summarizer
        return compressor

    monkeypatch.setattr(compress_cmd, "_build_compressor", build)
    (hermes_home / "config.yaml").write_text("compression:\n  abort_on_summary_failure: true\n")
    return summarizer


def test_llm_failure_report_claims_nothing_pruned(failing_llm, session_file, tmp_path):
    out = tmp_path / "out.json"
    res = CliRunner().invoke(
        cli, ["compress", str(session_file), "--context-length", "8000", "-o", str(out)]
    )
    count = len(json.loads(session_file.read_text()))
    assert res.exit_code == 5 and not out.exists()
    lines = res.stdout.splitlines()
    assert f"messages: 0 pruned, 0 summarised, {count} kept verbatim" in lines
    assert "  prune" not in res.stdout
    assert lines[-1] == "nothing was written"
    assert len(failing_llm.calls) == 1
    data = json.loads(
        CliRunner()
        .invoke(cli, ["compress", str(session_file), "--context-length", "8000", "--json"])
        .stdout
    )
    assert (data["aborted"], data["report"]["pruned"], data["dropped"]) == (True, [], 0)


def test_llm_failure_on_a_session_records_no_compaction(failing_llm, stored, session_db):
    sid, messages = stored
    res = CliRunner().invoke(cli, ["compress", "--session", sid, "--context-length", "8000"])
    assert res.exit_code == 5
    assert f"messages: 0 pruned, 0 summarised, {len(messages)} kept verbatim" in res.stdout
    assert res.stdout.splitlines()[-1] == "nothing was written"
    assert session_db.get_messages(sid, include_compacted=True) == messages
    assert session_db.get_session(sid)["compression_count"] == 0
    assert session_db.list_compactions(sid) == []


# -- numbers, nesting, bytes that are not UTF-8 -----------------------------------


def test_5000_digit_integer_in_a_message_file_exits_2(tmp_path):
    path = tmp_path / "long.json"
    path.write_text('[{"role": "user", "content": "hi", "n": ' + "1" * 5000 + "}]")
    res = CliRunner().invoke(cli, ["compress", str(path)])
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr == (
        f"error: {path}: line 1: a number has 5,000 digits, more than the 4,300 that can be read\n"
    )


def test_5000_digit_integer_in_the_config_exits_3(session_file, hermes_home):
    config = hermes_home / "config.yaml"
    config.write_text("model:\n  context_length: " + "1" * 5000 + "\n")
    res = CliRunner().invoke(cli, ["compress", str(session_file)])
    assert (res.exit_code, res.stdout) == (3, "")
    assert res.stderr == (
        f"error: config key 'model.context_length' (line 2 of {config}) is a number with "
        "5,000 digits: use a small integer\n"
    )


@pytest.mark.parametrize("depth", [300, 200_000])
def test_deeply_nested_message_file_exits_2(tmp_path, depth):
    path = tmp_path / "deep.json"
    path.write_text("[" * depth + "]" * depth)
    res = CliRunner().invoke(cli, ["compress", str(path)])
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr == (
        f"error: {path}: JSON nested too deeply (messages nest at most 100 levels)\n"
    )


def test_stdin_not_utf8_exits_2():
    res = CliRunner().invoke(cli, ["compress", "-"], input=b'[{"role": "user", "content": "\xff"}]')
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr == "error: <stdin>: not UTF-8 text (byte 30)\n"


@pytest.mark.parametrize(
    ("args", "label"),
    [
        (["compress", "\udcff.json"], "'[INPUT]'"),
        (["compress", "x.json", "--focus", "caf\udce9"], "'--focus'"),
        (["compress", "x.json", "-o", "out\udcff.json"], "'-o' / '--output'"),
        (["config", "show", "--home", "/tmp/\udcff"], "'--home'"),
        (["config", "path", "--home", "/tmp/\udcff"], "'--home'"),
    ],
)
def test_arguments_that_are_not_utf8_exit_2(args, label):
    res = CliRunner().invoke(cli, args)
    assert (res.exit_code, res.stdout) == (2, "")
    [line] = res.stderr.splitlines()
    assert line.startswith(f"error: argument {label} is not valid UTF-8 (b'")
    assert line.endswith("): pass UTF-8 text (rename a file whose name is not UTF-8)")
    assert isinstance(res.exception, SystemExit)


SURROGATES = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "half an emoji \ud83d and a stray \udcff"},
    {"role": "assistant", "content": "ok"},
]


def test_lone_surrogates_survive_json_output(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SURROGATES))  # ASCII text with \\ud83d escapes
    res = CliRunner().invoke(cli, ["compress", str(path), "--json"])
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["messages"] == SURROGATES
    out = tmp_path / "out.jsonl"
    res = CliRunner().invoke(cli, ["compress", str(path), "-o", str(out)])
    assert res.exit_code == 0, res.stderr
    assert [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] == (
        SURROGATES
    )


def test_installed_script_refuses_non_utf8_bytes(tmp_path):
    exe = shutil.which("hermes-context", path=str(Path(sys.executable).parent))
    assert exe, "the console script is not installed"

    def sh(*args, stdin=b""):
        return subprocess.run(
            [exe, *args], input=stdin, cwd=tmp_path, capture_output=True, timeout=60
        )

    proc = sh("compress", b"caf\xe9.json")
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert proc.stderr == (
        b"error: argument '[INPUT]' is not valid UTF-8 (b'caf\\xe9.json'): "
        b"pass UTF-8 text (rename a file whose name is not UTF-8)\n"
    )
    proc = sh("compress", "-", stdin=b'[{"role": "user", "content": "\xff"}]')
    assert (proc.returncode, proc.stderr) == (2, b"error: <stdin>: not UTF-8 text (byte 30)\n")
