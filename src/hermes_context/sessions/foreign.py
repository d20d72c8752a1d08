"""Other agents' transcripts read as sessions: Claude Code, Codex CLI, OpenAI chat JSONL.

Pure functions: a file's bytes in, ``ParsedFile`` out (its sessions with their
messages, metadata and compaction boundaries, and the lines that could not be
read). Nothing here touches the store; ``foreign_sync`` stores the result.

Every session comes out as a valid chat-completions history (see ``history``):
consecutive assistant pieces (text and several tool calls) are one assistant
message, every tool result follows the message holding its call, a call whose
result never came gets a stand-in result, and a result whose call is missing
becomes a plain user message saying so. A file that is still being written
ends in a turn that may change (more tool calls, results still to come): the
messages from that turn on are reported as not ``stable``, so importing the
file again once it has grown can replace them.

The formats, what maps to what and the limits are described in
``docs/importing.md``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..messages import content_text, without_lone_surrogates
from .history import Compaction, History

FORMAT_CLAUDE_CODE = "claude-code"
FORMAT_CODEX = "codex"
FORMAT_OPENAI_JSONL = "openai-jsonl"
# Formats read here; ``hermes`` (another state.db) is copied by ``SessionDB.import_from``.
FOREIGN_FORMATS = (FORMAT_CLAUDE_CODE, FORMAT_CODEX, FORMAT_OPENAI_JSONL)
# Where each agent keeps its transcripts when no path is given.
DEFAULT_PATHS = {FORMAT_CLAUDE_CODE: "~/.claude/projects", FORMAT_CODEX: "~/.codex/sessions"}
# The transcript files of a folder: Claude Code keeps one per session in a
# folder per project (the folder given may be ``projects`` or one project's);
# Codex keeps rollouts in dated folders.
FILE_PATTERNS = {
    FORMAT_CLAUDE_CODE: ("*.jsonl", "*/*.jsonl"),
    FORMAT_CODEX: ("**/rollout-*.jsonl",),
    FORMAT_OPENAI_JSONL: ("*.jsonl",),
}
# Characters of a title made from the first user message.
TITLE_CHARS = 60
# A title the transcript gives (an AI-written summary line, a thread name) is kept longer.
OWN_TITLE_CHARS = 200
# A session id that names a file after it (Claude Code names transcripts ``<uuid>.jsonl``).
_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
# Timestamps bigger than this are milliseconds (seconds would be past the year 5000).
_MILLISECONDS_FROM = 1e11
# The last second a date can show (9999-12-31T23:59:59Z); later times are not times.
_LATEST = 253_402_300_799.0
# Text that opens a user message written by the agent, not typed: not a title.
_NOT_TITLE_PREFIXES = ("<", "# AGENTS.md", "Caveat: ")


@dataclass(frozen=True)
class SkippedLine:
    """A line that could not be read, kept out of the import.

    Attributes:
        path: The file.
        line: Its 1-based line number.
        reason: Why, in words.
    """

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass
class ParsedSession:
    """One session read from a transcript.

    Attributes:
        key: Our session id for it: ``<format>:<its own id>`` (stable across imports).
        source: The agent it comes from (the format name).
        title: The format's own title or summary, else the first user text, shortened.
        own_title: Whether ``title`` is the format's own (it then wins over a stored one).
        cwd: The project folder the agent worked in.
        git_branch: The git branch, where the format records it.
        model: The model that answered, when recorded.
        started_at: The time of its first line (epoch seconds).
        messages: OpenAI chat messages; ``_timestamp`` holds each one's time.
        stable: How many leading messages no later line of the file can change.
        compactions: The agent's compaction boundaries, in order.
    """

    key: str
    source: str
    title: str | None = None
    own_title: bool = False
    cwd: str | None = None
    git_branch: str | None = None
    model: str | None = None
    started_at: float | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    stable: int = 0
    compactions: list[Compaction] = field(default_factory=list)


@dataclass
class ParsedFile:
    """What one transcript file holds.

    Attributes:
        size: Bytes read: the complete lines (a partial last line left for later excluded).
        partial: A last line without its newline was left unread, to retry later.
    """

    path: str
    format: str
    size: int
    sessions: list[ParsedSession] = field(default_factory=list)
    skipped: list[SkippedLine] = field(default_factory=list)
    partial: bool = False


def find_files(fmt: str, path: Path) -> list[Path]:
    """The transcript files of ``fmt`` at ``path`` (a file, or a folder searched), sorted."""
    if not path.is_dir():
        return [path]
    found = {p for pattern in FILE_PATTERNS[fmt] for p in path.glob(pattern) if p.is_file()}
    return sorted(found)


def parse_file(path: Path, fmt: str, *, final: bool = True) -> ParsedFile:
    """Read one transcript file (see ``parse_bytes``).

    Raises:
        OSError: the file cannot be read.
    """
    return parse_bytes(path.read_bytes(), fmt, path=str(path), final=final)


def parse_bytes(data: bytes, fmt: str, *, path: str, final: bool = True) -> ParsedFile:
    """Read a transcript's bytes as sessions.

    Args:
        path: The file's name, for the skipped lines and the session ids.
        final: Whether the file is complete. A last line without its newline
            that is not JSON is then a truncated line (skipped, reported);
            otherwise it is still being written and is left for the next read.

    Raises:
        ValueError: ``fmt`` is not one of ``FOREIGN_FORMATS``.
    """
    if fmt not in _PARSERS:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FOREIGN_FORMATS)}")
    records, parsed = _records(data, fmt, path=path, final=final)
    parsed.sessions = [s for s in _PARSERS[fmt](records, path, parsed.skipped) if s.messages]
    return parsed


# -- lines --------------------------------------------------------------------


def _records(
    data: bytes, fmt: str, *, path: str, final: bool
) -> tuple[list[tuple[int, dict[str, Any]]], ParsedFile]:
    """The JSON objects of the file's lines, with their line numbers; skipped lines noted.

    Lines are split on ``\\n`` only: JSON text may hold U+2028 and other
    characters Python's ``splitlines`` would break on.
    """
    lines = data.split(b"\n")
    last = lines.pop()  # what follows the last newline: b"" when the file ends with one
    parsed = ParsedFile(path=path, format=fmt, size=len(data) - len(last))
    records: list[tuple[int, dict[str, Any]]] = []
    for number, raw in enumerate(lines, 1):
        _read_line(raw, number, path, records, parsed.skipped)
    if last.strip():
        obj, _ = _decode(last)
        if isinstance(obj, dict):  # complete JSON whose newline is not written yet
            records.append((len(lines) + 1, obj))
            parsed.size = len(data)
        elif final:
            reason = "truncated last line (no newline, not complete JSON)"
            parsed.skipped.append(SkippedLine(path, len(lines) + 1, reason))
            parsed.size = len(data)
        else:
            parsed.partial = True
    return records, parsed


def _read_line(
    raw: bytes,
    number: int,
    path: str,
    records: list[tuple[int, dict[str, Any]]],
    skipped: list[SkippedLine],
) -> None:
    if not raw.strip():
        return
    obj, problem = _decode(raw)
    if problem is not None:
        skipped.append(SkippedLine(path, number, problem))
    elif not isinstance(obj, dict):
        skipped.append(SkippedLine(path, number, f"expected a JSON object, got {_kind(obj)}"))
    elif not isinstance(obj.get("type", ""), str):
        skipped.append(SkippedLine(path, number, f"'type' is {_kind(obj['type'])}, not a string"))
    else:
        records.append((number, obj))


def _decode(raw: bytes) -> tuple[Any, str | None]:
    """A line's JSON value, or None and the reason it is not JSON."""
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (byte {exc.start})"
    try:
        return json.loads(text), None
    except RecursionError:
        return None, "JSON nested too deeply"
    except ValueError as exc:
        return None, f"invalid JSON ({exc})"


