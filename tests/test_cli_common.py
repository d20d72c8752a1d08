"""Shared CLI error handling (cli/_common.py): one line and an exit code, never a traceback."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from hermes_context import fileio
from hermes_context.cli._common import describe_os_error, emit_json, handle_errors, json_text
from hermes_context.cli.main import cli

# Commands that use HERMES_HOME, each with the arguments it needs.
HOME_COMMANDS = [
    ["config", "init"],
    ["config", "show"],
    ["config", "path"],
    ["sessions", "list"],
    ["memory", "show"],
]


def run(*args: str, input=None):
    return CliRunner().invoke(cli, list(args), input=input)


def one_line_error(result, code: int) -> str:
    """The single stderr line of a failed command; checks there was no traceback."""
    assert result.exit_code == code, (result.exit_code, result.stderr)
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ")
    return line


# --- HERMES_HOME that cannot be a folder ---------------------------------------


@pytest.mark.parametrize("args", HOME_COMMANDS, ids=" ".join)
def test_home_is_a_file(monkeypatch, tmp_path, args):
    home = tmp_path / "home-file"
    home.write_text("not a folder")
    monkeypatch.setenv("HERMES_HOME", str(home))
    assert one_line_error(run(*args), 3) == (
        f"error: HERMES_HOME {home} is a file, not a folder: point HERMES_HOME (or --home) "
        "at a folder"
    )
    assert home.read_text() == "not a folder"


@pytest.mark.parametrize("args", HOME_COMMANDS, ids=" ".join)
def test_home_under_a_file(monkeypatch, tmp_path, args):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    home = blocker / "home"
    monkeypatch.setenv("HERMES_HOME", str(home))
    assert one_line_error(run(*args), 3) == (
        f"error: HERMES_HOME {home} cannot be a folder: {blocker} is a file: "
        "point HERMES_HOME (or --home) at a folder"
    )


def test_home_option_under_a_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = run("sessions", "list", "--home", str(blocker / "home"))
    assert "is a file: point HERMES_HOME (or --home) at a folder" in one_line_error(result, 3)


@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="needs Linux /proc")
def test_home_under_proc(monkeypatch):
    monkeypatch.setenv("HERMES_HOME", "/proc/hermes-context-test")
    line = one_line_error(run("config", "init"), 6)
    assert line == (
        "error: cannot create the folder /proc/hermes-context-test: /proc does not accept "
        "new folders"
    )
    line = one_line_error(run("sessions", "list"), 6)
    assert "/proc/hermes-context-test" in line


def test_home_that_cannot_be_written(hermes_home, monkeypatch):
    """A read-only folder, simulated (root ignores permissions); see the real one below."""

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(fileio.tempfile, "mkstemp", denied)
    line = one_line_error(run("config", "init"), 6)
    assert line == f"error: cannot write {hermes_home / 'config.yaml'}: permission denied"
    assert list(hermes_home.iterdir()) == []


def _unprivileged() -> list[str] | None:
    """A prefix that runs a command without the power to ignore file permissions."""
    if os.geteuid() != 0:
        return []
    capsh = shutil.which("capsh")
    if capsh is None:
        return None
    probe = subprocess.run(
        [capsh, "--drop=cap_dac_override,cap_dac_read_search", "--", "-c", "true"],
        capture_output=True,
    )
    return ["--drop=cap_dac_override,cap_dac_read_search"] if probe.returncode == 0 else None


@pytest.mark.parametrize(
    ("args", "code", "expected"),
    [
        (["config", "init"], 6, "error: cannot write {home}/config.yaml: permission denied"),
        (["sessions", "list"], 6, None),
        (["memory", "add", "hello"], 6, None),
    ],
    ids=["config-init", "sessions-list", "memory-add"],
)
def test_read_only_home_for_real(tmp_path, args, code, expected):
    prefix = _unprivileged()
    script = Path(sys.executable).with_name("hermes-context")
    if prefix is None or not script.exists():
        pytest.skip("needs a non-root user or capsh, and the installed script")
    home = tmp_path / "read-only"
    home.mkdir()
    home.chmod(0o555)
    env = {**os.environ, "HERMES_HOME": str(home)}
    command = [str(script), *args]
    if prefix:
        command = [shutil.which("capsh") or "capsh", *prefix, "--", "-c", " ".join(command)]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (code, "")
    [line] = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr and str(home) in line
    if expected:
        assert line == expected.format(home=home)


# --- handle_errors --------------------------------------------------------------


def _command(exc: BaseException):
    @click.command()
    @handle_errors
    def boom() -> None:
        raise exc

    return boom


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (
            OSError(errno.ENOSPC, "No space left on device", "/data/x"),
            6,
            "/data/x: no space left on the device",
        ),
        (
            PermissionError(errno.EACCES, "Permission denied", "/etc/x"),
            6,
            "/etc/x: permission denied",
        ),
        (
            OSError(errno.EROFS, "Read-only file system", "/mnt/x"),
            6,
            "/mnt/x: the file system is read-only",
        ),
        (OSError(errno.EIO, "Input/output error"), 6, "input/output error"),
        (
            UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
            2,
            "the input is not UTF-8 text (byte 0): convert it to UTF-8",
        ),
        (
            UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
            1,
            "cannot print text that is not valid UTF-8 (surrogates not allowed)",
        ),
    ],
    ids=["no-space", "permission", "read-only", "no-path", "decode", "encode"],
)
def test_errors_become_one_line_and_an_exit_code(exc, code, message):
    result = CliRunner().invoke(_command(exc), [])
    assert (result.exit_code, result.stdout, result.stderr) == (code, "", f"error: {message}\n")


def _broken_render(*args, **kwargs):
    raise ZeroDivisionError("division by zero")


def test_an_unexpected_exception_is_one_line_not_a_traceback(monkeypatch):
    monkeypatch.setattr("hermes_context.cli.config_cmd.render_config", _broken_render)
    line = one_line_error(run("config", "show"), 1)
    assert line == (
        "error: internal error: ZeroDivisionError: division by zero "
        "(set HERMES_DEBUG=1 for the traceback)"
    )


def test_an_unexpected_exception_in_json_mode(monkeypatch):
    monkeypatch.setattr("hermes_context.cli.config_cmd.Config.to_dict", _broken_render)
    result = run("config", "show", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout) == {
        "error": {
            "type": "internal_error",
            "message": "internal error: ZeroDivisionError: division by zero "
            "(set HERMES_DEBUG=1 for the traceback)",
        },
        "exit_code": 1,
    }


def test_hermes_debug_shows_the_traceback(monkeypatch):
    monkeypatch.setattr("hermes_context.cli.config_cmd.render_config", _broken_render)
    monkeypatch.setenv("HERMES_DEBUG", "1")
    result = run("config", "show")
    assert isinstance(result.exception, ZeroDivisionError)


def test_a_closed_pipe_stops_quietly():
    result = CliRunner().invoke(_command(BrokenPipeError(errno.EPIPE, "Broken pipe")), [])
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", "")


def test_file_in_the_way_of_a_folder(tmp_path):
    blocker = tmp_path / "state"
    blocker.write_text("x")
    with pytest.raises(FileExistsError) as info:
        blocker.mkdir(parents=True, exist_ok=True)
    assert describe_os_error(info.value) == (
        f"{blocker} is a file, not a folder: move it away or use another path"
    )


# --- arguments that are not UTF-8, in every command -------------------------------


@pytest.mark.parametrize(
    ("args", "label"),
    [
        (["sessions", "list", "--user", "\udcff"], "'--user'"),
        (["sessions", "search", "caf\udce9"], "'QUERY'"),
        (["memory", "add", "likes \udcf0\udc9f"], "'TEXT'"),
        (["config", "init", "--home", "/tmp/\udcff"], "'--home'"),
    ],
)
def test_non_utf8_arguments_are_refused_everywhere(args, label):
    line = one_line_error(run(*args), 2)
    assert line.startswith(f"error: argument {label} is not valid UTF-8 (b'")


def test_long_argument_preview_keeps_both_ends():
    text = "a" * 100 + "\udcff"
    line = one_line_error(run("compress", "--focus", text, "x.json"), 2)
    assert "(b'aaaa" in line and "...aaaa" in line and "aaaa\\xff'):" in line


# --- JSON that is always UTF-8 ----------------------------------------------------


def test_json_text_escapes_only_lone_surrogates():
    data = {"k": "你好 \ud83d 😀 \\ud800 \udcff"}
    text = json_text(data)
    assert text == '{"k": "你好 \\ud83d 😀 \\\\ud800 \\udcff"}'
    text.encode("utf-8")
    import json

    assert json.loads(text) == data


def test_emit_json_with_lone_surrogates():
    @click.command()
    def show() -> None:
        emit_json({"name": "half \ud83d"})

    result = CliRunner().invoke(show, [])
    assert (result.exit_code, result.stdout) == (0, '{\n  "name": "half \\ud83d"\n}\n')


def test_stdin_that_is_not_utf8_for_any_command():
    """The entry point decodes stdin strictly: bad bytes fail where they are read."""
    script = Path(sys.executable).with_name("hermes-context")
    if not script.exists():
        pytest.skip("the hermes-context script is not installed")
    proc = subprocess.run(
        [str(script), "memory", "add", "-"], input=b"caf\xe9", capture_output=True, timeout=60
    )
    assert (proc.returncode, proc.stdout) == (2, b"")
    assert proc.stderr == b"error: the input is not UTF-8 text (byte 3): convert it to UTF-8\n"
