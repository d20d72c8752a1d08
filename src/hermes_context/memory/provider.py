"""``MemoryProvider``: the interface of an external long-term memory (SPEC 6, seed 2.4).

A provider recalls what earlier sessions said (``prefetch``), learns from each
finished turn (``sync_turn``) and may offer tools of its own. The agent talks
to it only through ``MemoryManager``, which isolates its failures, bounds its
latency and runs its writes in the background. Implementations: ``local``
(``hermes_context.providers.local``), ``mem0`` (``hermes_context.providers.mem0``),
or any class registered under the entry point group
``hermes_context.memory_providers``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class MemoryProvider(ABC):
    """One external memory backend. Only ``name``, ``is_available``, ``prefetch``
    and ``sync_turn`` are required; the other hooks default to doing nothing.

    ``initialize`` gets ``user_id`` (and ``hermes_home``, ``config``) as keywords:
    a provider keeps every user's memories apart.
    """

    name: str = ""

    @abstractmethod
    def is_available(self) -> bool:
        """Whether it can run here (dependencies installed, reachable); cheap, no side effects."""

    def initialize(self, session_id: str, **kwargs: Any) -> None:  # noqa: B027 - optional hook
        """Start serving ``session_id`` (kwargs: ``user_id``, ``hermes_home``, ``config``)."""

    def get_tool_schemas(self) -> list[dict[str, Any]]:
        """OpenAI tool definitions the provider answers through ``handle_tool_call``."""
        return []

    def system_prompt_block(self) -> str | None:
        """Text for the system prompt (built once per session), or None."""
        return None

    @abstractmethod
    def prefetch(self, query: str, session_id: str) -> str:
        """What it recalls for ``query`` (plain text, "" for nothing)."""

    def queue_prefetch(self, query: str, session_id: str) -> None:  # noqa: B027 - optional hook
        """Start recalling for the next turn ahead of time (optional)."""

    @abstractmethod
    def sync_turn(
        self, user: str, assistant: str, session_id: str, messages: list[dict[str, Any]]
    ) -> None:
        """Learn from a finished turn (called on the manager's background worker)."""

    def handle_tool_call(self, name: str, arguments: dict[str, Any]) -> str:
        """Answer one of its tools with JSON text."""
        return '{"error": "this memory provider has no tools"}'

    def on_pre_compress(self, messages: list[dict[str, Any]]) -> str:
        """Text the summariser should keep from messages about to be compacted ("" for none)."""
        return ""

    def on_memory_write(self, action: str, target: str, content: str) -> None:  # noqa: B027
        """A write to MEMORY.md / USER.md succeeded (mirror it if useful).

        ``action`` is ``add``, ``replace`` or ``archive`` (an entry the write
        moved out of the file to make room: worth keeping for recall).
        """

    def on_session_end(self, session_id: str, messages: list[dict[str, Any]]) -> None:  # noqa: B027
        """The session ended."""

    def shutdown(self) -> None:  # noqa: B027 - optional hook
        """Release resources; no call follows."""

    def status(self) -> dict[str, Any]:
        """What ``providers status`` shows (counts, mode, warnings)."""
        return {"name": self.name, "available": self.is_available()}