@contextmanager
def _line_of(path: str, number: int, skipped: list[SkippedLine]) -> Iterator[None]:
    """Skip (and note) a line whose fields have shapes the format never writes."""
    try:
        yield
    except (TypeError, AttributeError, KeyError, ValueError, RecursionError) as exc:
        skipped.append(SkippedLine(path, number, f"unexpected shape ({type(exc).__name__}: {exc})"))


def _kind(value: Any) -> str:
    kinds = {list: "an array", dict: "an object", str: "a string", type(None): "null"}
    return kinds.get(type(value), "a number")


# -- shared helpers -------------------------------------------------------------


def parse_time(value: Any) -> float | None:
    """Epoch seconds from an ISO-8601 string or a number (seconds, milliseconds,
    microseconds or nanoseconds); None for anything else, or a time before 1970 or
    after 9999 (which no program can show as a date)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:
            return None
        for scale in (1e9, 1e6, 1e3):  # nanoseconds, microseconds, milliseconds
            if seconds > _MILLISECONDS_FROM * scale / 1e3:
                seconds /= scale
                break
        return seconds if math.isfinite(seconds) and 0 < seconds <= _LATEST else None
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value.strip())
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp()
    except (ValueError, OverflowError):
        return None
    return seconds if 0 < seconds <= _LATEST else None


def _own_title(title: str | None) -> str | None:
    """A title the transcript gives, on one line and at most ``OWN_TITLE_CHARS`` long."""
    if title is None:
        return None
    flat = " ".join(without_lone_surrogates(title).split())
    return flat if len(flat) <= OWN_TITLE_CHARS else flat[: OWN_TITLE_CHARS - 1] + "…"


def short_title(text: str) -> str | None:
    """A title from a user's text: its first line, whitespace collapsed, shortened."""
    if text.startswith(_NOT_TITLE_PREFIXES):
        return None
    line = next((ln for ln in text.splitlines() if ln.strip()), "")
    flat = " ".join(without_lone_surrogates(line).split())
    if not flat:
        return None
    return flat if len(flat) <= TITLE_CHARS else flat[: TITLE_CHARS - 1] + "…"


