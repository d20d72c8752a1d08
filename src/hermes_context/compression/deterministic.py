"""The deterministic, extractive summariser: the default when no LLM is configured.

It reads the dropped turns and fills the same headings as the LLM template:
the goal, verbatim constraints and preferences (latest restatement wins), the
active task, actions and their outcomes, decisions, files, pending asks,
remaining work and exact error strings, within a character budget.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import content_text, is_real_user, strip_think_blocks
from .pinned import Fact, extract_facts, fact_key, merge_facts
from .prompt import SUMMARY_HEADINGS, parse_summary
from .tool_summaries import EDIT_TOOLS, WRITE_TOOLS, parse_arguments, summarize_tool_result

# Hard cap of a deterministic summary (SPEC 3.5).
DEFAULT_MAX_CHARS = 8_000
# Per-item caps keep one huge message from eating the budget.
GOAL_CHARS = 1_200
TASK_CHARS = 600
ITEM_CHARS = 300
ERROR_LINE_CHARS = 300
MAX_ACTIONS = 40
MAX_FILES = 30
MAX_ERRORS = 15
MAX_DECISIONS = 10
MAX_ASKS = 6
LAST_TURNS = 3

_ERROR_WORDS = r"error|failed|failure|exception|traceback|timeout|timed out|fatal"
ERROR_RE = re.compile(_ERROR_WORDS, re.I)
# One pass over a whole tool result: every line holding an error word.
_ERROR_LINE_RE = re.compile(rf"^[^\n]*(?:{_ERROR_WORDS})[^\n]*$", re.I | re.M)
_PATH_RE = re.compile(
    r"(?<![\w:/.-])(?:~?/)?(?:[\w.-]+/)*[\w-][\w.-]*\."
    r"(?:py|pyi|js|jsx|ts|tsx|mjs|json|ya?ml|toml|md|rst|txt|cfg|ini|conf|sql|sh|go|rs|java|kt|"
    r"c|h|cc|cpp|hpp|rb|php|html|css|scss|lock|xml|csv|ipynb|proto|tf|gradle)\b"
)
_MODIFY_CMD_RE = re.compile(
    r"sed -i|\bpatch\b|git apply|cat\s*>|>\s*\S|\btee\b|\bmv\b|\bcp\b|\btouch\b"
)
_DECISION_RE = re.compile(
    r"\b(decided|decision|the (fix|issue|problem|root cause|bug|cause) (is|was)|root cause|"
    r"approach|instead of|i'?ll use|we'?ll use|chose|going with|solution is|turns out)\b",
    re.I,
)
_REMAINING_RE = re.compile(
    r"\b(next|todo|to do|remaining|still need|need to|then i'?ll|will now|left to)\b", re.I
)

# Trim order under a tight budget: lowest priority loses items first.
_PRIORITY = {
    "## Completed Actions": 10,
    "## Key Decisions": 20,
    "## Relevant Files": 30,
    "## Remaining Work": 40,
    "## In Progress": 50,
    "## Pending User Asks": 60,
    "## Critical Context": 70,
    "## Active Task": 80,
    "## Goal": 90,
    "## Constraints & Preferences": 100,
}


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class _Extract:
    """What the dropped turns say, gathered in one pass."""

    users: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    files: dict[str, list[int]] = field(default_factory=dict)  # path -> [mentions, modified]
    decisions: list[str] = field(default_factory=list)
    assistant_texts: list[str] = field(default_factory=list)
    last_turns: list[str] = field(default_factory=list)


def _note_paths(ex: _Extract, text: str, modified: bool) -> None:
    for path in _PATH_RE.findall(text) if "." in text else ():
        entry = ex.files.setdefault(path, [0, 0])
        entry[0] += 1
        entry[1] |= int(modified)


def _call_paths(ex: _Extract, call: dict[str, Any]) -> None:
    fn = call.get("function") or {}
    name = str(fn.get("name") or "tool")
    args = parse_arguments(fn.get("arguments"))
    arg_text = " ".join(str(v) for v in args.values())
    modified = name in WRITE_TOOLS or name in EDIT_TOOLS or bool(_MODIFY_CMD_RE.search(arg_text))
    _note_paths(ex, arg_text, modified)


def _action(call: dict[str, Any], results: dict[str, Any]) -> str:
    fn = call.get("function") or {}
    name = str(fn.get("name") or "tool")
    result = results.get(str(call.get("id")))
    if result is None:
        return f"[{name}] " + _clip(str(fn.get("arguments") or ""), 120)
    return summarize_tool_result(name, fn.get("arguments"), result)


def _error_lines(text: str) -> list[str]:
    if not ERROR_RE.search(text):
        return []
    return [_clip(m.group(0).strip(), ERROR_LINE_CHARS) for m in _ERROR_LINE_RE.finditer(text)]


def _recent(turns: Sequence[dict[str, Any]], ex: _Extract, results: dict[str, Any]) -> None:
    """Actions and error lines, newest first, only as many as the summary keeps."""
    actions: list[str] = []
    errors: list[str] = []
    for m in reversed(turns):
        if m.get("role") == "tool" and len(set(errors)) < MAX_ERRORS:
            errors.extend(reversed(_error_lines(content_text(m.get("content")))))
        elif len(actions) < MAX_ACTIONS:
            actions.extend(_action(c, results) for c in reversed(m.get("tool_calls") or ()))
        if len(actions) >= MAX_ACTIONS and len(set(errors)) >= MAX_ERRORS:
            break
    ex.actions, ex.errors = actions[::-1], errors[::-1]


def _extract(turns: Sequence[dict[str, Any]]) -> _Extract:
    ex = _Extract()
    results = {
        str(m.get("tool_call_id")): m.get("content") for m in turns if m.get("role") == "tool"
    }
    for m in turns:
        role = m.get("role")
        if role == "assistant":
            text = strip_think_blocks(content_text(m.get("content")))
            if text:
                ex.assistant_texts.append(text)
                _note_paths(ex, text, False)
                ex.decisions.extend(
                    _clip(s, ITEM_CHARS) for s in _sentences(text) if _DECISION_RE.search(s)
                )
            for call in m.get("tool_calls") or ():
                _call_paths(ex, call)
        elif is_real_user(m):
            text = content_text(m.get("content"))
            ex.users.append(text)
            _note_paths(ex, text, False)
    _recent(turns, ex, results)
    for m in turns[-LAST_TURNS:]:
        ex.last_turns.append(_last_turn(m, turns))
    return ex


def _last_turn(message: dict[str, Any], turns: Sequence[dict[str, Any]]) -> str:
    role = message.get("role")
    if role == "tool":
        cid = message.get("tool_call_id")
        for m in turns:
            for call in m.get("tool_calls") or ():
                if call.get("id") == cid:
                    fn = call.get("function") or {}
                    return summarize_tool_result(
                        fn.get("name"), fn.get("arguments"), message.get("content")
                    )
        return summarize_tool_result(message.get("name"), {}, message.get("content"))
    body = strip_think_blocks(content_text(message.get("content")))
    calls = [str((c.get("function") or {}).get("name")) for c in message.get("tool_calls") or ()]
    if calls:
        body = f"{body} [called: {', '.join(calls)}]".strip()
    return f"[{role}] {_clip(body or '(empty)', ITEM_CHARS)}"


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


def _dedupe_latest(items: Sequence[str], limit: int) -> list[str]:
    """Unique items, the latest occurrence winning, at most ``limit`` of the newest."""
    seen: set[str] = set()
    out: list[str] = []
    for item in reversed(items):
        if item not in seen:
            seen.add(item)
            out.append(item)
        if len(out) >= limit:
            break
    return out[::-1]


def _files(ex: _Extract, previous: list[str]) -> list[str]:
    ranked = sorted(ex.files.items(), key=lambda kv: (-kv[1][1], -kv[1][0]))
    items = [f"{p} (modified)" if flags[1] else p for p, flags in ranked[:MAX_FILES]]
    known = {i.removesuffix(" (modified)") for i in items}
    items += [p for p in previous if p.removesuffix(" (modified)") not in known]
    return items[:MAX_FILES][::-1]  # oldest-first order: trimming drops the least relevant


_CURRENT = "Current: "


def _previous_facts(prev: dict[str, list[str]]) -> list[Fact]:
    """Facts a previous summary carried, re-keyed so new statements can replace them."""
    facts = [
        Fact("constraint", fact_key(t), t) for t in prev.get("## Constraints & Preferences", [])
    ]
    for t in prev.get("## Goal", [])[1:]:
        text = t.removeprefix(_CURRENT)
        facts.append(Fact("goal", fact_key(text), text))
    for t in prev.get("## Critical Context", []):
        if not ERROR_RE.search(t):
            facts.append(Fact("fact", fact_key(t), t))
    return facts


def build_sections(
    turns: Sequence[dict[str, Any]],
    previous_summary: str | None = None,
    goal_hint: str | None = None,
) -> dict[str, list[str]]:
    """The summary as ``{heading: items}``, oldest item first in each section.

    ``goal_hint`` is the conversation's first user message, used for the goal
    when neither the turns nor a previous summary state one. Facts (pinned
    rules, goal states, exact values) are merged with the previous summary's,
    a restated item replacing the older statement; error lines are bounded.
    """
    prev = parse_summary(previous_summary)
    ex = _extract(turns)
    facts = merge_facts(_previous_facts(prev), extract_facts(turns))
    by_kind: dict[str, list[str]] = {"goal": [], "fact": [], "pinned": []}
    for f in facts:
        by_kind[f.kind if f.kind in ("goal", "fact") else "pinned"].append(f.text)
    first_ask = goal_hint or (ex.users[0] if ex.users else None)
    goal = prev.get("## Goal", [])[:1] or ([_clip(first_ask, GOAL_CHARS)] if first_ask else [])
    old_errors = [t for t in prev.get("## Critical Context", []) if ERROR_RE.search(t)]
    return {
        "## Goal": [*goal, *(_CURRENT + g for g in by_kind["goal"])],
        "## Constraints & Preferences": by_kind["pinned"],
        "## Active Task": [_clip(ex.users[-1], TASK_CHARS)]
        if ex.users
        else prev.get("## Active Task", []),
        "## In Progress": ex.last_turns or prev.get("## In Progress", []),
        "## Completed Actions": _dedupe_latest(
            [*prev.get("## Completed Actions", []), *ex.actions], MAX_ACTIONS
        ),
        "## Key Decisions": _dedupe_latest(
            [*prev.get("## Key Decisions", []), *ex.decisions], MAX_DECISIONS
        ),
        "## Relevant Files": _files(ex, prev.get("## Relevant Files", [])),
        "## Pending User Asks": [_clip(u, ITEM_CHARS) for u in ex.users[-MAX_ASKS:]]
        or prev.get("## Pending User Asks", []),
        "## Remaining Work": _remaining(ex) or prev.get("## Remaining Work", []),
        "## Critical Context": [
            *by_kind["fact"],
            *_dedupe_latest([*old_errors, *ex.errors], MAX_ERRORS),
        ],
    }


def _remaining(ex: _Extract) -> list[str]:
    items = []
    for text in ex.assistant_texts[-LAST_TURNS:]:
        items.extend(_clip(s, ITEM_CHARS) for s in _sentences(text) if _REMAINING_RE.search(s))
    return _dedupe_latest(items, 6)


def render_sections(sections: dict[str, list[str]]) -> str:
    """Markdown with every heading in template order."""
    blocks = []
    for heading in SUMMARY_HEADINGS:
        items = sections.get(heading) or []
        body = "\n".join(f"- {item}" for item in items) if items else "None"
        blocks.append(f"{heading}\n{body}")
    return "\n\n".join(blocks)


def _focus_terms(focus: str | None) -> list[str]:
    return [w for w in re.findall(r"\w{3,}", (focus or "").lower())]


def _drop_one(sections: dict[str, list[str]], focus: list[str]) -> bool:
    """Drop the oldest, least relevant item of the lowest-priority section; False if none left."""
    for heading in sorted(sections, key=lambda h: _PRIORITY.get(h, 0)):
        items = sections[heading]
        if not items:
            continue
        spare = [i for i, it in enumerate(items) if not any(t in it.lower() for t in focus)]
        noisy = [i for i in spare if ERROR_RE.search(items[i])]  # error lines go before facts
        del items[(noisy or spare or [0])[0]]
        return True
    return False


def fit_sections(sections: dict[str, list[str]], max_chars: int, focus: str | None = None) -> str:
    """Render within ``max_chars``, dropping low-priority items first."""
    terms = _focus_terms(focus)
    text = render_sections(sections)
    while len(text) > max_chars and _drop_one(sections, terms):
        text = render_sections(sections)
    return text if len(text) <= max_chars else text[: max(0, max_chars - 3)] + "..."


class DeterministicSummarizer:
    """Extractive summariser; no LLM, same headings as the LLM template."""

    name = "deterministic"

    def summarize(
        self,
        turns: Sequence[dict[str, Any]],
        *,
        previous_summary: str | None = None,
        focus: str | None = None,
        max_chars: int = DEFAULT_MAX_CHARS,
        goal_hint: str | None = None,
    ) -> str:
        """Summarise ``turns`` (updating ``previous_summary`` when given)."""
        sections = build_sections(turns, previous_summary, goal_hint)
        if focus:
            sections["## Active Task"] = [
                *sections["## Active Task"],
                f"Focus: {_clip(focus, 200)}",
            ]
        return fit_sections(sections, max(200, min(max_chars, DEFAULT_MAX_CHARS)), focus)
