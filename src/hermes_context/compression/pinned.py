"""Pinned facts: constraints, rules, budgets, deadlines, preferences and corrections.

They are found in the turns being dropped and carried verbatim into
``## Constraints & Preferences`` by both summarisers; a restated item replaces
the older statement of the same item (SPEC 3.7).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import content_text, is_real_user
from .prompt import SUMMARY_HEADINGS, parse_summary

# Sentences longer than this are not pinned verbatim (they are task text, not a rule).
MAX_FACT_CHARS = 400
MIN_FACT_CHARS = 8

_KIND_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        (
            "safety",
            r"\b(never|do not|don'?t|must not|mustn'?t|under no circumstances|forbidden|"
            r"not allowed|prohibited|no matter what|without (asking|approval|confirmation)|"
            r"ask (me )?before|confirm before|destructive|rm -rf|force[- ]push)\b"
            r"|禁止|不要|不能|千万|切勿|絶対|しないで|금지",
        ),
        ("budget", r"\b(budget|spend|cost(s)? (at most|under|below)|quota)\b|[$€£]\s?\d|预算|予算"),
        (
            "deadline",
            r"\b(deadline|due (by|on|date)|no later than|by (monday|tuesday|wednesday|thursday|"
            r"friday|saturday|sunday|tomorrow|tonight|noon|eod|end of)|before \d{1,2}(:\d{2})?)\b"
            r"|截止|之前完成|締め切り|마감",
        ),
        (
            "preference",
            r"\b(i (prefer|like|love|hate|dislike|want|need|always|usually)|i'?d (rather|like|prefer)|"
            r"please (use|write|keep|reply|answer|respond|always|avoid)|my preference|"
            r"call me|my name is|prefer(s|red)?)\b|偏好|喜欢|请用|我希望|好み|선호",
        ),
        (
            "correction",
            r"^\W*(actually|correction|update|scratch that|wait|no,|sorry)\b|\bi meant\b|"
            r"\b(changed|moved|switched) to\b|\bis now\b|\bnot .{1,40}, but\b|更正|改为|訂正",
        ),
        (
            "constraint",
            r"\b(must|always|only|required?|need(s)? to|have to|has to|make sure|ensure|"
            r"at most|at least|no more than|maximum|minimum|limit(ed)?|keep .{1,40} (under|below)|"
            r"stay (under|within|below)|compatible with|target(s|ing)? python)\b|必须|务必|必ず|반드시",
        ),
        (
            "goal",
            r"\b(the goal|our goal|my goal|main goal|objective|we are trying to|the task is|"
            r"current focus|focus is)\b|目标|目標|목표",
        ),
    )
)
# A sentence with one of these holds an exact value worth keeping.
_VALUE_RE = re.compile(
    r"\d|`[^`]+`|https?://|[\w.-]+/[\w./-]+|\b[\w-]+\.(py|js|ts|json|ya?ml|toml|md|sql|sh|go|rs)\b"
)
_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`\"'(\[])|(?<=[。！？])|\n+")
_LEAD_FILLER_RE = re.compile(
    r"^\W*((actually|correction|update|note|reminder|fyi|ok(ay)?|so|also|please|important|"
    r"remember|new|wait|sorry|no)\b[\s,:!-]*)+",
    re.IGNORECASE,
)
_COPULA_RE = re.compile(
    r"^(?P<subject>.{3,80}?)\s*(?:\b(?:is|are|was|will be|should be|must be|has to be|"
    r"changed to|moved to|switched to|set to)\b|[:=])\s*(?:now\s+)?(?P<value>.+)$",
    re.IGNORECASE,
)
_PREFER_RE = re.compile(
    r"\bprefer\s+(?P<a>[\w\s+#.-]{1,40}?)\s+(?:over|to|instead of|rather than)\s+(?P<b>[\w\s+#.-]{1,40})",
    re.IGNORECASE,
)
_KEY_DROP_WORDS = frozenset(
    "the a an our my your their this that now still new updated current currently please".split()
)


@dataclass(frozen=True)
class Fact:
    """One pinned statement: its kind, the key that identifies the item, the verbatim text."""

    kind: str
    key: str
    text: str


def split_sentences(text: str) -> list[str]:
    """Split text into sentences and lines, keeping their wording."""
    return [s.strip() for s in _SENTENCE_SPLIT_RE.split(text) if s and s.strip()]


def classify(sentence: str) -> str | None:
    """The kind of pinned fact a sentence states, or None."""
    for kind, pattern in _KIND_PATTERNS:
        if pattern.search(sentence):
            return kind
    return None


def _normal_words(text: str) -> list[str]:
    words = re.findall(r"[\w$€£%#+.-]+", text.lower())
    return [w.strip(".-") for w in words if w.strip(".-") and w not in _KEY_DROP_WORDS]


def fact_key(sentence: str) -> str:
    """The item a sentence is about, so a restatement can replace it."""
    body = _LEAD_FILLER_RE.sub("", sentence).strip()
    prefer = _PREFER_RE.search(body)
    if prefer:
        pair = sorted({" ".join(_normal_words(prefer["a"])), " ".join(_normal_words(prefer["b"]))})
        return "prefer:" + "|".join(pair)
    match = _COPULA_RE.match(body)
    if match and not re.search(r"\b(never|not|don'?t)\b", match["subject"], re.IGNORECASE):
        words = _normal_words(match["subject"])
        if words:
            return "item:" + " ".join(words[-6:])
    return "text:" + " ".join(_normal_words(body))


def facts_from_text(text: str) -> list[Fact]:
    """Pinned facts stated in one user message, in order."""
    facts = []
    for sentence in split_sentences(text):
        if not MIN_FACT_CHARS <= len(sentence) <= MAX_FACT_CHARS:
            continue
        kind = classify(sentence)
        if kind is None and _VALUE_RE.search(sentence) and len(sentence) <= 200:
            kind = "fact"
        if kind:
            facts.append(Fact(kind, fact_key(sentence), sentence))
    return facts


def extract_facts(messages: Iterable[dict[str, Any]]) -> list[Fact]:
    """Pinned facts from the real user messages of ``messages``, oldest first."""
    facts: list[Fact] = []
    for m in messages:
        if is_real_user(m):
            facts.extend(facts_from_text(content_text(m.get("content"))))
    return facts


def same_item(a: str, b: str) -> bool:
    """Whether two fact keys name the same item.

    ``item:`` keys match when one subject ends the other ("deployment deadline"
    and "deadline"), so "the deadline is now Monday" replaces the older date.
    """
    if a == b:
        return True
    if not (a.startswith("item:") and b.startswith("item:")):
        return False
    wa, wb = a[5:].split(), b[5:].split()
    short, long_ = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    return bool(short) and long_[-len(short) :] == short


def merge_facts(older: Sequence[Fact], newer: Sequence[Fact]) -> list[Fact]:
    """Merge two fact lists; a later fact about the same item replaces the earlier one."""
    merged: dict[str, Fact] = {}  # key -> fact, in order of latest statement
    by_head: dict[str, set[str]] = {}  # last word of an item key -> keys
    for fact in [*older, *newer]:
        rivals = {fact.key}
        if fact.key.startswith("item:") and fact.key[5:].split():
            head = fact.key[5:].split()[-1]
            rivals |= {k for k in by_head.get(head, ()) if same_item(k, fact.key)}
            by_head.setdefault(head, set()).add(fact.key)
        for key in rivals:
            merged.pop(key, None)
        merged[fact.key] = fact
    return list(merged.values())


PINNED_KINDS = ("safety", "constraint", "budget", "deadline", "preference", "correction")


def pinned_texts(facts: Sequence[Fact]) -> list[str]:
    """Texts of the facts that belong under ``## Constraints & Preferences``."""
    return [f.text for f in facts if f.kind in PINNED_KINDS]


def pinned_for_summary(turns: list[dict[str, Any]], previous: str | None) -> list[str]:
    prev_items = parse_summary(previous).get("## Constraints & Preferences", [])
    old = [Fact("constraint", fact_key(t), t) for t in prev_items]
    return pinned_texts(merge_facts(old, extract_facts(turns)))


def ensure_pinned(summary: str, pinned: Sequence[str]) -> str:
    """Insert pinned facts the LLM left out under ``## Constraints & Preferences``."""
    missing = [p for p in pinned if p not in summary]
    if not missing:
        return summary
    heading = "## Constraints & Preferences"
    bullets = "\n".join(f"- {p}" for p in missing)
    if heading not in summary:
        later = [summary.find(h) for h in SUMMARY_HEADINGS[2:] if h in summary]
        at = min(later) if later else len(summary)
        block = f"{heading}\n{bullets}"
        return f"{summary[:at].rstrip()}\n\n{block}\n\n{summary[at:].lstrip()}".strip()
    head, _, rest = summary.partition(heading)
    rest = rest.lstrip("\n")
    if rest.startswith("None"):
        rest = "\n" + rest[4:].lstrip(" \n")
    return f"{head}{heading}\n{bullets}\n{rest}"