def _text(value: Any) -> str | None:
    """A string field as storable text (lone surrogates replaced), or None."""
    if not isinstance(value, str) or not value.strip():
        return None
    return without_lone_surrogates(value)


def _parts_text(parts: Any) -> str:
    """The text of a list of content blocks; images and documents as a marker."""
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return "" if parts is None else json.dumps(parts, ensure_ascii=False)
    texts = []
    for part in parts:
        if isinstance(part, Mapping) and "image" in str(part.get("type", "")):
            texts.append("[image]")
        elif isinstance(part, Mapping) and part.get("type") == "document":
            texts.append("[document]")
        elif isinstance(part, Mapping) and isinstance(part.get("url"), str):
            texts.append(f"{part.get('title') or ''} {part['url']}".strip())
        else:
            texts.append(content_text([part]))
    return "\n".join(t for t in texts if t)


def _arguments(value: Any) -> str:
    """Tool-call arguments as the JSON string OpenAI's format wants."""
    if isinstance(value, str):
        return value
    return json.dumps({} if value is None else value, ensure_ascii=False)


def _file_id(path: str) -> str:
    """A short id for a file without one of its own: its stem and a hash of its path."""
    digest = hashlib.sha1(str(Path(path).resolve()).encode("utf-8", "replace")).hexdigest()
    return f"{Path(path).stem}-{digest[:8]}"


@dataclass
class _Meta:
    """Session metadata gathered from the lines, first value wins."""

    cwd: str | None = None
    git_branch: str | None = None
    model: str | None = None
    started_at: float | None = None
    title: str | None = None
    own_title: str | None = None

    def note(self, **values: Any) -> None:
        for name, value in values.items():
            if getattr(self, name) is None and value is not None:
                setattr(self, name, value)

    def session(self, key: str, source: str, history: History) -> ParsedSession:
        messages, stable, compactions = history.finish()
        return ParsedSession(
            key=without_lone_surrogates(key),
            source=source,
            title=_own_title(self.own_title) or self.title,
            own_title=self.own_title is not None,
            cwd=self.cwd,
            git_branch=self.git_branch,
            model=self.model,
            started_at=self.started_at,
            messages=messages,
            stable=stable,
            compactions=compactions,
        )


