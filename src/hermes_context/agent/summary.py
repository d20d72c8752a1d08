"""Summaries by the conversation's own model, reusing the conversation as the prompt prefix.

When compression summarises with the model the agent talks to, the compressor
sends the conversation up to the cut exactly as the model saw it, then one
instruction (``ContextCompressor`` does this for a summariser with
``reuses_prefix``). This summariser sends that with the same tool schemas and
the same recall hints on stored summaries as the agent's own requests, so
the provider can serve everything but the instruction from its prompt cache,
and it keeps the usage the provider returned (cached tokens included).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..sessions import UNINDEXED_KEY

if TYPE_CHECKING:
    from .core import AIAgent


class ConversationSummarizer:
    """A ``Summarizer`` on the agent's own client that reuses the conversation prefix."""

    reuses_prefix = True

    def __init__(self, agent: AIAgent) -> None:
        self._agent = agent
        self.name = f"{agent.model} (conversation prefix)"
        self.last_usage: dict[str, Any] = {}

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        agent = self._agent
        prefix_mode = bool(messages) and bool(messages[0].get(UNINDEXED_KEY))
        tools = agent.tool_schemas if prefix_mode else None
        if prefix_mode:
            messages = agent.with_recall_hints(messages)
        params: dict[str, Any] = {"tool_choice": "none"} if tools else {}
        self.last_usage = {}
        response = agent.client.chat(messages, tools=tools, **params)
        self.last_usage = dict(response.usage)
        return response.content


def cached_tokens(usage: dict[str, Any]) -> int:
    """``prompt_tokens_details.cached_tokens`` of a usage object (0 when absent)."""
    details = usage.get("prompt_tokens_details") or {}
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    return int(value or 0) if isinstance(value, (int, float)) else 0
