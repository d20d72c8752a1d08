"""``ChatModel``: what ``AIAgent`` needs from a model, so anything can stand in for HTTP.

``ChatClient`` satisfies it over any OpenAI-compatible endpoint and
``hermes_context.llm.testing.FunctionModel`` from a Python function; pass
either (or your own) as ``AIAgent(chat_model=...)``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from .client import ChatResponse


@runtime_checkable
class ChatModel(Protocol):
    """One model that answers OpenAI-shaped chat requests."""

    @property
    def model(self) -> str:
        """The model's name (recorded on sessions, shown to people)."""
        ...

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        stream: bool = False,
        on_text: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        **params: Any,
    ) -> ChatResponse:
        """Answer ``messages``.

        Args:
            messages: OpenAI chat messages; keys that start with ``_`` are
                metadata and must not reach the model.
            tools: Tool definitions the model may call.
            stream: Deliver the answer's text to ``on_text`` as it is produced.
            on_text: With ``stream``, receives each piece of answer text.
            cancel: Once set, the request stops promptly.
            **params: Request parameters (``temperature``, ``tool_choice``...).

        Raises:
            LLMAPIError: on every failure, with its ``kind`` (``cancelled`` after
                ``cancel`` was set, ``timeout`` after the model's deadline).
        """
        ...

    def close(self) -> None:
        """Release connections; the model may still be used afterwards."""
        ...
