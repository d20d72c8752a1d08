"""The ``file`` toolset: read_file, search_files, write_file, patch.

Every path goes through ``sandbox.resolve_path``: it must stay under the
workspace root and must not name a secret. Results are JSON objects; a
refused or failed call is ``{"error": ...}`` saying what to do instead.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

from ..fileio import write_text_atomically
from .bounded_regex import BoundedRegex, RegexTooSlow
from .registry import Tool, ToolContext
from .sandbox import PathRefused, relative_display, resolve_path, walk_files

# Lines read_file returns when the model gives no limit, and at most.
DEFAULT_READ_LINES = 500
MAX_READ_LINES = 2_000
# A line longer than this is cut in read_file and search results (minified files).
MAX_LINE_CHARS = 2_000
# Bytes sniffed for NUL to tell binary files from text.
BINARY_SNIFF_BYTES = 8_192
# Files bigger than this are skipped by search_files and refused by patch, and
# write_file and patch refuse to make one (a replace_all could grow 1 MB to 48).
MAX_TEXT_FILE_BYTES = 5_000_000
# Matches search_files returns at most, and files it looks at at most.
MAX_SEARCH_MATCHES = 200
MAX_SEARCH_FILES = 20_000
# Directories search_files never walks into.
SKIPPED_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", ".tox"})


def _path(args: dict[str, Any], ctx: ToolContext, *, write: bool = False) -> Path:
    raw = args.get("path")
    if not isinstance(raw, str):
        raise PathRefused("'path' must be a string path inside the workspace")
    return resolve_path(
        raw, cwd=ctx.workspace, roots=[ctx.workspace], hermes_home=ctx.hermes_home, write=write
    )


def _int(args: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    value = args.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"'{key}' must be an integer from {low} to {high}")
    return min(max(value, low), high)


def _is_binary(path: Path) -> bool:
    with path.open("rb") as fh:
        return b"\x00" in fh.read(BINARY_SNIFF_BYTES)


def _clip_line(line: str) -> str:
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [line cut]"


def read_file(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Lines ``offset`` (1-based) to ``offset + limit - 1`` of a text file, numbered."""
    try:
        path = _path(args, ctx)
        offset = _int(args, "offset", 1, 1, 10**9)
        limit = _int(args, "limit", DEFAULT_READ_LINES, 1, MAX_READ_LINES)
    except ValueError as exc:
        return {"error": str(exc)}
    shown = relative_display(path, [ctx.workspace])
    if not path.is_file():
        return {"error": f"{shown} is not a file; use search_files to find the right path"}
    if _is_binary(path):
        return {"error": f"{shown} is a binary file ({path.stat().st_size:,} bytes); not shown"}
    lines: list[str] = []
    total = 0
    with path.open(encoding="utf-8", errors="replace") as fh:
        for total, line in enumerate(fh, start=1):
            if offset <= total < offset + limit:
                lines.append(f"{total:>6}\t{_clip_line(line.rstrip(chr(10)))}")
    end = offset + len(lines) - 1
    out: dict[str, Any] = {"path": shown, "total_lines": total, "content": "\n".join(lines)}
    if lines:
        out["lines"] = f"{offset}-{end}"
    elif total:
        out["error"] = f"offset {offset} is past the end ({total} lines)"
    if end < total and lines:
        out["next_offset"] = end + 1
    return out


