"""``context_breakdown``: where the prompt's tokens go (``/context``).

Parts: identity, context files, memory snapshot, the rest of the system
prompt (tool guidance, compaction note), tool schemas, summaries, tool results
and other messages; with the threshold, the window and the share used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..compression import SUMMARY_KEY
from ..tokens import estimate_tokens_rough

if TYPE_CHECKING:
    from .core import AIAgent

PARTS = (
    "identity",
    "context_files",
    "memory_snapshot",
    "skills_index",
    "system_other",
    "tool_schemas",
    "summaries",
    "tool_results",
    "other_messages",
)


def context_breakdown(agent: AIAgent) -> dict[str, Any]:
    """Tokens by part (rough estimates), the threshold and the percent of it used."""
    parts = dict.fromkeys(PARTS, 0)
    system_tokens = 0
    for message, tokens in zip(agent.messages, agent._tokens, strict=True):
        role = message.get("role")
        if role == "system":
            system_tokens += tokens
        elif message.get(SUMMARY_KEY):
            parts["summaries"] += tokens
        elif role == "tool":
            parts["tool_results"] += tokens
        else:
            parts["other_messages"] += tokens
    prompt = agent.prompt_parts
    if prompt is not None:
        parts["identity"] = estimate_tokens_rough(prompt.identity)
        parts["context_files"] = estimate_tokens_rough(prompt.context_text)
        parts["memory_snapshot"] = estimate_tokens_rough("\n\n".join(prompt.memory))
        parts["skills_index"] = estimate_tokens_rough(prompt.skills_index)
    known = sum(parts[k] for k in ("identity", "context_files", "memory_snapshot", "skills_index"))
    parts["system_other"] = max(0, system_tokens - known)
    parts["tool_schemas"] = agent._tool_tokens
    total = sum(parts.values())
    threshold = agent.compressor.threshold_tokens
    return {
        "parts": parts,
        "total": total,
        "threshold": threshold,
        "context_length": agent.compressor.context_length,
        "percent_of_threshold": round(100 * total / threshold, 1) if threshold else 0.0,
        "percent_of_window": round(100 * total / agent.compressor.context_length, 1),
        "last_prompt_tokens": agent.compressor.last_prompt_tokens,
        "compressions": agent.compressor.compression_count,
        "messages": len(agent.messages),
    }
