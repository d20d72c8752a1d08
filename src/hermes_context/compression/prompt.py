"""Stage 4 input: the turns to summarise as text, and the structured summary prompt."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..messages import content_text, strip_think_blocks

SUMMARY_HEADINGS = (
    "## Goal",
    "## Constraints & Preferences",
    "## Active Task",
    "## In Progress",
    "## Completed Actions",
    "## Key Decisions",
    "## Relevant Files",
    "## Pending User Asks",
    "## Remaining Work",
    "## Critical Context",
)
# A message body over BODY_MAX_CHARS keeps its first BODY_HEAD and last BODY_TAIL chars.
BODY_MAX_CHARS = 6_000
BODY_HEAD_CHARS = 4_000
BODY_TAIL_CHARS = 1_500
BODY_CUT_MARKER = "\n...[truncated]...\n"
# The whole summariser input is capped (~40K tokens): 45% head, 55% tail kept.
INPUT_MAX_CHARS = 160_000
INPUT_HEAD_SHARE = 0.45
# Bounds of the internal summary size target, in tokens.
_SECTION_RE = re.compile(r"^## (.+?)\s*$", re.M)
SUMMARY_MIN_TOKENS = 2_000
SUMMARY_MAX_TOKENS = 10_000
SUMMARY_CONTENT_RATIO = 0.20
SUMMARY_CONTEXT_RATIO = 0.05


def summary_target_tokens(content_tokens: int, context_length: int) -> int:
    """``max(2000, min(content * 0.20, min(ctx * 0.05, 10_000)))`` (SPEC 3.3)."""
    ceiling = min(context_length * SUMMARY_CONTEXT_RATIO, SUMMARY_MAX_TOKENS)
    return int(max(SUMMARY_MIN_TOKENS, min(content_tokens * SUMMARY_CONTENT_RATIO, ceiling)))


def cut_body(text: str) -> str:
    """Keep the head and tail of an over-long message body."""
    if len(text) <= BODY_MAX_CHARS:
        return text
    return text[:BODY_HEAD_CHARS] + BODY_CUT_MARKER + text[-BODY_TAIL_CHARS:]


def cap_input(text: str) -> str:
    """Cap the whole summariser input, keeping 45% head and 55% tail."""
    if len(text) <= INPUT_MAX_CHARS:
        return text
    head = int(INPUT_MAX_CHARS * INPUT_HEAD_SHARE)
    tail = INPUT_MAX_CHARS - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n...[omitted {omitted:,} chars]...\n{text[-tail:]}"


def _format_call(call: dict[str, Any]) -> str:
    fn = call.get("function") or {}
    args = fn.get("arguments")
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return f"{fn.get('name', 'tool')}({cut_body(args or '')})"


def serialize_message(message: dict[str, Any]) -> str:
    """One message as summariser input: ``[USER]: ...``, ``[ASSISTANT]: ...``, ``[TOOL RESULT id]: ...``."""
    role = message.get("role")
    text = content_text(message.get("content"))
    if role == "tool":
        return f"[TOOL RESULT {message.get('tool_call_id', '?')}]: {cut_body(text)}"
    if role == "assistant":
        out = f"[ASSISTANT]: {cut_body(strip_think_blocks(text))}"
        calls = message.get("tool_calls") or []
        if calls:
            out += "\n[Tool calls: " + ", ".join(_format_call(c) for c in calls) + "]"
        return out
    label = "USER" if role == "user" else str(role).upper()
    return f"[{label}]: {cut_body(text)}"


def serialize_turns(messages: Sequence[dict[str, Any]]) -> str:
    """The turns to summarise, serialised and capped."""
    return cap_input("\n\n".join(serialize_message(m) for m in messages))


_SYSTEM_PROMPT = """\
You compact the middle of a long conversation between a user and an AI agent \
into a handoff summary. Another model will continue the work from your summary \
plus the most recent messages, so keep everything it needs and nothing else.
Write Markdown with exactly these headings, in this order:
{headings}
Rules:
- Under "## Constraints & Preferences" copy every constraint, safety rule, \
budget, limit, deadline, user preference and correction VERBATIM as a bullet. \
When an item was restated, keep only the latest value. Never drop one.
- Under "## Critical Context" keep exact values: ids, numbers, paths, commands, \
error strings.
- Do not invent anything. Write "None" under a heading with nothing to say.
- Output only the summary: no preamble, no reasoning."""


def build_summary_request(
    turns: Sequence[dict[str, Any]],
    *,
    previous_summary: str | None,
    pinned: Sequence[str],
    target_tokens: int,
    focus: str | None = None,
    draft: str | None = None,
) -> list[dict[str, str]]:
    """The chat messages sent to an LLM summariser.

    ``draft`` is the deterministic handoff of the same turns: the model gets it
    to check, complete and rewrite, keeping its exact values.
    """
    system = _SYSTEM_PROMPT.format(headings="\n".join(SUMMARY_HEADINGS))
    parts = []
    if previous_summary:
        parts.append(
            "Update the previous summary with the new turns. Keep what is still true, "
            "replace what changed, add what is new.\n\nPREVIOUS SUMMARY:\n" + previous_summary
        )
        parts.append("NEW TURNS TO INCORPORATE:\n" + serialize_turns(turns))
    else:
        parts.append("TURNS TO SUMMARISE:\n" + serialize_turns(turns))
    parts += _guidance(draft, pinned, focus, target_tokens)
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}]


def _guidance(
    draft: str | None, pinned: Sequence[str], focus: str | None, target_tokens: int
) -> list[str]:
    """The parts of a summary instruction after the turns: draft, pinned facts, focus, size."""
    parts = []
    if draft:
        parts.append(
            "DRAFT HANDOFF OF THESE TURNS (extracted mechanically; its files, "
            "commands, test counts and error strings are exact — keep them, fix what is "
            "wrong, add what it missed):\n" + draft
        )
    if pinned:
        parts.append(
            "PINNED FACTS (copy each verbatim under ## Constraints & Preferences):\n"
            + "\n".join(f"- {p}" for p in pinned)
        )
    if focus:
        parts.append(f"FOCUS: give most of the summary budget to: {focus}")
    parts.append(f"Aim for at most about {target_tokens:,} tokens.")
    return parts


PREFIX_REQUEST_MARKER = "[Compaction request from the agent's host, not from the user]"


def build_prefix_summary_request(
    prefix: Sequence[dict[str, Any]],
    *,
    first: int,
    pinned: Sequence[str],
    target_tokens: int,
    focus: str | None = None,
    draft: str | None = None,
) -> list[dict[str, Any]]:
    """A summary request that reuses the conversation as sent (the provider's prompt cache).

    ``prefix`` is the conversation up to the cut, exactly as the model saw it
    (same system prompt, same messages); one instruction follows. When the
    prefix ends with a user message, the instruction joins a copy of it, so
    no two user messages are adjacent. Only the instruction is new to the
    provider: everything before it can be served from its prompt cache.
    """
    rules = _SYSTEM_PROMPT.format(headings="\n".join(SUMMARY_HEADINGS))
    parts = [
        PREFIX_REQUEST_MARKER,
        "Stop working on the task for this one reply. Messages from number "
        f"{first + 1} of the conversation above (counting the system prompt as 1) up "
        "to this point are about to be replaced by a summary; the messages before them "
        "stay. If the conversation above holds an earlier [CONTEXT SUMMARY], fold it in: "
        "keep what is still true, replace what changed. Do not call tools.",
        rules,
        *_guidance(draft, pinned, focus, target_tokens),
    ]
    instruction = "\n\n".join(parts)
    messages = [dict(m) for m in prefix]
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "user" and isinstance(last.get("content"), str):
        messages[-1] = {**last, "content": f"{last['content']}\n\n{instruction}"}
    else:
        messages.append({"role": "user", "content": instruction})
    return messages


def parse_summary(text: str | None) -> dict[str, list[str]]:
    """Split a summary into ``{heading: items}``; bullets become items."""
    sections: dict[str, list[str]] = {}
    if not text:
        return sections
    matches = list(_SECTION_RE.finditer(text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = text[match.end() : end].strip()
        items = []
        for line in body.splitlines():
            line = line.strip()
            if not line or line == "None":
                continue
            items.append(line[2:] if line.startswith(("- ", "* ")) else line)
        # Several summaries joined together: a heading seen again adds to its items.
        sections.setdefault("## " + match.group(1), []).extend(items)
    return sections