def search_files(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Lines matching a regular expression in files matching a glob, under ``path``.

    The pattern runs under one deadline for the whole call (``BoundedRegex``):
    a pattern that backtracks without end, or a search over too much, stops
    with an error and the matches found so far.
    """
    pattern = args.get("pattern")
    glob = args.get("glob") or "*"
    if not isinstance(pattern, str) or not pattern:
        return {"error": "'pattern' (a regular expression) is required"}
    if not isinstance(glob, str):
        return {"error": "'glob' must be a string such as '*.py'"}
    try:
        matcher = BoundedRegex(pattern)
        base = _path({"path": args.get("path") or "."}, ctx)
        limit = _int(args, "limit", 50, 1, MAX_SEARCH_MATCHES)
    except ValueError as exc:
        return {"error": str(exc)}
    matches: list[dict[str, Any]] = []
    files = 0
    walk = walk_files(
        base, roots=[ctx.workspace], hermes_home=ctx.hermes_home, skip_dirs=SKIPPED_DIRS
    )
    for path in walk:
        if ctx.cancel.is_set():
            break
        rel = relative_display(path, [ctx.workspace])
        if not (fnmatch.fnmatch(path.name, glob) or fnmatch.fnmatch(rel, glob)):
            continue
        files += 1
        if files > MAX_SEARCH_FILES:
            break
        try:
            if _search_file(matcher, path, rel, matches, limit):
                return {"matches": matches, "truncated": True}
        except RegexTooSlow as exc:
            return {"error": str(exc), "matches": matches, "truncated": True}
    return {"matches": matches, "truncated": False, "files_searched": min(files, MAX_SEARCH_FILES)}


def _search_file(
    matcher: BoundedRegex, path: Path, rel: str, matches: list[dict[str, Any]], limit: int
) -> bool:
    """Append the matching lines of one file; True once ``limit`` matches are found."""
    if _skip_file(path):
        return False
    text = path.read_text(encoding="utf-8", errors="replace")
    for number, line in matcher.matching_lines(text):
        matches.append({"path": rel, "line": number, "text": _clip_line(line.rstrip())})
        if len(matches) >= limit:
            return True
    return False


def _skip_file(path: Path) -> bool:
    try:
        return path.stat().st_size > MAX_TEXT_FILE_BYTES or _is_binary(path)
    except OSError:
        return True


def write_file(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Write ``content`` to ``path`` (parents created), atomically."""
    content = args.get("content")
    if not isinstance(content, str):
        return {"error": "'content' (the whole new file text) is required"}
    try:
        path = _path(args, ctx, write=True)
    except ValueError as exc:
        return {"error": str(exc)}
    if path.is_dir():
        return {"error": f"{args['path']} is a directory"}
    too_big = _too_big(_utf8_len(content), "the file")
    if too_big:
        return {"error": too_big}
    existed = path.exists()
    _atomic_write(path, content)
    return {
        "path": relative_display(path, [ctx.workspace]),
        "written_chars": len(content),
        "lines": content.count("\n") + (1 if content and not content.endswith("\n") else 0),
        "created": not existed,
    }


def patch(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    """Replace the exact text ``old_string`` with ``new_string`` in ``path``."""
    old, new = args.get("old_string"), args.get("new_string")
    if not isinstance(old, str) or not old:
        return {"error": "'old_string' (the exact text to replace, non-empty) is required"}
    if not isinstance(new, str):
        return {"error": "'new_string' (the replacement text) is required"}
    try:
        path = _path(args, ctx, write=True)
    except ValueError as exc:
        return {"error": str(exc)}
    shown = relative_display(path, [ctx.workspace])
    if not path.is_file():
        return {"error": f"{shown} does not exist; create it with write_file"}
    if path.stat().st_size > MAX_TEXT_FILE_BYTES or _is_binary(path):
        return {"error": f"{shown} is binary or too large to patch"}
    text = path.read_text(encoding="utf-8")
    count = text.count(old)
    if count == 0:
        return {"error": f"old_string was not found in {shown}; read the file and copy it exactly"}
    if count > 1 and not args.get("replace_all"):
        return {
            "error": f"old_string occurs {count} times in {shown}; add surrounding lines to "
            "make it unique, or set replace_all"
        }
    size = len(text.encode("utf-8")) + count * (_utf8_len(new) - _utf8_len(old))
    too_big = _too_big(size, "the patched file")
    if too_big:
        return {"error": too_big}
    first_line = text[: text.index(old)].count("\n") + 1
    _atomic_write(path, text.replace(old, new))
    return {"path": shown, "replacements": count, "line": first_line}


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _too_big(size: int, what: str) -> str | None:
    """The error for a file result over ``MAX_TEXT_FILE_BYTES``, or None."""
    if size <= MAX_TEXT_FILE_BYTES:
        return None
    return (
        f"{what} would be {size:,} bytes, over the {MAX_TEXT_FILE_BYTES:,}-byte limit of "
        "the file tools; split it into several files or generate it with a script"
    )


def _atomic_write(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    write_text_atomically(path, content, mode=mode)


def _schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_PATH = {"type": "string", "description": "Path relative to the workspace root."}

FILE_TOOLS = (
    Tool(
        _schema(
            "read_file",
            "Read a text file from the workspace, with line numbers. Long files come in pages: "
            "pass the result's next_offset as offset to read on.",
            {
                "path": _PATH,
                "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_READ_LINES,
                    "description": f"Lines to read (default {DEFAULT_READ_LINES}).",
                },
            },
            ["path"],
        ),
        "file",
        read_file,
    ),
    Tool(
        _schema(
            "search_files",
            "Find lines matching a regular expression in workspace files whose name matches a "
            "glob (e.g. '*.py'). Returns path, line number and text of each match.",
            {
                "pattern": {"type": "string", "description": "Python regular expression."},
                "glob": {"type": "string", "description": "File name glob (default '*')."},
                "path": {"type": "string", "description": "Folder to search (default: root)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_MATCHES},
            },
            ["pattern"],
        ),
        "file",
        search_files,
    ),
    Tool(
        _schema(
            "write_file",
            "Create or overwrite a workspace file with the given content (folders are created).",
            {"path": _PATH, "content": {"type": "string", "description": "The whole file text."}},
            ["path", "content"],
        ),
        "file",
        write_file,
    ),
    Tool(
        _schema(
            "patch",
            "Edit a workspace file by exact search and replace: old_string must occur exactly "
            "once (or set replace_all).",
            {
                "path": _PATH,
                "old_string": {"type": "string", "description": "Exact text to replace."},
                "new_string": {"type": "string", "description": "Replacement text."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
            },
            ["path", "old_string", "new_string"],
        ),
        "file",
        patch,
    ),
)
