"""What makes a sentence or an output line worth carrying, measured without reading its wording.

A successor agent needs the exact things: names, paths, numbers, quoted
values, a value changed ``from X to Y``, a rule (``never``, ``must``,
``only``, ``do not``). It needs most what the conversation itself came back
to: a token said once and then referred to again in later messages is what
the work turned on, while a token said everywhere (the project's name) tells
nothing. And it needs what the kept head and tail do not already say.

``Index`` reads the conversation once (which messages mention each exact
token); ``features`` measures one candidate against it; ``salience`` weighs
the features into a score in ``[0, 1]``. The weights were chosen on the tuned
ten of the trajectory probes (``docs/benchmarks.md``), never on the held-out ten.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# An exact token: a code span, a URL or path, a dotted/underscored/hyphenated identifier,
# CamelCase, an all-capitals word, a number (with a unit or version dots), a quoted value.
_EXACT_RE = re.compile(
    r"`([^`\n]{2,60})`"
    r"|((?:[\w.~-]*/)+[\w.-]+|\b[\w-]+\.(?:py|js|ts|go|rs|java|c|h|cpp|rb|md|json|ya?ml|toml|txt|"
    r"cfg|ini|sh|sql|html|css|lock|log)\b)"
    r"|\b(_*[A-Za-z][A-Za-z0-9]*(?:[_.:-][A-Za-z0-9]+)+)\b"
    r"|\b([a-z]+[A-Z]\w*|[A-Z][a-z]+[A-Z]\w*)\b"
    r"|\b([A-Z][A-Z0-9_]{2,})\b"
    r"|(\d+(?:[.,:]\d+)*(?:\s?%|ms|s|kb|mb|gb)?)"
    r"|[\"“'‘]([^\"”'’\n]{3,40})[\"”'’]"
)
# The same tokens, found faster: a plain word (no capital inside, nothing joined to it) and
# a run of whitespace can start no token and hold none, so they are stepped over whole
# instead of trying every alternative at each of their characters. Matches of the two
# leading alternatives carry no group (``_exact`` skips them); the tokens are the same
# (``tests/test_salience.py`` checks it).
_EXACT_SCAN_RE = re.compile(r"[A-Z]?[a-z]+(?![\w.~/:-])|\s+|" + _EXACT_RE.pattern)
# A value changed: "from 5 to 0.5", "5 -> 0.5", "a → b", "de X a Y", "von X auf Y", "从 X 改为 Y".
_CHANGE_RE = re.compile(
    r"\bfrom\s+\S+\s+to\s+\S|\S\s*(?:->|=>|→)\s*\S|\bde\s+\S+\s+(?:a|à)\s+\S|"
    r"\bvon\s+\S+\s+(?:auf|zu)\s+\S|从\s*\S+\s*(?:改为|改成|变为|到)"
)
# Negation and obligation: the closed class of words that turn a statement into a rule
# (matched on the lower-cased text, like the change above).
_RULE_RE = re.compile(
    r"\b(?:never|must|only|always|do not|don't|does not|doesn't|cannot|can't|should not|"
    r"shouldn't|not allowed|required|forbidden)\b|不要|必须|只能|禁止|绝不|不能"
)
_WORD_RE = re.compile(r"[^\W\d_]{3,}")
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
# A token found in more than this share of the messages says nothing about one of them.
COMMON_SHARE = 0.2
# Messages after a candidate that count as referring back to it, at most.
ECHO_CAP = 3
# Exact tokens that count, at most.
EXACT_CAP = 4
# A sentence said word for word in this many messages is a stock line, not news.
STOCK_TIMES = 3
# Texts up to this long have their exact tokens cached.
CACHED_CHARS = 2_000
# How much of each message the index reads (a pasted log is not a mention).
INDEX_CHARS = 2_000


def exact_tokens(text: str) -> frozenset[str]:
    """The exact tokens of ``text`` (``_EXACT_RE``), lower-cased.

    A qualified name or path also gives its last part (``cfg.SETTLE_MS`` gives
    ``settle_ms``, ``src/app/main.py`` gives ``main.py``), the way later
    messages refer to it. Texts up to ``CACHED_CHARS`` are cached: a line or
    sentence is read by the index and again as a candidate.
    """
    if len(text) <= CACHED_CHARS:
        return _exact_cached(text)
    return _exact(text)


@functools.lru_cache(maxsize=16_384)
def _exact_cached(text: str) -> frozenset[str]:
    return _exact(text)


def _exact(text: str) -> frozenset[str]:
    out = set()
    for match in _EXACT_SCAN_RE.finditer(text):
        if match.lastindex is None:
            continue  # a plain word or whitespace, stepped over
        token = next(g for g in match.groups() if g)
        token = token.strip().lower()
        if len(token) >= 2 and not (token.isdigit() and len(token) == 1):
            out.add(token)
            last = _last_part(token)
            if last is not None:
                out.add(last)
    return frozenset(out)


def _last_part(token: str) -> str | None:
    """The part of a qualified name or path that later text uses alone, if any."""
    base = token
    while ":" in base and base.rsplit(":", 1)[1].isdigit():  # file.py:88:3
        base = base.rsplit(":", 1)[0]
    for sep in ("/", ":"):
        if sep in base:
            base = base.rsplit(sep, 1)[1]
    if base == token and "." in base:
        head, _, tail = base.rpartition(".")
        base = tail if head and len(tail) >= 5 else base  # an attribute, not an extension
    return base if base != token and len(base) >= 3 else None


def clear_cache() -> None:
    """Forget cached token readings (benchmarks measure cold runs)."""
    _exact_cached.cache_clear()


def words(text: str) -> set[str]:
    """Content words (three letters or more) of ``text``, lower-cased, and its CJK characters."""
    return {w.lower() for w in _WORD_RE.findall(text)} | set(_CJK_RE.findall(text))


def vocabulary(text: str) -> set[str]:
    """The exact tokens and content words of ``text``: what a candidate is compared with."""
    return set(exact_tokens(text)) | words(text)


class Index:
    """Which messages mention each exact token and each word: read once per conversation."""

    def __init__(
        self, texts: Sequence[str], outputs: Sequence[bool] = (), *, newest: int | None = None
    ) -> None:
        """Read ``texts`` (one per message); ``outputs[i]`` marks a tool's output.

        Only messages that are not outputs count as referring back to a token:
        a command printing the same thing again is not the agent using it.
        ``newest`` reads only that many of the newest messages (the window the
        candidates come from), so the cost does not grow with the conversation.
        """
        first = 0 if newest is None else max(0, len(texts) - newest)
        self.size = len(texts) - first
        self.mentions: dict[str, list[int]] = {}
        self.word_count: dict[str, int] = {}
        self.outputs = frozenset(i for i, o in enumerate(outputs) if o and i >= first)
        for seq in range(first, len(texts)):
            text = texts[seq]
            head = text[:INDEX_CHARS]
            for token in exact_tokens(head):
                self.mentions.setdefault(token, []).append(seq)
            for word in words(head):
                self.word_count[word] = self.word_count.get(word, 0) + 1

    def common(self, token: str) -> bool:
        """Whether ``token`` is mentioned in so many messages that it names nothing in particular."""
        return len(self.mentions.get(token, ())) > max(3, COMMON_SHARE * self.size)

    def first(self, token: str) -> int:
        """The message that mentions ``token`` first (-1: none does)."""
        at = self.mentions.get(token)
        return at[0] if at else -1

    def referred_back(self, tokens: Iterable[str], seq: int) -> int:
        """How many later messages refer back to a token that message ``seq`` introduced.

        A token introduced at ``seq`` (first mentioned there, or in the message
        just before: the output a reply quotes) and mentioned again after it is
        something the work went on to use.
        """
        best = 0
        for token in tokens:
            at = self.mentions.get(token, ())
            if at and at[0] >= seq - 1:
                best = max(best, sum(1 for s in at if s > seq and s not in self.outputs))
                if best >= ECHO_CAP:
                    return ECHO_CAP
        return best

    def rarity(self, word: str) -> float:
        """How rare ``word`` is in this conversation: 1 when no message says it, 0 in all of them."""
        n = self.size + 1
        return math.log2(n / (self.word_count.get(word, 0) + 1)) / math.log2(n) if n > 1 else 1.0

    def information(self, text: str) -> float:
        """What ``text`` says that the conversation does not say everywhere: rare words, values.

        The sum of its content words' rarity plus one per exact token that is
        not common. A nudge ("continue", "hm, check the logs too") carries a
        few words every message uses; a statement carries rare words and
        values. Used instead of a list of filler phrases.
        """
        rare = sum(self.rarity(w) for w in words(text))
        return rare + sum(1 for t in exact_tokens(text) if not self.common(t))


@dataclass(frozen=True)
class Features:
    """One candidate's measurements, each in ``[0, 1]``."""

    exact: float  # exact tokens, capped
    echo: float  # later messages referring to its specific tokens
    change: float  # a value changed from X to Y
    rule: float  # negation or obligation
    reaction: float  # the first prose after a tool result: what the agent made of it
    novelty: float  # share of its tokens and words the kept head and tail do not hold
    recency: float  # position in the dropped turns, 1 for the newest
    rarity: float = 0.0  # mean rarity of its words in the conversation
    stock: float = 0.0  # 1 when said word for word in STOCK_TIMES messages or more
    output: float = 0.0  # 1 for a line of a tool's output (0: the agent's own prose)


