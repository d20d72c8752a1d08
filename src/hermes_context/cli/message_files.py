"""Reading and writing message files: a JSON array, JSONL, or an object with ``messages``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import InputFileError, InvalidMessagesError
from ..messages import validate_messages
from ._common import BadArgumentError, json_text
from ._files import write_atomically

# Real messages nest a few levels (message, content parts, image_url); deeper
# input is refused before it reaches recursive code (copying, JSON output).
MAX_NESTING = 100
_TOO_DEEP = f"JSON nested too deeply (messages nest at most {MAX_NESTING} levels)"


class _LongNumber(Exception):
    """An integer with more digits than ``int()`` converts (``sys.get_int_max_str_digits``)."""

    def __init__(self, digits: str) -> None:
        super().__init__(digits)
        self.digits = digits


def _parse_int(digits: str) -> int:
    try:
        return int(digits)
    except ValueError:
        raise _LongNumber(digits) from None


def _loads(name: str, text: str, lineno: int | None = None) -> Any:
    """``json.loads``; a ``JSONDecodeError`` passes, other failures become ``InputFileError``."""
    try:
        return json.loads(text, parse_int=_parse_int)
    except RecursionError:
        raise InputFileError(name, _TOO_DEEP) from None
    except _LongNumber as exc:
        if lineno is None:
            lineno = text.count("\n", 0, max(text.find(exc.digits), 0)) + 1
        count = len(exc.digits.lstrip("-"))
        raise InputFileError(
            name,
            f"a number has {count:,} digits, more than the {sys.get_int_max_str_digits():,} "
            "that can be read",
            location=f"line {lineno}",
        ) from None


def _parse_jsonl(name: str, text: str) -> list[Any]:
    items = []
    # Only "\n" ends a JSONL record: U+2028 and friends may sit raw inside strings.
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            items.append(_loads(name, line, lineno))
        except json.JSONDecodeError as exc:
            raise InputFileError(
                name, f"invalid JSON ({exc.msg})", location=f"line {lineno}"
            ) from None
    return items


def _looks_like_jsonl(name: str, text: str) -> bool:
    """JSONL when the first non-blank line is a whole JSON object on its own."""
    first = next((line for line in text.split("\n") if line.strip()), "")
    try:
        return isinstance(_loads(name, first, 1), dict)
    except json.JSONDecodeError:
        return False


def _nesting(data: Any) -> int:
    """How deep lists and objects nest in ``data`` (counted without recursion)."""
    if not isinstance(data, (list, dict)):
        return 0
    deepest, stack = 0, [(data, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, (list, dict)))
    return deepest


def parse_messages(name: str, text: str) -> list[dict[str, Any]]:
    """Parse message-file text; errors name the file, the line or message, and the problem."""
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise InputFileError(name, "the file is empty: expected a JSON array of messages")
    try:
        data: Any = _loads(name, text)
    except json.JSONDecodeError as exc:
        if not _looks_like_jsonl(name, text):
            raise InputFileError(
                name, f"invalid JSON ({exc.msg})", location=f"line {exc.lineno}"
            ) from None
        data = _parse_jsonl(name, text)
    if _nesting(data) > MAX_NESTING:
        raise InputFileError(name, _TOO_DEEP)
    if isinstance(data, dict):
        if "messages" not in data:
            if "role" in data:
                data = [data]
            else:
                raise InputFileError(
                    name, "expected a JSON array of messages or an object with 'messages'"
                )
        else:
            data = data["messages"]
    if not isinstance(data, list):
        raise InputFileError(name, f"'messages' must be a list, got {type(data).__name__}")
    try:
        validate_messages(data, allow_consecutive_roles=True, allow_pending_tool_calls=True)
    except InvalidMessagesError as exc:
        loc = f"message {exc.index}" if exc.index is not None else None
        problem = str(exc).split(": ", 1)[-1] if exc.index is not None else str(exc)
        raise InputFileError(name, problem, location=loc) from None
    return data


def read_messages(path: str) -> list[dict[str, Any]]:
    """Read messages from ``path`` (``-`` is standard input)."""
    if path == "-":
        stdin_bytes = getattr(sys.stdin, "buffer", None)
        if stdin_bytes is None:  # a text-only stream (tests, embedding)
            return parse_messages("<stdin>", sys.stdin.read())
        return parse_messages("<stdin>", _decode("<stdin>", stdin_bytes.read()))
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputFileError(path, "no such file") from None
    except IsADirectoryError:
        raise InputFileError(path, "is a folder, not a message file") from None
    except OSError as exc:
        raise InputFileError(path, f"cannot read: {exc.strerror or exc}") from None
    return parse_messages(path, _decode(path, raw))


def _decode(name: str, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(name, f"not UTF-8 text (byte {exc.start})") from None


def check_output_path(path: str) -> None:
    """Refuse an output file whose folder is missing: no folder is ever created silently.

    Raises:
        BadArgumentError: naming the file and the folder.
    """
    folder = Path(path).parent
    if not folder.is_dir():
        if os.path.lexists(folder):
            problem = f"{folder} is not a folder"
        else:
            problem = f"the folder {folder} does not exist; create it first"
        raise BadArgumentError(f"cannot write {path}: {problem}")


def _mode_for(target: Path) -> int:
    """An overwritten file keeps its mode; a new one gets the umask's default."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_messages(path: str, messages: list[dict[str, Any]]) -> None:
    """Write messages atomically: JSONL for ``.jsonl`` paths, else a JSON array.

    Lone surrogates are written as ``\\uXXXX`` escapes, so the file is UTF-8.

    Raises:
        FileAccessError: the file cannot be written (its folder is never created).
    """
    if path.endswith(".jsonl"):
        text = "".join(json_text(m) + "\n" for m in messages)
    else:
        text = json_text(messages, indent=1) + "\n"
    target = Path(path)
    write_atomically(target, text, mode=_mode_for(target))
