"""Agent tools over the session store: ``session_search`` and ``session_recall``.

The schemas are OpenAI function-tool definitions; ``session_tool`` runs one
call and always returns JSON text, an ``{"error": ...}`` object when the call
was wrong, so the model can read what to fix. The host binds
``current_session_id`` and ``user_id``; the model can never set them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from .queries import check_integer
from .rows import json_text
from .search import DEFAULT_WINDOW, MAX_LIMIT, MAX_WINDOW, message_entry

if TYPE_CHECKING:
    from .db import SessionDB

# Characters of original text one session_recall call returns at most; ask
# again with ``start`` for the rest.
RECALL_CHAR_BUDGET = 24_000

SESSION_SEARCH_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "session_search",
        "description": (
            "Search and read past conversations (no LLM involved). The mode follows from the "
            "arguments: `query` -> discover: ranked matches grouped by conversation, with "
            "snippets (words are matched literally and stemmed; Chinese/Japanese/Korean "
            "work); add `session_id` to search one conversation. `session_id` + "
            "`around_message_id` -> scroll: the messages around one message. `session_id` "
            "alone -> read a conversation (first 20 and last 10 messages when long). No "
            "arguments -> browse recent conversations. The current conversation is left out. "
            "Hits marked `compacted` were summarised away; get their full text with "
            "session_recall on the summary message."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Words to look for."},
                "session_id": {"type": "string", "description": "A conversation id."},
                "around_message_id": {
                    "type": "integer",
                    "description": "Message id to scroll around (from a search hit).",
                },
                "window": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_WINDOW,
                    "default": DEFAULT_WINDOW,
                    "description": "Messages to show on each side when scrolling.",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "default": 3,
                    "description": "How many conversations to return.",
                },
                "sort": {
                    "type": "string",
                    "enum": ["newest", "oldest"],
                    "default": "newest",
                    "description": "Order of conversations (browse) and of hits within one.",
                },
            },
            "additionalProperties": False,
        },
    },
}

SESSION_RECALL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "session_recall",
        "description": (
            "Get back, in order and in full, the original messages that a context summary "
            "(or a shortened tool result) replaced when the conversation was compacted. "
            "Use the message id of the summary."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "summary_message_id": {
                    "type": "integer",
                    "description": "Id of the summary or shortened message.",
                },
                "session_id": {
                    "type": "string",
                    "description": "Conversation holding it (default: the current one).",
                },
                "start": {
                    "type": "integer",
                    "minimum": 0,
                    "default": 0,
                    "description": "Index of the first original to return (to page on).",
                },
            },
            "required": ["summary_message_id"],
            "additionalProperties": False,
        },
    },
}

TOOL_SCHEMAS = (SESSION_SEARCH_SCHEMA, SESSION_RECALL_SCHEMA)
_ALLOWED = {
    s["function"]["name"]: set(s["function"]["parameters"]["properties"]) for s in TOOL_SCHEMAS
}


def _arguments(name: str, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            raise ValueError(f"arguments are not valid JSON: {exc}") from exc
        except RecursionError as exc:
            raise ValueError("arguments are not valid JSON: nested too deeply") from exc
    if not isinstance(arguments, Mapping):
        raise ValueError("arguments must be a JSON object")
    unknown = sorted(set(arguments) - _ALLOWED[name])
    if unknown:
        allowed = ", ".join(sorted(_ALLOWED[name]))
        raise ValueError(f"unknown argument(s) {', '.join(unknown)}; {name} takes {allowed}")
    return {k: v for k, v in arguments.items() if v is not None}


def _integer(value: Any, name: str, low: int) -> int:
    # Bounded above by SQLite's integer range: a bigger int overflows when bound.
    return check_integer(value, name, low)


def _recall(
    db: SessionDB, args: dict[str, Any], current_session_id: str | None, user_id: str | None
) -> dict[str, Any]:
    if "session_id" in args and not isinstance(args["session_id"], str):
        raise ValueError(f"session_id must be a string, got {args['session_id']!r}")
    session_id = args.get("session_id") or current_session_id
    if not session_id:
        raise ValueError("session_id is required when there is no current session")
    summary_id = _integer(args["summary_message_id"], "summary_message_id", 1)
    start = _integer(args.get("start", 0), "start", 0)
    records = db.recall_records(session_id, summary_id, user_id=user_id)
    out: list[dict[str, Any]] = []
    used, index = 0, start
    while index < len(records):
        entry = message_entry(records[index], chars=max(RECALL_CHAR_BUDGET - used, 1_000))
        used += len(entry["content"]) + sum(
            len(c["arguments"]) for c in entry.get("tool_calls", ())
        )
        if out and used > RECALL_CHAR_BUDGET:
            break
        out.append(entry)
        index += 1
    return {
        "session_id": session_id,
        "summary_message_id": summary_id,
        "total": len(records),
        "start": start,
        "messages": out,
        "next_start": index if index < len(records) else None,
    }


def session_tool(
    db: SessionDB,
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    *,
    current_session_id: str | None = None,
    user_id: str | None = None,
) -> str:
    """Run the tool call ``name(arguments)`` and return its result as JSON text.

    Args:
        db: The session store.
        name: ``session_search`` or ``session_recall``.
        arguments: The call's arguments, as a dict or the JSON text the model sent.
        current_session_id: The conversation the agent is in (excluded from
            discover/browse; default session of recall).
        user_id: Scope everything to this user's sessions.
    """
    try:
        if name not in _ALLOWED:
            raise ValueError(
                f"unknown tool {name!r}; expected one of {', '.join(sorted(_ALLOWED))}"
            )
        args = _arguments(name, arguments)
        if name == "session_recall":
            if "summary_message_id" not in args:
                raise ValueError("summary_message_id is required")
            data = _recall(db, args, current_session_id, user_id)
        else:
            data = db.session_search(**args, current_session_id=current_session_id, user_id=user_id)
    except (ValueError, StoreError) as exc:
        data = {"error": str(exc)}
    except Exception as exc:  # anything else too: the agent loop must always get JSON back
        data = {"error": f"session tool failed: {type(exc).__name__}: {exc}"}
    return json_text(json.dumps(data, ensure_ascii=False))
