"""Pinned facts: constraints, rules, budgets, deadlines, preferences and corrections.

They are found in the turns being dropped and carried verbatim into
``## Constraints & Preferences`` by both summarisers; a restated item replaces
the older statement of the same item (SPEC 3.7).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import content_text, is_real_user
from .prompt import SUMMARY_HEADINGS, parse_summary

# Sentences longer than this are not pinned verbatim (they are task text, not a rule).
MAX_FACT_CHARS = 400
MIN_FACT_CHARS = 8
# In user messages up to this long every declarative sentence is kept as a statement,
# cue words or not...
STATEMENT_MESSAGE_CHARS = 600
# Fewer words than this (no exact value in them) is chat, not a statement to keep...
MIN_STATEMENT_WORDS = 5
# ...and over this long (pasted text) only sentences with cue words count, in its first
# and last stretch of this many characters.
PASTED_MESSAGE_CHARS = 2_000
PASTED_EDGE_CHARS = 500
# Facts read from the newest turns at most: an 8,000-character summary holds fewer.
MAX_FACTS = 150

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
            r"current focus|focus is)\b|^\W*goals?\s*(?::|is\b)|目标|目標|목표",
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
# Short turns that state nothing durable: acknowledgements, fillers.
_FILLER_LEAD_RE = re.compile(
    r"^\W*(?:(?:ok(?:ay)?|k|hmm+|huh|lol|yes|yeah|yep|no|nope|sure|so|well|wait|great|good|"
    r"nice|cool|perfect|thanks|thank you|right|alright|fine|sorry|oops|my bad|got it|"
    r"interesting|vale|danke|merci)\b[\s,.!:;-]*)+",
    re.IGNORECASE,
)
_IMPERATIVE_RE = re.compile(
    r"^(?:try|run|show|go|keep|continue|check|look|do|rerun|retry|paste|explain|tell|give|"
    r"let'?s|let me|carry|proceed|repeat|stop|wait|summari[sz]e|double-check)\b",
    re.IGNORECASE,
)
_WORD_RE = re.compile(r"[\w][\w.-]*", re.UNICODE)
# A sentence opening like this explains the one before it ("It holds the only copy.")...
_CARRY_ON_RE = re.compile(
    r"^(?:it|that|this|they|these|those|so|because|since|otherwise|which)\b", re.IGNORECASE
)
# ...and one that points back with a pronoun ("Fix them before the review.", "Use it in
# every reply.") says nothing without the sentence before it.
_POINTS_BACK_RE = re.compile(r"\b(?:it|its|them|they|their|these|those)\b", re.IGNORECASE)
_CJK_CHAR_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_STOP_WORDS = frozenset(
    """the a an is are was were be been to of in on at for from by with and or but it its this
    that these those our my your we i you they he she them us me now still new is will would
    should must can could has have had do does did not no so as up out over into than then
    there here what which who when where why how all any each every some more most very just
    also only about after before again use using used let lets go going get got make made
    scratch actually instead please set keep change changed moved move raise drop rather want
    bump bumped raised lowered dropped pushed resized swapped switched switch got went new
    like need needs never always ever don't dont do not must should cannot can't won't avoid
    any anything""".split()
)
# Share of the distinctive words (weighted by rarity) a cued restatement must have in
# common with the statement it replaces.
RESTATE_SCORE = 0.45
# Subjects too generic to identify an item ("The goal is ...", "Plan: ...").
_GENERIC_SUBJECTS = frozenset(
    "goal aim plan objective task idea point focus priority note rule reminder thing "
    "main thing priority target intent mission".split()
)
_VALUE_WORDS = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday today tomorrow tonight week
    month year january february march april may june july august september october november
    december jan feb mar apr jun jul aug sep sept oct nov dec kb mb gb tb ms sec secs second
    seconds min mins minute minutes hour hours day days weeks months years px percent""".split()
)
# Words saying a statement replaces an earlier one.
_RESTATE_RE = re.compile(
    r"\b(actually|scratch that|correction|update|changed?|moved?|switch(?:ed|ing)?|swapp?ed|"
    r"instead|no longer|now|anymore|bump(?:ed)?|raised?|lower(?:ed)?|increased?|decreased?|"
    r"drop(?:ped)?|pushed|resized|replaced?|new|from now on|rather|got|went|became)\b|"
    r"改为|改成|换|变更|現在|今は|変更|jetzt|verschoben|ahora|maintenant|désormais",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Fact:
    """One pinned statement: its kind, the key that identifies the item, the verbatim text."""

    kind: str
    key: str
    text: str


# "Label: text" with a few words before the colon and a whole statement after it.
_LEAD_LABEL_RE = re.compile(r"^[^\s:：]+(?:\s+[^\s:：]+){0,2}\s*[:：]\s+(?=(?:\S+\s+){3}\S)")
# Articles and the plain copula: words a telegraphic note leaves out without losing a value.
_ARTICLE_RE = re.compile(r"\b(?:the|a|an|is|are|was|were)\s+", re.IGNORECASE)


def condense(text: str) -> str:
    """``text`` in fewer characters, its values, names and rules intact.

    A leading label that heads a whole statement (``NOTE: the API is on port
    8080``) goes, and so do articles and the plain copula ("is", "are",
    "was", "were"); every other word stays, so every exact token, negation and
    obligation word is kept.
    """
    out = _LEAD_LABEL_RE.sub("", text, count=1)
    out = _ARTICLE_RE.sub("", out)
    out = re.sub(r"\s{2,}", " ", out).strip()
    return out[:1].upper() + out[1:] if out else text


def wording(text: str) -> str:
    """What ``text`` says, whatever its condensation: ``condense`` lower-cased, end stop gone.

    A statement and its condensed form (a summary's) have the same wording.
    """
    return condense(text).rstrip(".!。 ").lower()


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
    if match and _labels_a_sentence(body, match):
        return fact_key(match["value"])  # "FACT: The database is X": keyed by what it states
    if match and not re.search(r"\b(never|not|don'?t)\b", match["subject"], re.IGNORECASE):
        words = _normal_words(match["subject"])
        if words and not set(words) <= _GENERIC_SUBJECTS:
            return "item:" + " ".join(words[-6:])
    return "text:" + " ".join(_normal_words(body))


# A value of at least this many words after "Label:" is a statement of its own.
LABELLED_SENTENCE_WORDS = 4


def _labels_a_sentence(body: str, match: re.Match[str]) -> bool:
    """Whether ``Label: text`` puts a heading before a whole statement.

    ``Deadline: Friday`` names an item and its value; in ``Note: the API is on
    port 8080`` the part before the colon says what kind of statement follows,
    and every statement of that kind shares it, so it cannot tell items apart.
    Only the colon form, with the subject as the text's first part, and a value
    of several words.
    """
    subject = match["subject"]
    rest = body[len(subject) :].lstrip()
    return rest.startswith((":", "：")) and len(match["value"].split()) >= LABELLED_SENTENCE_WORDS


_QUESTION_RE = re.compile(r"[?？]\s*$")
# One-off asks: a task for now, not a standing rule ("use", "keep", "avoid" state rules).
_ASK_LEAD_RE = re.compile(
    r"^(?:(?:also|and|now|then|next|please|pls|ok(?:ay)?|so|great|thanks)[,.!\s]+)*"
    r"(?:can you|could you|would you|will you|i want you to|i need you to|go ahead and|"
    r"(?:add|fix|make|run|write|create|update|change|remove|delete|rename|refactor|implement|"
    r"check|test|try|look|find|investigate|explain|show|summari[sz]e|describe|move|handle|"
    r"support|build|deploy|revert|undo|document|review|install|migrate|split|merge|"
    r"convert|replace|optimi[sz]e|clean|tell|list|give|send|open|commit|push|continue|"
    r"finish|start|stop|debug|compare|verify|extract|rewrite|speed|reduce|rerun|retry|"
    r"paste|restart|upgrade|bump|set up|wrap up)\b)",
    re.I,
)
# Words that make an ask a standing rule ("check with me before you ...").
_STANDING_RE = re.compile(
    r"\b(before|until|unless|whenever|always|never|every|each time|from now on|any)\b", re.I
)


def is_request(sentence: str) -> bool:
    """Whether a user sentence asks for something now: a question or a one-off imperative."""
    s = sentence.strip()
    if len(s) < 4:
        return False
    return bool(_QUESTION_RE.search(s) or _ASK_LEAD_RE.match(s))


def _is_ask(sentence: str) -> bool:
    """A request that is not also a standing rule: left to the active task, not pinned."""
    return is_request(sentence) and not _STANDING_RE.search(sentence)


def is_filler(sentence: str) -> bool:
    """A sentence that states nothing to keep: an acknowledgement, a question, a short nudge.

    After leading acknowledgements ("ok", "sorry", "hmm") are dropped, fewer than
    five words (about ten CJK characters) without an exact value is chat, not a
    statement; so is a short imperative ("try it with verbose on").
    """
    body = _FILLER_LEAD_RE.sub("", sentence).strip()
    if body.endswith(("?", "？")):
        return True
    words = len(body.split())
    cjk = len(_CJK_CHAR_RE.findall(body))
    if cjk:  # no spaces between words: count characters (about two a word)
        words += cjk // 2
    if _VALUE_RE.search(body):
        return words < 2
    if words < MIN_STATEMENT_WORDS:
        return True
    return bool(_IMPERATIVE_RE.match(body)) and words <= 6


@functools.lru_cache(maxsize=4_096)
def _short_facts(text: str) -> tuple[Fact, ...]:
    return tuple(_facts_from_text(text))


def clear_cache() -> None:
    """Forget cached readings of short messages."""
    _short_facts.cache_clear()


def facts_from_text(text: str) -> list[Fact]:
    """Pinned facts stated in one user message, in order (see ``_facts_from_text``).

    Short messages are cached: "ok", "continue" and friends come back all the time.
    """
    if len(text) <= STATEMENT_MESSAGE_CHARS:
        return list(_short_facts(text))
    return _facts_from_text(text)


def _facts_from_text(text: str) -> list[Fact]:
    """Pinned facts stated in one user message, in order.

    Sentences with cue words get their kind; in a short message every other
    declarative sentence is a ``statement`` (the user said it, so it is kept),
    and a sentence with an exact value a ``fact``. A long message (pasted text)
    only gives its cued sentences.
    """
    if len(text) < MIN_FACT_CHARS:
        return []
    facts: list[Fact] = []
    short = len(text) <= STATEMENT_MESSAGE_CHARS
    pasted = len(text) > PASTED_MESSAGE_CHARS
    if pasted:  # the user's own words sit around a paste, not inside it
        text = f"{text[:PASTED_EDGE_CHARS]}\n{text[-PASTED_EDGE_CHARS:]}"
    pos = 0
    joined_to = -1  # index in ``facts`` of the fact the previous sentence belongs to
    for sentence in split_sentences(text):
        start = text.find(sentence, pos)
        pos = start + len(sentence) if start >= 0 else pos
        if not MIN_FACT_CHARS <= len(sentence) <= MAX_FACT_CHARS or sentence.endswith((":", "：")):
            joined_to = -1
            continue  # too short or long, or a lead-in ("Two things before you start:")
        kind = classify(sentence)
        if kind is None and pasted:
            continue
        if kind in (None, "correction") and is_filler(sentence):
            joined_to = -1
            continue  # "sorry, was in a meeting", "no, the other one"
        ask = kind is None and _is_ask(sentence)
        if ask and _QUESTION_RE.search(sentence):
            continue  # a question states nothing durable
        if kind is None and not ask and _VALUE_RE.search(sentence) and len(sentence) <= 200:
            kind = "fact"
        if kind is None and short and not is_filler(sentence):
            kind = "statement"  # the user said it: an instruction or a fact, kept verbatim
        carries_on = (
            kind == "statement"
            or bool(_CARRY_ON_RE.match(sentence))
            or bool(_POINTS_BACK_RE.search(sentence))
        )
        if carries_on and joined_to == len(facts) - 1 >= 0 and start >= 0:
            # It carries on from the fact before it ("Keep X. Audits need it."): one fact.
            prev = facts[-1]
            whole = text[text.find(prev.text) : pos] if prev.text in text else prev.text
            if len(whole) <= MAX_FACT_CHARS:
                facts[-1] = Fact(prev.kind, prev.key, whole)
                continue
        if kind:
            facts.append(Fact(kind, fact_key(sentence), sentence))
            joined_to = len(facts) - 1
        else:
            joined_to = -1
    return facts


def extract_facts(messages: Sequence[dict[str, Any]], *, limit: int = MAX_FACTS) -> list[Fact]:
    """Pinned facts from the real user messages of ``messages``, oldest first.

    Messages are read newest first until ``limit`` facts are found: a summary
    holds far fewer, and the newest statement of an item is the one that counts.
    """
    found: list[list[Fact]] = []
    total = 0
    for m in reversed(messages):
        if total >= limit:
            break
        if is_real_user(m):
            facts = facts_from_text(content_text(m.get("content")))
            found.append(facts)
            total += len(facts)
    return [f for facts in reversed(found) for f in facts]


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


def _content_words(text: str) -> set[str]:
    """Lower-cased content words with a light stemming (plural, -ing, -ed dropped).

    Values (anything with a digit, units, weekdays, months) are left out: a
    restatement changes the value and keeps the subject.
    """
    out = set()
    for word in _WORD_RE.findall(text.lower()):
        word = word.strip(".-")
        if len(word) < 2 or word in _STOP_WORDS or word in _VALUE_WORDS:
            continue
        if any(ch.isdigit() for ch in word):
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if len(word) > len(suffix) + 3 and word.endswith(suffix):
                word = word[: -len(suffix)]
                break
        out.add(word)
    return out


_NAME_RE = re.compile(r"\b[A-Z][a-z]+[A-Z]\w*|\b[A-Za-z]+(?:[-_][A-Za-z]+)+\b")


def _names(text: str) -> set[str]:
    """Identifier-like words (codenames ``orchid-basalt``, ``snake_case``, CamelCase) without
    digits: what a statement is about, as opposed to its values."""
    return {n.lower() for n in _NAME_RE.findall(text)}


class _Restatements:
    """Finds the earlier fact a statement restates, by shared distinctive words.

    Only a statement with a restatement cue ("scratch that", "moved to", "now",
    "instead", ...) replaces an earlier one: they must share two words, one of
    them used by no third fact, making most of the shorter one (by rarity).
    Distinct items with a common word ("the API port", "the admin port") are
    not merged.
    """

    def __init__(self, facts: Sequence[Fact]) -> None:
        self.words = {id(f): _content_words(f.text) for f in facts}
        self.df: dict[str, int] = {}
        for words in self.words.values():
            for w in words:
                self.df[w] = self.df.get(w, 0) + 1
        self.index: dict[str, set[str]] = {}
        self.facts_words: dict[str, set[str]] = {}
        self.names: dict[str, set[str]] = {}

    def add(self, fact: Fact) -> None:
        words = self.words.get(id(fact), set())
        self.facts_words[fact.key] = words
        self.names[fact.key] = _names(fact.text)
        for w in words:
            self.index.setdefault(w, set()).add(fact.key)

    def remove(self, key: str) -> None:
        self.names.pop(key, None)
        for w in self.facts_words.pop(key, ()):
            self.index.get(w, set()).discard(key)

    def _weight(self, words: set[str]) -> float:
        """Rarity-weighted size of the words another fact could share (df >= 2)."""
        return sum(1.0 / self.df[w] for w in words if self.df.get(w, 0) >= 2)

    def restated(self, fact: Fact) -> str | None:
        """The key of the earlier fact ``fact`` restates, or None."""
        if not _RESTATE_RE.search(fact.text):
            return None
        words = self.words.get(id(fact), set())
        names = _names(fact.text)
        own = self._weight(words)
        best, best_score = None, 0.0
        for key in {k for w in words if self.df.get(w, 0) <= 3 for k in self.index.get(w, ())}:
            other = self.facts_words[key]
            shared = words & other
            if not any(self.df.get(w, 0) <= 2 for w in shared):
                continue
            theirs = self.names.get(key, set())
            if names - theirs and theirs - names:
                continue  # each names something the other does not: two subjects
            score = self._weight(shared) / max(1e-9, min(own, self._weight(other)))
            if len(shared) >= 2 and score >= RESTATE_SCORE and score > best_score:
                best, best_score = key, score
        return best


def merge_facts(older: Sequence[Fact], newer: Sequence[Fact]) -> list[Fact]:
    """Merge two fact lists; a later fact about the same item replaces the earlier one."""
    merged: dict[str, Fact] = {}  # key -> fact, in order of latest statement
    by_head: dict[str, set[str]] = {}  # last word of an item key -> keys
    by_wording: dict[str, str] = {}  # ``wording`` -> key: a condensed copy is the same fact
    everything = [*older, *newer]
    cued = any(_RESTATE_RE.search(f.text) for f in everything[1:])
    restate = _Restatements(everything) if cued else None
    for fact in everything:
        rivals = {fact.key}
        said = wording(fact.text)
        if said in by_wording:
            rivals.add(by_wording[said])
        by_wording[said] = fact.key
        if fact.key.startswith("item:") and fact.key[5:].split():
            head = fact.key[5:].split()[-1]
            rivals |= {k for k in by_head.get(head, ()) if same_item(k, fact.key)}
            by_head.setdefault(head, set()).add(fact.key)
        if restate is not None and not rivals & merged.keys():
            similar = restate.restated(fact)
            rivals |= {similar} if similar else set()
        for key in rivals:
            if merged.pop(key, None) is not None and restate is not None:
                restate.remove(key)
        merged[fact.key] = fact
        if restate is not None:
            restate.add(fact)
    return list(merged.values())


PINNED_KINDS = (
    "safety",
    "constraint",
    "budget",
    "deadline",
    "preference",
    "correction",
    "statement",
)


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