def features(
    text: str,
    seq: int,
    index: Index,
    *,
    kept: set[str] = frozenset(),  # type: ignore[assignment]
    reaction: bool = False,
    newest: int = 1,
    said: int = 1,
    output: bool = False,
) -> Features:
    """Measure ``text`` (said at message ``seq``) against the conversation's ``index``."""
    tokens = exact_tokens(text)
    low = text.lower()
    specific = [t for t in tokens if not index.common(t)]
    vocab_words = words(text)
    vocabulary = tokens | vocab_words
    unseen = [w for w in vocabulary if w not in kept]
    return Features(
        exact=min(len(specific), EXACT_CAP) / EXACT_CAP,
        echo=index.referred_back(specific, seq) / ECHO_CAP,
        change=1.0 if _CHANGE_RE.search(low) else 0.0,
        rule=1.0 if _RULE_RE.search(low) else 0.0,
        reaction=1.0 if reaction else 0.0,
        novelty=len(unseen) / len(vocabulary) if vocabulary else 0.0,
        recency=max(0.0, min(1.0, seq / max(newest, 1))),
        rarity=sum(index.rarity(w) for w in vocab_words) / len(vocab_words) if vocab_words else 0.0,
        stock=1.0 if said >= STOCK_TIMES else 0.0,
        output=1.0 if output else 0.0,
    )


# The weights of each feature in the score (a logistic over their sum), and its bias.
WEIGHTS = Features(
    exact=1.5,
    echo=1.5,
    change=1.0,
    rule=0.5,
    reaction=0.9,
    novelty=0.5,
    recency=1.5,
    rarity=2.0,
    stock=-3.0,
    output=-2.0,
)
BIAS = -2.0


def salience(f: Features, weights: Features = WEIGHTS, bias: float = BIAS) -> float:
    """The score of a candidate with features ``f``: 0 (nothing to carry) to 1."""
    z = bias + sum(
        getattr(f, name) * getattr(weights, name) for name in Features.__dataclass_fields__
    )
    return 1.0 / (1.0 + math.exp(-z))
