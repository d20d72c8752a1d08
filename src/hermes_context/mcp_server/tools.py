"""What the MCP server offers, without the MCP SDK: tool definitions, calls, resources.

Every tool keeps the argument names of our agent tools (``session_search``,
``session_recall``, ``memory``, ``skills_list``, ``skill_view``,
``skill_manage``) and runs through the same code: the memory scanner, limits,
approval staging and journal; the skill store's checks; the session store's
user scoping. ``Toolbox.call`` returns the result as JSON text, or raises
``ToolFailure`` with a one-line reason that the server sends as an MCP tool
error.

Results are sized for a model's context. Searches and reads page with their
own cursors (``cursor``, ``offset``, ``start``); any other result longer than
``MAX_RESULT_CHARS`` is sent a page at a time, the rest behind a ``cursor``
the next call passes back with the same arguments.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..compression import ContextCompressor
from ..config import Config
from ..errors import HermesContextError, InvalidMessagesError
from ..memory import MEMORY_TOOL_SCHEMA, MemoryStore, memory_tool
from ..messages import without_lone_surrogates
from ..sessions import (
    SESSION_RECALL_SCHEMA,
    SESSION_SEARCH_SCHEMA,
    SessionDB,
    Within,
    session_tool,
)
from ..skills import SkillStore
from ..skills.tool import SKILL_MANAGE_SCHEMA, SKILL_VIEW_SCHEMA, SKILLS_LIST_SCHEMA, skill_tool

# Characters of one tool result at most; the rest follows behind a cursor.
MAX_RESULT_CHARS = 20_000
# Messages one session_read call returns at most, and their characters.
MAX_READ_MESSAGES = 100
READ_CHAR_BUDGET = 24_000
# Characters shown of one message in session_read (the whole text: session_recall).
READ_MESSAGE_CHARS = 4_000
# Messages one compress_messages call takes at most.
MAX_COMPRESS_MESSAGES = 20_000
# Items of one list of the loss report shown (the count of the rest is given).
REPORT_LIST_ITEMS = 50
# A cursor this server makes is a few dozen characters.
MAX_CURSOR_CHARS = 1_000

MEMORY_RESOURCES = {"memory://MEMORY.md": "memory", "memory://USER.md": "user"}
SKILL_SCHEME = "skill://"


class ToolFailure(Exception):
    """A call that could not be done; its message is the one-line reason the client gets."""


_NOT_FOUND_RE = re.compile(r"^session ('.*') not found; list them with .*$")


def _reason(text: str) -> str:
    """An error as the client gets it: one line, no hint meant for the command line."""
    line = " ".join(without_lone_surrogates(str(text)).split())
    return _NOT_FOUND_RE.sub(r"no session \1", line)


def _schema(definition: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    function = definition["function"]
    return function["name"], function["description"], json.loads(json.dumps(function["parameters"]))


def _with(schema: dict[str, Any], **properties: Any) -> dict[str, Any]:
    schema["properties"].update(properties)
    return schema


_CURSOR = {
    "type": "string",
    "description": "From the previous result's next_cursor, to get the next page.",
}
_DATE = "An ISO 8601 date or time (2026-11-30, 2026-11-30T14:00:00Z); UTC unless it says."


def _search_definition() -> tuple[str, str, dict[str, Any]]:
    name, _, schema = _schema(SESSION_SEARCH_SCHEMA)
    description = (
        "Search the stored conversations of every agent that writes to this memory (this one, "
        "Hermes, and the Claude Code / Codex histories imported into it). `query` -> ranked "
        "matches grouped by conversation, with snippets (words matched literally and stemmed; "
        "Chinese/Japanese/Korean work); add `session_id` to search one conversation, `source` "
        "to search one agent's conversations (e.g. claude-code, codex, cli), `since` / `until` "
        "for a time range. No query -> recent conversations. `session_id` + "
        "`around_message_id` -> the messages around a hit. Hits marked `compacted` were "
        "summarised away: session_recall on the summary message gets them back; session_read "
        "reads a conversation page by page. Pass `next_cursor` back as `cursor` for more."
    )
    _with(
        schema,
        source={
            "type": "array",
            "items": {"type": "string"},
            "description": "Only conversations written by these agents or front ends "
            "(claude-code, codex, hermes platforms such as cli or telegram, bridge...).",
        },
        since={"type": "string", "description": f"Only messages from this time on. {_DATE}"},
        until={"type": "string", "description": f"Only messages before this time. {_DATE}"},
        cursor=_CURSOR,
    )
    return name, description, schema


def _recall_definition() -> tuple[str, str, dict[str, Any]]:
    name, description, schema = _schema(SESSION_RECALL_SCHEMA)
    schema["required"] = ["summary_message_id", "session_id"]
    schema["properties"]["session_id"]["description"] = "The conversation holding it."
    return name, description, schema


READ_DEFINITION: tuple[str, str, dict[str, Any]] = (
    "session_read",
    "Read one stored conversation in order, a page at a time: its messages from `offset` "
    f"(0: the first), at most `limit` (1-{MAX_READ_MESSAGES}) and about "
    f"{READ_CHAR_BUDGET:,} characters; long messages are clipped (session_recall gives "
    "summarised originals in full). Pass `next_offset` back as `offset` for the rest.",
    {
        "type": "object",
        "properties": {
            "session_id": {"type": "string", "description": "A conversation id (from a search)."},
            "offset": {"type": "integer", "minimum": 0, "default": 0},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_READ_MESSAGES, "default": 20},
        },
        "required": ["session_id"],
        "additionalProperties": False,
    },
)

COMPRESS_DEFINITION: tuple[str, str, dict[str, Any]] = (
    "compress_messages",
    "Compress an OpenAI chat message array the way hermes-context compresses its own context: "
    "old tool output pruned, head and tail kept, the middle summarised, credentials redacted. "
    "Returns the compressed array, the token counts and the loss report (what was dropped).",
    {
        "type": "object",
        "properties": {
            "messages": {
                "type": "array",
                "items": {"type": "object"},
                "description": "The conversation: OpenAI chat messages (role, content, "
                "tool_calls, tool_call_id).",
            },
            "target_tokens": {
                "type": "integer",
                "minimum": 1,
                "description": "Shrink the result to about this many tokens.",
            },
            "context_length": {
                "type": "integer",
                "minimum": 1,
                "description": "The model's context window (default: the server's config).",
            },
            "focus": {"type": "string", "description": "Topic the summary should favour."},
            "force": {
                "type": "boolean",
                "description": "Compress even when under the threshold.",
                "default": True,
            },
        },
        "required": ["messages"],
        "additionalProperties": False,
    },
)


def _paged(definition: tuple[str, str, dict[str, Any]]) -> tuple[str, str, dict[str, Any]]:
    name, description, schema = definition
    _with(schema, cursor=_CURSOR)
    return name, description + " Long results come in pages: pass next_cursor as cursor.", schema


def _args_key(args: Mapping[str, Any]) -> str:
    text = json.dumps({k: v for k, v in args.items() if k != "cursor"}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _cursor_for(name: str, args: Mapping[str, Any], **state: Any) -> str:
    """An opaque cursor: where to go on, bound to the tool and the call's other arguments."""
    body = {"t": name, "k": _args_key(args), **state}
    return base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")


