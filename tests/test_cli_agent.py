"""``hermes-context run`` and ``chat`` through the real entry point.

``run`` goes through click's runner; ``chat`` runs as a real process under a
pseudo-terminal (pexpect), talking to the scripted server of this process.
"""

from __future__ import annotations

import io
import json
import os
import sys
import time

import pytest
from click.testing import CliRunner

from hermes_context.cli.agent_cmd import render_usage
from hermes_context.cli.main import cli
from hermes_context.llm.testing import Reply, ScriptedLLMServer


@pytest.fixture
def server():
    with ScriptedLLMServer() as srv:
        yield srv


def invoke(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def model_args(server):
    return ["--base-url", server.base_url, "--model", "scripted-model"]


@pytest.mark.parametrize("command", [["run", "hello"], ["chat"]])
def test_without_a_model_both_say_how_to_configure_one(command):
    result = invoke(*command)
    assert result.exit_code == 3
    assert result.output.count("\n") == 1
    assert "config init" in result.output and "--base-url and --model" in result.output


def test_run_prints_the_answer_and_continues_a_session(server, tmp_path):
    (tmp_path / "app.py").write_text("X = 1\n", encoding="utf-8")
    server.enqueue(
        Reply.tool_calls([{"name": "read_file", "arguments": {"path": "app.py"}, "id": "c1"}])
    )
    server.enqueue(Reply.text("X is one"))
    result = invoke("run", "what is X?", "--cwd", str(tmp_path), *model_args(server))
    assert result.exit_code == 0, result.output
    assert "X is one" in result.stdout
    assert "-> read_file(" in result.stderr

    server.enqueue(Reply.text("still one"))
    first = invoke("run", "again", "--json", *model_args(server))
    data = json.loads(first.stdout)
    assert set(data) == {
        "final_response",
        "session_id",
        "usage",
        "compressions",
        "iterations",
        "interrupted",
    }
    server.enqueue(Reply.text("third"))
    again = invoke(
        "run", "-", "--json", "--session", data["session_id"], *model_args(server), input="and now?"
    )
    assert json.loads(again.stdout)["session_id"] == data["session_id"]
    sent = server.chat_requests[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == ["again", "and now?"]


@pytest.mark.parametrize(
    ("args", "code", "text"),
    [
        (["run", ""], 2, "the prompt is empty"),
        (["run", "hi", "--session", "nope"], 4, "no session 'nope'"),
        (
            ["run", "hi", "--toolsets", "file,bogus"],
            2,
            "unknown toolset 'bogus'; choose from file, memory, session, skills, terminal",
        ),
    ],
)
def test_run_usage_errors(server, args, code, text):
    result = invoke(*args, *model_args(server))
    assert result.exit_code == code and text in result.output


@pytest.mark.parametrize(
    ("args", "code", "kind", "text"),
    [
        (["run", "hi", "--model", "m"], 3, "config_error", "--base-url and --model"),
        (["run", "", "@server"], 2, "usage_error", "the prompt is empty"),
        (["run", "hi", "--session", "nope", "@server"], 4, "not_found", "no session 'nope'"),
        (["run", "hi", "--toolsets", "nope", "@server"], 2, "usage_error", "unknown toolset"),
        (["run", "@server"], 2, "usage_error", "Missing argument 'PROMPT'"),
        (["run", "hi", "--max-iterations", "0", "@server"], 2, "usage_error", "--max-iterations"),
        (["run", "hi", "@server"], 5, "model_error", "401 from"),
    ],
)
def test_run_json_prints_one_json_object_on_every_failure(server, args, code, kind, text):
    server.enqueue(Reply.error(401, "bad key"))
    argv = []
    for arg in args:
        argv.extend(model_args(server) if arg == "@server" else [arg])
    result = invoke(*argv, "--json")
    assert result.exit_code == code, result.output
    document = json.loads(result.stdout)
    assert document == {
        "error": {"type": kind, "message": document["error"]["message"]},
        "exit_code": code,
    }
    assert text in document["error"]["message"]
    assert text in result.stderr


@pytest.mark.parametrize("command", [["run", "hi"], ["chat"], ["review", "some-session"]])
def test_a_base_url_flag_that_is_not_a_url_is_a_config_error_at_once(command):
    started = time.monotonic()
    result = invoke(*command, "--base-url", "not a url", "--model", "m")
    assert time.monotonic() - started < 2
    assert result.exit_code == 3
    assert result.stderr == (
        "error: --base-url must be an http:// or https:// URL with a host, got 'not a url': "
        "e.g. http://localhost:11434/v1 (Ollama), http://localhost:8000/v1 (vLLM) "
        "or https://api.openai.com/v1\n"
    )


def test_run_model_failure_is_one_line_and_exit_5(server):
    server.enqueue(Reply.error(401, "bad key"))
    result = invoke("run", "hi", *model_args(server))
    assert result.exit_code == 5
    assert result.stderr.startswith("error: 401 from") and result.stderr.count("\n") == 1


pexpect = pytest.importorskip("pexpect", reason="pexpect drives chat under a terminal")


def spawn_cli(*args, hermes_home, timeout=20):
    """The real ``hermes-context`` entry point in its own process, under a terminal."""
    command = [sys.executable, "-m", "hermes_context.cli.main"]
    child = pexpect.spawn(
        command[0],
        [*command[1:], *args],
        env={**os.environ, "HERMES_HOME": str(hermes_home), "HERMES_SEMANTIC_SCAN": "off"},
        encoding="utf-8",
        timeout=timeout,
        dimensions=(40, 200),
    )
    child.logfile_read = io.StringIO()  # the whole transcript, for until_exit
    return child


@pytest.fixture
def chat_process(server, hermes_home, tmp_path):
    (tmp_path / "app.py").write_text("X = 1\n", encoding="utf-8")
    child = spawn_cli("chat", "--cwd", str(tmp_path), *model_args(server), hermes_home=hermes_home)
    yield child
    child.close(force=True)


def wait_for_requests(server, count=1, timeout=20.0):
    """Block until the scripted server has received ``count`` chat requests."""
    deadline = time.monotonic() + timeout
    while len(server.chat_requests) < count:
        assert time.monotonic() < deadline, "the model request never arrived"
        time.sleep(0.05)


def test_chat_under_a_terminal(server, chat_process):
    child = chat_process
    child.expect("/help for commands")
    child.expect_exact("you> ")
    server.enqueue(
        Reply.tool_calls([{"name": "read_file", "arguments": {"path": "app.py"}, "id": "c1"}])
    )
    server.enqueue(Reply.text("X equals one, says app.py"))
    child.sendline("what is X?")
    child.expect_exact("-> read_file(")
    child.expect_exact("X equals one, says app.py")
    child.expect(r"\[context \d+% of the compression threshold")
    child.expect_exact("you> ")
    child.sendline("/context")
    child.expect("tool schemas")
    child.expect_exact("you> ")
    child.sendline("/compress")
    child.expect("compressed [0-9,]+ -> [0-9,]+ tokens")
    child.expect_exact("you> ")
    child.sendline("/usage")
    child.expect(r"prompt tokens +[\d,]+\r\n")
    child.expect(r"completion tokens +[\d,]+\r\n")
    child.expect(r"cached tokens +[\d,]+\r\n")
    child.expect_exact("you> ")
    child.sendline("/sessions")
    child.expect(r"\d{8}_\d{6}_\w+ +\d+ msgs")
    child.expect_exact("you> ")
    child.sendline("/search equals")  # the user's own conversation is searched too
    child.expect(r"\d{8}_\d{6}_\w+ \(this session\) #\d+ assistant: X equals one")
    child.expect_exact("you> ")
    child.sendline("/search zebra")
    child.expect_exact("no matches")
    child.expect_exact("you> ")
    child.sendline("/memory")
    child.expect_exact("(no memory loaded)")
    child.expect_exact("you> ")
    child.sendline("/bogus")
    child.expect("unknown command /bogus")
    child.expect_exact("you> ")
    child.sendline("/new")
    child.expect(r"session \d{8}_")
    child.expect_exact("you> ")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_chat_ctrl_d_leaves_and_history_is_kept(server, chat_process, hermes_home):
    child = chat_process
    child.expect_exact("you> ")
    server.enqueue(Reply.text("pong"))
    child.sendline("ping")
    child.expect_exact("pong")
    child.expect_exact("you> ")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "ping" in (hermes_home / "chat_history").read_text(encoding="utf-8")


def until_exit(child) -> str:
    """Everything the process printed, once it has exited (it is then closed)."""
    child.expect(pexpect.EOF)
    child.close()
    return child.logfile_read.getvalue()


def start_slow_turn(child, server, *, seconds: float, after: str = "") -> None:
    """Send a prompt whose answer takes ``seconds``, and press Ctrl-C once it is asked."""
    server.enqueue(Reply.delay(seconds, Reply.text("the answer came too late")))
    if after:
        child.expect_exact(after)
        child.sendline("hello")
    wait_for_requests(server)
    child.sendintr()


def test_ctrl_c_stops_run_with_exit_130(server, hermes_home):
    child = spawn_cli("run", "hello", *model_args(server), hermes_home=hermes_home)
    start_slow_turn(child, server, seconds=2)
    output = until_exit(child)
    assert (child.exitstatus, child.signalstatus) == (130, None), output
    assert "Traceback" not in output and "--session" in output
    assert "the answer came too late" not in output


def test_a_second_ctrl_c_leaves_run_at_once(server, hermes_home):
    child = spawn_cli("run", "hello", *model_args(server), hermes_home=hermes_home, timeout=15)
    start_slow_turn(child, server, seconds=60)
    child.expect("interrupting")
    started = time.monotonic()
    child.sendintr()
    output = until_exit(child)
    assert (child.exitstatus, child.signalstatus) == (130, None), output
    assert time.monotonic() - started < 10
    assert "Traceback" not in output and "--session" in output


def test_run_json_interrupted_prints_the_error_object(server, hermes_home):
    child = spawn_cli("run", "hello", "--json", *model_args(server), hermes_home=hermes_home)
    start_slow_turn(child, server, seconds=2)
    output = until_exit(child)
    assert child.exitstatus == 130, output
    document = json.loads(output[output.index("{") :])
    assert document["exit_code"] == 130
    assert document["error"]["type"] == "interrupted"
    assert "--session" in document["error"]["message"]


def test_ctrl_c_in_chat_returns_to_the_prompt(server, chat_process):
    child = chat_process
    start_slow_turn(child, server, seconds=2, after="you> ")
    child.expect_exact("[interrupted]")
    child.expect_exact("you> ")
    server.enqueue(Reply.text("pong"))
    child.sendline("ping")
    child.expect_exact("pong")
    child.expect_exact("you> ")
    child.sendline("/quit")
    output = until_exit(child)
    assert child.exitstatus == 0
    assert "Traceback" not in output and "the answer came too late" not in output


def test_a_second_ctrl_c_leaves_chat(server, chat_process):
    child = chat_process
    start_slow_turn(child, server, seconds=60, after="you> ")
    child.expect("interrupting")
    child.sendintr()
    output = until_exit(child)
    assert (child.exitstatus, child.signalstatus) == (130, None), output
    assert "Traceback" not in output and "--session" in output


def test_usage_is_readable_lines_with_thousands_separators():
    usage = {"prompt_tokens": 1_234_567, "completion_tokens": 8_901, "cached_tokens": 0}
    assert render_usage(usage) == (
        "prompt tokens        1,234,567\n"
        "completion tokens        8,901\n"
        "cached tokens                0"
    )
