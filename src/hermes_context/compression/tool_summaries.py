"""One-line summaries of tool results, used when old tool output is pruned (SPEC 3.3)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..messages import content_text, json_loads_or_none, without_lone_surrogates
from .observations import key_lines

# Commands longer than this are cut to COMMAND_CUT chars + "...".
COMMAND_MAX_CHARS = 80
COMMAND_CUT = 77
# An output without an exit code is named by its error line or last line, this long at most.
OUTCOME_CHARS = 80
# Argument values of unknown tools are cut to this many characters.
ARG_VALUE_MAX_CHARS = 40

TERMINAL_TOOLS = frozenset(
    {"terminal", "bash", "shell", "run_command", "execute_command", "run_shell_command", "exec"}
)
READ_TOOLS = frozenset({"read_file", "view_file", "open_file", "cat"})
SEARCH_TOOLS = frozenset({"search_files", "grep", "search", "find_files", "ripgrep"})
WRITE_TOOLS = frozenset({"write_file", "create_file"})
EDIT_TOOLS = frozenset({"patch", "edit_file", "apply_patch", "str_replace", "replace_in_file"})

_EXIT_CODE_RES = (
    re.compile(r'"exit_code"\s*:\s*(-?\d+)'),
    re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),
    re.compile(r"\bexit(?:ed with)?[ _]code[:\s]+(-?\d+)", re.IGNORECASE),
)


def parse_arguments(args: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict: JSON strings are parsed, anything else wrapped."""
    if isinstance(args, Mapping):
        return dict(args)
    if isinstance(args, str) and args.strip():
        parsed = json_loads_or_none(args)
        if parsed is None and args.strip() != "null":
            return {"input": args}  # not JSON, or nested too deep to be arguments
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {}


def _first(args: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if args.get(key) not in (None, ""):
            return args[key]
    return default


def _line_count(text: str) -> int:
    return text.count("\n") + 1 if text.strip() else 0


def exit_code_of(text: str) -> str:
    """The exit code a terminal result reports, or ``?``."""
    for pattern in _EXIT_CODE_RES:
        match = pattern.search(text)
        if match:
            return match.group(1)
    return "?"


def _terminal_output(text: str) -> str:
    """The printed output of a terminal result that wraps it in JSON (``{"output": ...}``)."""
    if not text.startswith("{"):
        return text
    data = json_loads_or_none(text)
    if isinstance(data, dict):
        for key in ("output", "stdout", "result"):
            if isinstance(data.get(key), str):
                stderr = data.get("stderr")
                return data[key] + (f"\n{stderr}" if isinstance(stderr, str) and stderr else "")
    return text


def _terminal(name: str, args: Mapping[str, Any], text: str) -> str:
    command = str(_first(args, "command", "cmd", "input", default=""))
    command = " ".join(command.split())
    if len(command) > COMMAND_MAX_CHARS:
        command = command[:COMMAND_CUT] + "..."
    output = _terminal_output(text)
    lines = _line_count(output)
    code = exit_code_of(text)
    if code != "?":
        return f"[{name}] ran `{command}` -> exit {code}, {lines:,} lines output"
    return f"[{name}] ran `{command}` -> {_outcome(output, lines)}"


def _outcome(output: str, lines: int) -> str:
    """What an output without an exit code shows: its error line, or how it ends."""
    if not lines:
        return "no output"
    shown = key_lines(output)
    last = (
        shown[-1]
        if shown
        else next((ln.strip() for ln in reversed(output.splitlines()) if ln.strip()), "")
    )
    if len(last) > OUTCOME_CHARS:
        last = last[: OUTCOME_CHARS - 3] + "..."
    return f"{lines:,} lines output, {'showing' if shown else 'ending'} `{last}`"


def _read(name: str, args: Mapping[str, Any], text: str) -> str:
    path = _first(args, "path", "file_path", "filename", "file", default="?")
    start = _first(args, "offset", "start_line", "line", "start", default=1)
    return f"[{name}] read {path} from line {start} ({len(text):,} chars)"


def _match_count(text: str) -> int:
    data = json_loads_or_none(text)
    if isinstance(data, dict):
        for key in ("total_count", "count", "total"):
            if isinstance(data.get(key), int):
                return data[key]
        for key in ("matches", "results", "files"):
            if isinstance(data.get(key), list):
                return len(data[key])
    if isinstance(data, list):
        return len(data)
    return sum(1 for line in text.splitlines() if line.strip())


def _search(name: str, args: Mapping[str, Any], text: str) -> str:
    pattern = _first(args, "pattern", "query", "regex", "q", default="")
    path = _first(args, "path", "directory", "dir", default=".")
    kind = (
        "file"
        if str(args.get("target", "")).lower() in ("files", "file", "filename")
        else "content"
    )
    return f"[{name}] {kind} search for '{pattern}' in {path} -> {_match_count(text):,} matches"


def _memory(name: str, args: Mapping[str, Any], text: str) -> str:
    return f"[{name}] {args.get('action', '?')} on {args.get('target', '?')}"


def _write(name: str, args: Mapping[str, Any], text: str) -> str:
    path = _first(args, "path", "file_path", "filename", default="?")
    body = _first(args, "content", "text", default="")
    return f"[{name}] wrote {path} ({len(str(body)):,} chars)"


def _edit(name: str, args: Mapping[str, Any], text: str) -> str:
    path = _first(args, "path", "file_path", "filename", default="?")
    return f"[{name}] edited {path} ({len(text):,} chars result)"


def _value(value: Any) -> str:
    raw = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    raw = " ".join(raw.split())
    return raw[:ARG_VALUE_MAX_CHARS]


def _generic(name: str, args: Mapping[str, Any], text: str) -> str:
    shown = " ".join(f"{key}={_value(val)}" for key, val in list(args.items())[:2])
    prefix = f"[{name}] {shown} " if shown else f"[{name}] "
    return f"{prefix}({len(text):,} chars result)"


_HANDLERS: list[tuple[frozenset[str], Callable[[str, Mapping[str, Any], str], str]]] = [
    (TERMINAL_TOOLS, _terminal),
    (READ_TOOLS, _read),
    (SEARCH_TOOLS, _search),
    (frozenset({"memory"}), _memory),
    (WRITE_TOOLS, _write),
    (EDIT_TOOLS, _edit),
]


def summarize_tool_result(tool_name: str | None, args: Any, content: Any) -> str:
    """Summarise a tool result in one line, e.g. ``[terminal] ran `npm test` -> exit 0, 47 lines output``.

    Args:
        tool_name: The function name of the tool call (``"tool"`` when unknown).
        args: The call's arguments, a dict or a JSON string.
        content: The result content (string or parts).
    """
    name = tool_name or "tool"
    parsed = parse_arguments(args)
    text = content_text(content)
    for names, handler in _HANDLERS:
        if name in names:
            return without_lone_surrogates(handler(name, parsed, text))
    return without_lone_surrogates(_generic(name, parsed, text))
