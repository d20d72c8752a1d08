"""The ``memory`` tool: its OpenAI function schema and the call that runs it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .approval import GATED_ORIGINS
from .results import failure

if TYPE_CHECKING:
    from .store import MemoryStore

_OPERATION_SCHEMA = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["add", "replace", "remove"]},
        "content": {"type": "string", "description": "New entry text (add, replace)."},
        "old_text": {
            "type": "string",
            "description": "The entry to change: its whole text or a part found in no other entry.",
        },
    },
    "required": ["action"],
}

# The function object of an OpenAI tool; send it as {"type": "function", "function": ...}.
MEMORY_TOOL_SCHEMA: dict[str, Any] = {
    "name": "memory",
    "description": (
        "Save durable notes that will be shown to you at the start of future sessions. "
        "target 'memory': your own notes (environment facts, project conventions, tool quirks, "
        "lessons learned). target 'user': who the user is (preferences, communication style, "
        "habits). Keep entries short and factual, one fact per entry; never store secrets or "
        "instructions to yourself. Both stores have a character limit: when a write does not "
        "fit, replace or remove entries to consolidate, then retry. Changes are saved at once "
        "but appear in your system prompt only from the next session."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": ["add", "replace", "remove"],
                "description": "add a new entry, replace an entry, or remove one. Omit when "
                "giving 'operations'.",
            },
            "target": {"type": "string", "enum": ["memory", "user"]},
            "content": {"type": "string", "description": "Entry text for add and replace."},
            "old_text": {
                "type": "string",
                "description": "For replace and remove: the entry's whole text, or a part of it "
                "that appears in no other entry.",
            },
            "operations": {
                "type": "array",
                "items": _OPERATION_SCHEMA,
                "description": "Several operations applied together, all or nothing; the limit "
                "applies to the result, so you can remove and add in one call.",
            },
        },
        "required": ["target"],
    },
}


def memory_tool(store: MemoryStore, **tool_args: Any) -> str:
    """Run one ``memory`` tool call and return its JSON result.

    Args:
        store: The session's store.
        **tool_args: The call's arguments (``action``, ``target``, ``content``,
            ``old_text``, ``operations``), plus optional ``origin`` (``agent`` or
            ``background_review``) and ``session_id`` supplied by the host. A tool
            call is never a person's write, so ``origin="user"`` is refused: a model
            that slipped it into its arguments must not get past write approval.
    """
    return json.dumps(_dispatch(store, tool_args), ensure_ascii=False)


def _dispatch(store: MemoryStore, args: dict[str, Any]) -> dict[str, Any]:
    target = args.get("target")
    action = args.get("action")
    meta = {"origin": args.get("origin", "agent"), "session_id": args.get("session_id")}
    if meta["origin"] not in GATED_ORIGINS:
        return failure(
            f"origin {meta['origin']!r} is not allowed for a tool call "
            f"(use one of {', '.join(GATED_ORIGINS)}).",
            "invalid",
        )
    if target not in ("memory", "user"):
        return failure(f"'target' is required: 'memory' or 'user' (got {target!r}).", "invalid")
    if args.get("operations") is not None:
        if action not in (None, "batch"):
            return failure("Give either 'action' or 'operations', not both.", "invalid")
        return store.batch(target, args["operations"], **meta)
    if action == "add":
        return store.add(target, args.get("content"), **meta)  # type: ignore[arg-type]
    if action == "replace":
        return store.replace(target, args.get("old_text"), args.get("content"), **meta)  # type: ignore[arg-type]
    if action == "remove":
        return store.remove(target, args.get("old_text"), **meta)  # type: ignore[arg-type]
    return failure(
        f"'action' must be add, replace or remove, or give 'operations' (got {action!r}).",
        "invalid",
    )