# -- Claude Code -------------------------------------------------------------------

# Lines that carry a title for the whole session, best first, with the key holding it.
_CLAUDE_TITLES = {"custom-title": "customTitle", "ai-title": "aiTitle", "summary": "summary"}


class _ClaudeSession:
    """The history and metadata of one Claude Code conversation (main or a sidechain)."""

    def __init__(self) -> None:
        self.history = History()
        self.meta = _Meta()


def _parse_claude(
    records: Sequence[tuple[int, dict[str, Any]]], path: str, skipped: list[SkippedLine]
) -> list[ParsedSession]:
    """Claude Code: the main conversation, and one session per sidechain (subagent)."""
    conversations: dict[str, _ClaudeSession] = {}
    titles: dict[str, str] = {}
    base: str | None = None
    for number, obj in records:
        with _line_of(path, number, skipped):
            kind = obj.get("type")
            base = base or _text(obj.get("sessionId"))
            if kind in _CLAUDE_TITLES:
                title = _text(obj.get(_CLAUDE_TITLES[kind]))
                if title and kind not in titles:
                    titles[kind] = " ".join(title.split())
            if kind not in ("user", "assistant", "system"):
                continue
            label = _claude_label(obj)
            conversation = conversations.setdefault(label, _ClaudeSession())
            _claude_line(obj, conversation)
    stem = Path(path).stem
    base = stem if _UUID_RE.match(stem) else (base or stem)
    sessions = []
    for label, conversation in conversations.items():
        key = f"{FORMAT_CLAUDE_CODE}:{base}" + ("" if label == "" else f":agent-{label}")
        if label == "":
            own = next((titles[k] for k in _CLAUDE_TITLES if k in titles), None)
            conversation.meta.own_title = own
        sessions.append(conversation.meta.session(key, FORMAT_CLAUDE_CODE, conversation.history))
    return sessions


def _claude_label(obj: Mapping[str, Any]) -> str:
    """Which conversation a line is of: empty for the main one, else its agent's id."""
    if obj.get("isSidechain") is not True:
        return ""
    agent = _text(obj.get("agentId"))
    return re.sub(r"[^A-Za-z0-9_.-]", "_", agent) if agent else "sidechain"


def _claude_line(obj: Mapping[str, Any], conversation: _ClaudeSession) -> None:
    ts = parse_time(obj.get("timestamp"))
    branch = obj.get("gitBranch")
    conversation.meta.note(
        cwd=_text(obj.get("cwd")),
        git_branch=_text(branch) if branch not in ("", "HEAD") else None,
        started_at=ts,
    )
    history = conversation.history
    kind = obj.get("type")
    if kind == "system":
        if obj.get("subtype") == "compact_boundary":
            history.boundary(ts)
        return
    message = obj.get("message")
    if not isinstance(message, Mapping):
        return
    if kind == "assistant":
        model = _text(message.get("model"))
        conversation.meta.note(model=model if model != "<synthetic>" else None)
        _claude_assistant(message.get("content"), ts, history)
    elif obj.get("isCompactSummary") is True:
        history.summary(_parts_text(message.get("content")), ts)
    else:
        _claude_user(message.get("content"), ts, conversation, meta=obj.get("isMeta") is True)


def _claude_assistant(content: Any, ts: float | None, history: History) -> None:
    if isinstance(content, str):
        history.assistant_text(content, ts)
        return
    for block in content if isinstance(content, list) else ():
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            history.assistant_text(block["text"], ts)
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            history.reasoning(block["thinking"], ts)
        elif kind in ("tool_use", "server_tool_use"):
            name = _text(block.get("name")) or "tool"
            history.call(_text(block.get("id")), name, _arguments(block.get("input")), ts)
        elif str(kind).endswith("_tool_result"):  # a server tool's result (web search)
            history.result(_text(block.get("tool_use_id")), _parts_text(block.get("content")), ts)


