"""One registry of the agent's tools: name, OpenAI schema, toolset, handler.

A handler receives the decoded arguments and the ``ToolContext`` the host
binds (stores, session, user, workspace) and returns JSON text or plain data.
``ToolRegistry.dispatch`` never raises: an unknown tool, arguments that are
not a JSON object and a handler's exception all come back as an
``{"error": ...}`` tool result the model can read and act on.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..memory import MemoryStore
    from ..sessions import SessionDB
    from ..skills import SkillStore

# Toolsets the agent offers when the caller names none: terminal access is opt-in.
DEFAULT_TOOLSETS = ("memory", "session", "skills", "file")
# Characters of a tool result handed back to the model at most (a runaway
# handler must not blow the context window in one step).
MAX_RESULT_CHARS = 100_000


@dataclass
class ToolContext:
    """What the host binds for one agent; the model can never set these.

    Attributes:
        workspace: Root the file and terminal tools are confined to.
        session_db: The session store (``session`` toolset).
        memory_store: The memory store (``memory`` toolset).
        skill_store: The skills library (``skills`` toolset).
        session_id: The conversation the calls belong to (kept current by the agent).
        user_id: Scope of the session tools.
        terminal_timeout: Seconds a terminal command may run.
        hermes_home: The home directory, whose secrets the file tools refuse.
        origin: Who is writing memory: ``agent`` or ``background_review`` (the journal's origin).
        cancel: Set when the turn is interrupted; long tools check it.
    """

    workspace: Path
    session_db: SessionDB | None = None
    memory_store: MemoryStore | None = None
    skill_store: SkillStore | None = None
    session_id: str | None = None
    user_id: str | None = None
    terminal_timeout: float = 60.0
    hermes_home: Path | None = None
    origin: str = "agent"
    cancel: threading.Event = field(default_factory=threading.Event)


Handler = Callable[[dict[str, Any], ToolContext], Any]


@dataclass(frozen=True)
class Tool:
    """One tool: its schema (``{"type": "function", "function": {...}}``) and handler."""

    schema: dict[str, Any]
    toolset: str
    handler: Handler

    @property
    def name(self) -> str:
        return str(self.schema["function"]["name"])


class ToolRegistry:
    """Tools by name; ``schemas`` and ``dispatch`` for the toolsets an agent enables."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add ``tool``; a second tool with the same name is refused."""
        if tool.schema.get("type") != "function" or "function" not in tool.schema:
            raise ValueError("tool schema must be {'type': 'function', 'function': {...}}")
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    @property
    def toolsets(self) -> list[str]:
        return sorted({t.toolset for t in self._tools.values()})

    def names(self, toolsets: Iterable[str] | None = None) -> list[str]:
        """Tool names in the given toolsets (all when None), in registration order."""
        wanted = None if toolsets is None else set(toolsets)
        return [n for n, t in self._tools.items() if wanted is None or t.toolset in wanted]

    def schemas(self, toolsets: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """The OpenAI tool definitions of those tools."""
        return [self._tools[n].schema for n in self.names(toolsets)]

    def check_toolsets(self, toolsets: Iterable[str]) -> list[str]:
        """``toolsets`` as a list, or ValueError naming an unknown one and the known ones."""
        out = list(toolsets)
        unknown = [t for t in out if t not in self.toolsets]
        if unknown:
            raise ValueError(
                f"unknown toolset {unknown[0]!r}; available: {', '.join(self.toolsets)}"
            )
        return out

    def dispatch(
        self,
        name: str,
        arguments: str | Mapping[str, Any] | None,
        context: ToolContext,
        *,
        toolsets: Iterable[str] | None = None,
    ) -> str:
        """Run one call and return its result as text; it never raises."""
        allowed = self.names(toolsets)
        tool = self._tools.get(name)
        if tool is None or name not in allowed:
            return _error(f"unknown tool {name!r}; available tools: {', '.join(allowed)}")
        args = _decode(arguments)
        if isinstance(args, str):
            return _error(args)
        try:
            result = tool.handler(args, context)
        except Exception as exc:  # noqa: BLE001 - tool failures go back to the model
            return _error(f"{name} failed: {type(exc).__name__}: {exc}")
        text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
        if len(text) > MAX_RESULT_CHARS:
            cut = len(text) - MAX_RESULT_CHARS
            text = f"{text[:MAX_RESULT_CHARS]}\n[... {cut:,} more characters cut]"
        return text


def _decode(arguments: str | Mapping[str, Any] | None) -> dict[str, Any] | str:
    """The arguments as a dict, or a message saying why they are unusable."""
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if not arguments.strip():
        return {}
    try:
        decoded = json.loads(arguments)
    except (ValueError, RecursionError) as exc:
        return f"the arguments are not valid JSON ({exc}); send a JSON object"
    if not isinstance(decoded, dict):
        return f"the arguments must be a JSON object, not {type(decoded).__name__}"
    return decoded


def _error(message: str) -> str:
    return json.dumps({"error": message}, ensure_ascii=False)
