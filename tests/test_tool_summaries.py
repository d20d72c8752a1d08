"""One-line tool result summaries (SPEC 3.3 pass 2)."""

from __future__ import annotations

import json

import pytest

from hermes_context import summarize_tool_result

_47_LINES = "\n".join(f"line {i}" for i in range(47))


@pytest.mark.parametrize(
    ("name", "args", "content", "expected"),
    [
        (
            "terminal",
            {"command": "npm test"},
            json.dumps({"output": _47_LINES, "exit_code": 0}),
            "[terminal] ran `npm test` -> exit 0, 47 lines output",
        ),
        (
            "terminal",
            '{"command": "npm test"}',
            '"exit_code": 2\n' + "x\n" * 3,
            "[terminal] ran `npm test` -> exit 2, 5 lines output",
        ),
        (
            "terminal",
            {"command": "ls"},
            "a\nb",
            "[terminal] ran `ls` -> 2 lines output, ending `b`",
        ),
        ("terminal", {"command": "true"}, "   ", "[terminal] ran `true` -> no output"),
        (
            "terminal",
            {"command": "python run.py"},
            "Traceback (most recent call last):\n  File \"run.py\", line 3\nKeyError: 'rate'\ndone",
            "[terminal] ran `python run.py` -> 4 lines output, showing `KeyError: 'rate'`",
        ),
        (
            "bash",
            {"command": "pytest"},
            "<returncode>1</returncode>\n<output>\nboom\n</output>",
            "[bash] ran `pytest` -> exit 1, 4 lines output",
        ),
        (
            "read_file",
            {"path": "config.py"},
            "x" * 1_200,
            "[read_file] read config.py from line 1 (1,200 chars)",
        ),
        (
            "read_file",
            {"path": "src/a.py", "offset": 40},
            "y" * 10,
            "[read_file] read src/a.py from line 40 (10 chars)",
        ),
        (
            "search_files",
            {"pattern": "compress", "path": "agent/"},
            "\n".join(f"agent/f{i}.py:1: compress" for i in range(12)),
            "[search_files] content search for 'compress' in agent/ -> 12 matches",
        ),
        (
            "search_files",
            {"pattern": "*.py", "target": "files"},
            json.dumps({"total_count": 3, "files": ["a", "b", "c"]}),
            "[search_files] file search for '*.py' in . -> 3 matches",
        ),
        (
            "memory",
            {"action": "add", "target": "user"},
            '{"success": true}',
            "[memory] add on user",
        ),
        (
            "mytool",
            {"a": 1, "b": "v" * 100, "c": 3},
            "r" * 5_000,
            f"[mytool] a=1 b={'v' * 40} (5,000 chars result)",
        ),
        ("mytool", {}, "r" * 10, "[mytool] (10 chars result)"),
        (None, None, "abc", "[tool] (3 chars result)"),
    ],
)
def test_summaries(name, args, content, expected):
    assert summarize_tool_result(name, args, content) == expected


def test_long_command_is_cut_to_77_plus_ellipsis():
    cmd = "python -m pytest " + "tests/test_module_with_a_long_name.py " * 5
    line = summarize_tool_result("terminal", {"command": cmd}, "ok")
    shown = line.split("`")[1]
    assert len(shown) == 80 and shown.endswith("...")
    assert shown[:77] == " ".join(cmd.split())[:77]


def test_non_json_arguments_are_tolerated():
    assert (
        summarize_tool_result("mytool", "not json", "x")
        == "[mytool] input=not json (1 chars result)"
    )