def _claude_user(
    content: Any, ts: float | None, conversation: _ClaudeSession, *, meta: bool
) -> None:
    """A user line: its tool results first (they answer the turn before), then its text."""
    blocks = content if isinstance(content, list) else [content]
    texts = []
    for block in blocks:
        if isinstance(block, Mapping) and block.get("type") == "tool_result":
            result = block.get("content", block.get("text"))
            error = block.get("is_error") is True
            conversation.history.result(
                _text(block.get("tool_use_id")), _parts_text(result), ts, error=error
            )
        elif block is not None:
            texts.append(_parts_text([block] if isinstance(block, Mapping) else block))
    text = "\n".join(t for t in texts if t)
    if text:
        conversation.history.user(text, ts)
        if not meta:
            conversation.meta.note(title=short_title(text))


# -- Codex CLI -------------------------------------------------------------------

# Response items a rollout of early 2025 wrote without the ``response_item`` wrapper.
_CODEX_ITEMS = frozenset(
    {"message", "function_call", "function_call_output", "reasoning", "local_shell_call"}
)


def _parse_codex(
    records: Sequence[tuple[int, dict[str, Any]]], path: str, skipped: list[SkippedLine]
) -> list[ParsedSession]:
    """Codex CLI: one session per rollout; ``event_msg`` lines repeat items and are ignored
    (but for the thread's name, its own title)."""
    history, meta = History(), _Meta()
    session_id: str | None = None
    for number, obj in records:
        with _line_of(path, number, skipped):
            session_id = _codex_line(number, obj, records[0][0], session_id, history, meta)
    key = f"{FORMAT_CODEX}:{session_id or _codex_file_id(path)}"
    return [meta.session(key, FORMAT_CODEX, history)]


def _codex_line(
    number: int,
    obj: Mapping[str, Any],
    first: int,
    session_id: str | None,
    history: History,
    meta: _Meta,
) -> str | None:
    """Take one rollout line into the history; the session's id once a line gives it."""
    kind, payload = obj.get("type"), obj.get("payload")
    if payload is None and kind in _CODEX_ITEMS:
        kind, payload = "response_item", obj  # the early format: items at the top level
    elif kind is None and number == first and "id" in obj:
        kind, payload = "session_meta", obj  # the early format's first line
    if not isinstance(payload, Mapping):
        return session_id
    ts = parse_time(obj.get("timestamp")) or parse_time(payload.get("timestamp"))
    meta.note(started_at=ts)
    history.tick(ts)
    if kind == "session_meta" and session_id is None:
        session_id = _text(payload.get("id")) or _text(payload.get("session_id"))
        git = payload.get("git")
        branch = git.get("branch") if isinstance(git, Mapping) else None
        meta.note(cwd=_text(payload.get("cwd")), git_branch=_text(branch))
    elif kind == "turn_context":
        meta.note(model=_text(payload.get("model")), cwd=_text(payload.get("cwd")))
    elif kind == "response_item":
        _codex_item(payload, ts, history, meta)
    elif kind == "compacted":
        history.summary(_codex_summary(payload), ts)
    elif kind == "event_msg" and payload.get("type") == "thread_name_updated":
        meta.own_title = _text(payload.get("thread_name")) or meta.own_title  # latest wins
    return session_id


def _codex_file_id(path: str) -> str:
    match = re.search(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})", path)
    return match.group(1) if match else _file_id(path)


