"""Reading and writing message files: a JSON array, JSONL, or an object with ``messages``."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..errors import InputFileError, InvalidMessagesError
from ..messages import validate_messages


def _parse_jsonl(name: str, text: str) -> list[Any]:
    items = []
    # Only "\n" ends a JSONL record: U+2028 and friends may sit raw inside strings.
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InputFileError(
                name, f"invalid JSON ({exc.msg})", location=f"line {lineno}"
            ) from None
    return items


def _looks_like_jsonl(text: str) -> bool:
    """JSONL when the first non-blank line is a whole JSON object on its own."""
    first = next((line for line in text.split("\n") if line.strip()), "")
    try:
        return isinstance(json.loads(first), dict)
    except json.JSONDecodeError:
        return False


def parse_messages(name: str, text: str) -> list[dict[str, Any]]:
    """Parse message-file text; errors name the file, the line or message, and the problem."""
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise InputFileError(name, "the file is empty: expected a JSON array of messages")
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        if not _looks_like_jsonl(text):
            raise InputFileError(
                name, f"invalid JSON ({exc.msg})", location=f"line {exc.lineno}"
            ) from None
        data = _parse_jsonl(name, text)
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
        return parse_messages("<stdin>", sys.stdin.read())
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputFileError(path, "no such file") from None
    except IsADirectoryError:
        raise InputFileError(path, "is a folder, not a message file") from None
    except OSError as exc:
        raise InputFileError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(path, f"not UTF-8 text (byte {exc.start})") from None
    return parse_messages(path, text)


def _mode_for(target: Path) -> int:
    """An overwritten file keeps its mode; a new one gets the umask's default."""
    try:
        return target.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_messages(path: str, messages: list[dict[str, Any]]) -> None:
    """Write messages atomically: JSONL for ``.jsonl`` paths, else a JSON array."""
    if path.endswith(".jsonl"):
        text = "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
    else:
        text = json.dumps(messages, ensure_ascii=False, indent=1) + "\n"
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _mode_for(target))
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