def _read_cursor(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    cursor = args.get("cursor")
    if cursor is None:
        return {}
    try:
        if not isinstance(cursor, str):
            raise ValueError
        if len(cursor) > MAX_CURSOR_CHARS:
            raise ValueError
        body = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if not isinstance(body, dict):
            raise ValueError
    except (ValueError, binascii.Error, UnicodeDecodeError, RecursionError):
        raise ToolFailure(
            "cursor is not one this server gave; leave it out to start over"
        ) from None
    if body.get("t") != name or body.get("k") != _args_key(args):
        raise ToolFailure(
            "cursor belongs to another call: pass the same arguments as the call that returned it"
        )
    return body


def _cursor_int(body: Mapping[str, Any], key: str, high: int) -> int:
    """A position the cursor holds; refused unless it is one this server could have made."""
    value = body.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise ToolFailure("cursor is not one this server gave; leave it out to start over")
    return value


def _text(data: Any) -> str:
    """JSON text for the client; lone surrogates (which JSON-RPC cannot carry) replaced."""
    return without_lone_surrogates(json.dumps(data, ensure_ascii=False, default=str))


def _fit(data: Any, limit: int = MAX_RESULT_CHARS) -> Any:
    """``data`` with its longest strings clipped until its JSON text fits ``limit`` characters.

    Searches, reads and recalls page with their own cursors; this bounds what one
    page can hold however long the stored texts and titles are. Clipped text ends
    with a note of what is left out.
    """
    size = len(_text(data))
    if size <= limit:
        return data
    cap = max(_string_lengths(data), default=0)
    clipped = data
    while size > limit and cap > 100:
        cap = max(100, int(cap * 0.6))
        clipped = _clip_strings(data, cap)
        size = len(_text(clipped))
    return clipped


def _string_lengths(value: Any) -> Iterator[int]:
    if isinstance(value, str):
        yield len(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _string_lengths(item)
    elif isinstance(value, list):
        for item in value:
            yield from _string_lengths(item)


def _clip_strings(value: Any, cap: int) -> Any:
    if isinstance(value, str):
        if len(value) <= cap:
            return value
        return value[:cap] + f" … [{len(value) - cap:,} more characters; clipped to fit]"
    if isinstance(value, dict):
        return {k: _clip_strings(v, cap) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip_strings(v, cap) for v in value]
    return value


@dataclass
class Toolbox:
    """The stores one server serves, and its tools over them.

    Attributes:
        config: The server's configuration (its ``hermes_home`` holds ``state.db``).
        db: The session store every user's calls share (scoped per call).
        home_for: The folder of a user's memory files and skills (per-user mode),
            or None to use ``config.hermes_home`` for everyone (a local server).
        skill_manage: Offer ``skill_manage`` (off unless asked: it writes files
            a model later follows).
        after_search: Called after each ``session_search`` (the server passes
            ``SessionDB.index_semantic_in_background`` when searching by meaning).
    """

    config: Config
    db: SessionDB
    home_for: Callable[[str], Path] | None = None
    skill_manage: bool = False
    after_search: Callable[[], None] | None = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._configs: dict[str | None, Config] = {}

    # -- what is offered --------------------------------------------------------

    def definitions(self) -> list[tuple[str, str, dict[str, Any]]]:
        """(name, description, JSON schema of the arguments) of every tool offered."""
        out = [
            _search_definition(),
            _recall_definition(),
            READ_DEFINITION,
            _paged(_schema(MEMORY_TOOL_SCHEMA)),
            _paged(_schema(SKILLS_LIST_SCHEMA)),
            _paged(_schema(SKILL_VIEW_SCHEMA)),
        ]
        if self.skill_manage:
            out.append(_schema(SKILL_MANAGE_SCHEMA))
        out.append(COMPRESS_DEFINITION)
        return [(n, d, json.loads(json.dumps(s))) for n, d, s in out]

    def names(self) -> list[str]:
        return [d[0] for d in self.definitions()]

    # -- calls ---------------------------------------------------------------------

    def call(self, name: str, arguments: Mapping[str, Any] | None, user_id: str | None) -> str:
        """Run one tool call for ``user_id``; its result as JSON text (or a text page).

        Raises:
            ToolFailure: the call was wrong or refused; the message says why in one line.
        """
        args = dict(arguments or {})
        handlers: dict[str, Callable[[dict[str, Any], str | None], Any]] = {
            "session_search": self._search,
            "session_recall": self._recall,
            "session_read": self._read,
            "memory": self._memory,
            "skills_list": lambda a, u: self._skill("skills_list", a, u),
            "skill_view": lambda a, u: self._skill("skill_view", a, u),
            "compress_messages": self._compress,
        }
        if self.skill_manage:
            handlers["skill_manage"] = lambda a, u: self._skill("skill_manage", a, u)
        handler = handlers.get(name)
        if handler is None:
            raise ToolFailure(
                f"unknown tool {name!r}; this server offers {', '.join(self.names())}"
            )
        try:
            if name in ("memory", "skills_list", "skill_view"):
                return self._page(name, args, lambda a: _text(handler(a, user_id)))
            if name == "compress_messages":
                return _text(handler(args, user_id))  # the whole array: the client needs it all
            return _text(_fit(handler(args, user_id)))
        except (ToolFailure, ValueError, HermesContextError) as exc:
            raise ToolFailure(_reason(str(exc))) from None

    def _page(self, name: str, args: dict[str, Any], run: Callable[[dict[str, Any]], str]) -> str:
        at = _cursor_int(_read_cursor(name, args), "at", 10**9)
        text = run({k: v for k, v in args.items() if k != "cursor"})
        if at == 0 and len(text) <= MAX_RESULT_CHARS:
            return text
        end = at + MAX_RESULT_CHARS
        page: dict[str, Any] = {
            "page": text[at:end],
            "characters": len(text),
            "from": at,
            "next_cursor": _cursor_for(name, args, at=end) if end < len(text) else None,
        }
        page["note"] = (
            "the result is long: this is part of its JSON text; call again with the same "
            "arguments and cursor=next_cursor for the rest"
            if page["next_cursor"]
            else "the last part of the result"
        )
        return _text(page)

    # sessions

    def _search(self, args: dict[str, Any], user_id: str | None) -> dict[str, Any]:
        original = dict(args)
        offset = _cursor_int(_read_cursor("session_search", original), "offset", 90)
        within = Within.parse(
            args.pop("source", None), args.pop("since", None), args.pop("until", None)
        )
        call = {k: v for k, v in args.items() if k != "cursor" and v is not None}
        unknown = sorted(
            set(call) - set(SESSION_SEARCH_SCHEMA["function"]["parameters"]["properties"])
        )
        if unknown:
            raise ToolFailure(f"unknown argument(s) {', '.join(unknown)}")
        limit = call.get("limit", 3)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ToolFailure(f"limit must be an integer from 1 to 10, got {limit!r}")
        limit = call["limit"] = min(limit, 10)
        data = self.db.session_search(**call, user_id=user_id, within=within, offset=offset)
        key = "results" if data.get("mode") == "discover" else "sessions"
        more = False
        if data.get("mode") in ("discover", "browse") and len(data[key]) == limit:
            # Is there a next page? One more conversation after this page says so.
            call["limit"] = 1
            beyond = self.db.session_search(
                **call, user_id=user_id, within=within, offset=offset + limit
            )
            more = bool(beyond[key]) and offset + limit <= 90
        if self.after_search is not None:
            self.after_search()
        data["next_cursor"] = (
            _cursor_for("session_search", original, offset=offset + limit) if more else None
        )
        return data

    def _recall(self, args: dict[str, Any], user_id: str | None) -> dict[str, Any]:
        if not isinstance(args.get("session_id"), str) or not args["session_id"]:
            raise ToolFailure("session_id is required: the conversation holding the summary")
        data: dict[str, Any] = json.loads(
            session_tool(self.db, "session_recall", args, user_id=user_id)
        )
        if "error" in data:
            raise ToolFailure(str(data["error"]))
        return data

    def _read(self, args: dict[str, Any], user_id: str | None) -> dict[str, Any]:
        from ..sessions.search import message_entry

        unknown = sorted(set(args) - {"session_id", "offset", "limit"})
        if unknown:
            raise ToolFailure(
                f"unknown argument(s) {', '.join(unknown)}; session_read takes "
                "session_id, offset, limit"
            )
        session_id = args.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            raise ToolFailure("session_id is required (a conversation id from session_search)")
        offset = _integer(args.get("offset", 0), "offset", 0, 2**63 - 1)
        limit = _integer(args.get("limit", 20), "limit", 1, MAX_READ_MESSAGES)
        row = self.db.get_session(session_id)
        if row is None or (user_id is not None and row.get("user_id") != user_id):
            raise ToolFailure(f"no session {session_id!r}")
        records = self.db.get_message_records(session_id)
        out: list[dict[str, Any]] = []
        used, index = 0, offset
        while index < len(records) and len(out) < limit:
            entry = message_entry(records[index], chars=READ_MESSAGE_CHARS)
            used += len(json.dumps(entry, ensure_ascii=False))
            if out and used > READ_CHAR_BUDGET:
                break
            out.append(entry)
            index += 1
        return {
            "session": {
                k: row.get(k)
                for k in (
                    "id",
                    "title",
                    "source",
                    "model",
                    "started_at",
                    "cwd",
                    "parent_session_id",
                )
            },
            "total": len(records),
            "offset": offset,
            "messages": out,
            "next_offset": index if index < len(records) else None,
        }

    # memory and skills

    def _home_config(self, user_id: str | None) -> Config:
        key = user_id if self.home_for is not None else None
        with self._lock:
            if key not in self._configs:
                home = self.home_for(key) if self.home_for is not None and key else None
                self._configs[key] = (
                    dataclasses.replace(self.config, hermes_home=home) if home else self.config
                )
            return self._configs[key]

    def memory_store(self, user_id: str | None) -> MemoryStore:
        return MemoryStore.from_config(self._home_config(user_id))

    def skill_store(self, user_id: str | None) -> SkillStore:
        return SkillStore.from_config(self._home_config(user_id))

    def _memory(self, args: dict[str, Any], user_id: str | None) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(memory_tool(self.memory_store(user_id), args))
        if not result.get("success", True):
            raise ToolFailure(str(result.get("error") or "the memory write was refused"))
        if result.get("staged"):
            result["message"] = f"staged, id {result.get('pending_id')}: " + str(
                result.get("message", "")
            )
        return {k: v for k, v in result.items() if k not in ("path", "backup")}

    def _skill(self, name: str, args: dict[str, Any], user_id: str | None) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(skill_tool(self.skill_store(user_id), name, args))
        if not result.get("success", True):
            raise ToolFailure(str(result.get("error") or f"{name} failed"))
        return {k: v for k, v in result.items() if k != "path"}

    # compression

    def _compress(self, args: dict[str, Any], user_id: str | None) -> dict[str, Any]:
        unknown = sorted(set(args) - set(COMPRESS_DEFINITION[2]["properties"]))
        if unknown:
            raise ToolFailure(f"unknown argument(s) {', '.join(unknown)}")
        messages = args.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ToolFailure("messages must be a non-empty array of OpenAI chat messages")
        if len(messages) > MAX_COMPRESS_MESSAGES:
            raise ToolFailure(f"at most {MAX_COMPRESS_MESSAGES:,} messages per call")
        target = args.get("target_tokens")
        context = args.get("context_length")
        for key, value in (("target_tokens", target), ("context_length", context)):
            if value is not None:
                _integer(value, key, 1, 10**9)
        focus = args.get("focus")
        if focus is not None and not isinstance(focus, str):
            raise ToolFailure("focus must be a string")
        compressor = ContextCompressor.from_config(self.config, context_length=context, model="")
        try:
            result = compressor.compress(
                messages, force=bool(args.get("force", True)), focus=focus, target_tokens=target
            )
        except InvalidMessagesError as exc:
            raise ToolFailure(f"messages: {exc}") from None
        if result.aborted:
            raise ToolFailure(f"compression stopped: {result.error or 'the summariser failed'}")
        return {
            "messages": result.messages,
            "tokens_before": result.tokens_before,
            "tokens_after": result.tokens_after,
            "dropped": result.dropped,
            "used_fallback": result.used_fallback,
            "report": _short_report(result.report.to_dict()),
        }

    # -- resources --------------------------------------------------------------------

    def resources(self, user_id: str | None) -> list[tuple[str, str, str]]:
        """(uri, name, description) of the memory files and of each skill."""
        out = [
            ("memory://MEMORY.md", "MEMORY.md", "The agent's notes, as the model sees them."),
            ("memory://USER.md", "USER.md", "What is known of the user, as the model sees it."),
        ]
        for skill in self.skill_store(user_id).list_skills():
            out.append((f"{SKILL_SCHEME}{skill.name}", skill.name, skill.description))
        return out

    def read_resource(self, uri: str, user_id: str | None) -> str:
        """The text behind ``uri``.

        Raises:
            ToolFailure: no such resource.
        """
        target = MEMORY_RESOURCES.get(uri)
        try:
            if target is not None:
                store = self.memory_store(user_id)
                store.load_from_disk()
                return store.format_for_system_prompt(target) or ""
            if uri.startswith(SKILL_SCHEME):
                view = self.skill_store(user_id).view(uri[len(SKILL_SCHEME) :])
                files = "\n".join(f"- {f}" for f in view.get("files", ()))
                head = f"# {view['name']}\n\n{view['description']}\n\n"
                return head + view["body"] + (f"\n\nSupporting files:\n{files}" if files else "")
        except (ValueError, HermesContextError) as exc:
            raise ToolFailure(_reason(str(exc))) from None
        raise ToolFailure(f"no resource {uri!r}; see resources/list")


def _short_report(report: dict[str, Any]) -> dict[str, Any]:
    """The loss report, its lists of message indices cut to their first few when long."""
    out: dict[str, Any] = {}
    for key, value in report.items():
        if isinstance(value, list) and len(value) > REPORT_LIST_ITEMS:
            out[key] = value[:REPORT_LIST_ITEMS]
            out[f"{key}_count"] = len(value)
        else:
            out[key] = value
    return out


def _integer(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ToolFailure(f"{name} must be an integer from {low} to {high}, got {value!r}")
    return value