def _codex_item(
    payload: Mapping[str, Any], ts: float | None, history: History, meta: _Meta
) -> None:
    kind = str(payload.get("type") or "")
    call_id = _text(payload.get("call_id"))
    if kind == "message":
        role = payload.get("role")
        text = _parts_text(payload.get("content"))
        if role == "assistant":
            history.assistant_text(text, ts)
        elif role in ("user", "system", "developer") and text:
            history.message(role, text, ts)
            if role == "user":
                meta.note(title=short_title(text))
    elif kind.endswith("_call") and call_id:
        name = _text(payload.get("name")) or kind.removesuffix("_call")
        history.call(call_id, name, _codex_arguments(payload), ts)
    elif kind.endswith("_output") and call_id:
        history.result(call_id, _codex_output(payload.get("output")), ts)


def _codex_arguments(payload: Mapping[str, Any]) -> str:
    if "arguments" in payload:
        return _arguments(payload["arguments"])
    if "input" in payload:
        return _arguments({"input": payload["input"]})
    return _arguments(payload.get("action"))


def _codex_output(output: Any) -> str:
    if isinstance(output, Mapping):
        for key in ("output", "content", "text"):
            if isinstance(output.get(key), str):
                return str(output[key])
        return json.dumps(output, ensure_ascii=False)
    return _parts_text(output)


def _codex_summary(payload: Mapping[str, Any]) -> str:
    text = payload.get("message")
    if isinstance(text, str) and text.strip():
        return text
    return "[Codex compacted the conversation here; it recorded no readable summary]"


# -- OpenAI chat JSONL ------------------------------------------------------------


def _parse_openai(
    records: Sequence[tuple[int, dict[str, Any]]], path: str, skipped: list[SkippedLine]
) -> list[ParsedSession]:
    """One message per line (one session), or one ``{"messages": [...]}`` per line (each one).

    The first line decides; a line of the other kind is skipped.
    """
    if not records:
        return []
    base = f"{FORMAT_OPENAI_JSONL}:{_file_id(path)}"
    per_line = isinstance(records[0][1].get("messages"), list)
    if not per_line:
        return [_openai_session(base, _openai_lines(records, path, skipped))]
    sessions = []
    for number, obj in records:
        if not isinstance(obj.get("messages"), list):
            skipped.append(SkippedLine(path, number, 'expected {"messages": [...]} like line 1'))
            continue
        session = _openai_session(f"{base}:{number}", obj["messages"])
        if isinstance(obj.get("title"), str):
            session.title, session.own_title = _own_title(_text(obj["title"])), True
        sessions.append(session)
    return sessions


def _openai_lines(
    records: Sequence[tuple[int, dict[str, Any]]], path: str, skipped: list[SkippedLine]
) -> Iterator[Mapping[str, Any]]:
    for number, obj in records:
        if "role" in obj:
            yield obj
        else:
            skipped.append(
                SkippedLine(path, number, "expected a message with a 'role' like line 1")
            )


def _openai_session(key: str, messages: Iterable[Any]) -> ParsedSession:
    history, meta = History(), _Meta()
    for message in messages:
        if isinstance(message, Mapping):
            ts = parse_time(message.get("timestamp", message.get("_timestamp")))
            meta.note(started_at=ts)
            _openai_message(message, ts, history, meta)
    return meta.session(key, FORMAT_OPENAI_JSONL, history)


def _openai_message(
    message: Mapping[str, Any], ts: float | None, history: History, meta: _Meta
) -> None:
    role, text = message.get("role"), _parts_text(message.get("content"))
    if role == "assistant":
        if text:
            history.assistant_text(text, ts)
        calls = message.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            fn = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(fn, Mapping):
                name = _text(fn.get("name")) or "tool"
                history.call(_text(call.get("id")), name, _arguments(fn.get("arguments")), ts)
        if not text and not (isinstance(calls, list) and calls):
            history.assistant_text("", ts)
    elif role == "tool":
        history.result(_text(message.get("tool_call_id")), text, ts)
    elif role in ("user", "system", "developer"):
        history.message(role, text, ts)
        if role == "user":
            meta.note(title=short_title(text))


_PARSERS = {
    FORMAT_CLAUDE_CODE: _parse_claude,
    FORMAT_CODEX: _parse_codex,
    FORMAT_OPENAI_JSONL: _parse_openai,
}
