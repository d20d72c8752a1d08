"""The ``memory``, ``session`` and ``skills`` toolsets: the stores' own tools, bound to the agent.

The handlers pass the model's arguments through unchanged and bind what only
the host may set (session, user) by keyword, so the model can never choose them.
"""

from __future__ import annotations

import json
from typing import Any

from ..memory import MEMORY_TOOL_SCHEMA, memory_tool
from ..sessions import SESSION_RECALL_SCHEMA, SESSION_SEARCH_SCHEMA, session_tool
from ..skills import SKILL_TOOL_SCHEMAS, skill_tool
from .registry import Tool, ToolContext


def _memory(args: dict[str, Any], ctx: ToolContext) -> str:
    if ctx.memory_store is None:
        return json.dumps({"error": "memory is disabled for this agent"})
    return memory_tool(ctx.memory_store, args, session_id=ctx.session_id, origin=ctx.origin)


def _session(name: str):  # type: ignore[no-untyped-def]
    def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        if ctx.session_db is None:
            return json.dumps({"error": "session history is disabled for this agent"})
        return session_tool(
            ctx.session_db, name, args, current_session_id=ctx.session_id, user_id=ctx.user_id
        )

    return handler


def _skill(name: str):  # type: ignore[no-untyped-def]
    def handler(args: dict[str, Any], ctx: ToolContext) -> str:
        if ctx.skill_store is None:
            return json.dumps({"error": "skills are disabled for this agent"})
        return skill_tool(ctx.skill_store, name, args)

    return handler


MEMORY_TOOLS = (Tool(MEMORY_TOOL_SCHEMA, "memory", _memory),)
SKILL_TOOLS = tuple(
    Tool(schema, "skills", _skill(schema["function"]["name"])) for schema in SKILL_TOOL_SCHEMAS
)
SESSION_TOOLS = (
    Tool(SESSION_SEARCH_SCHEMA, "session", _session("session_search")),
    Tool(SESSION_RECALL_SCHEMA, "session", _session("session_recall")),
)
