"""Full-text matching on PostgreSQL: ``tsvector`` words and ``tsquery`` texts.

The text indexed is the one the SQLite store indexes (``fts.search_text_for``:
CJK runs as bigrams, JSON tool output decoded to its values, NFKC-folded),
split here into words as FTS5's ``unicode61`` splits it (letters and digits;
``_``, ``.`` and ``/`` separate) and lower-cased, with diacritics removed.
PostgreSQL's own parser would keep ``load_call.py`` or a URL as one token,
so it is only handed words it keeps whole. The ``hc_search`` configuration
(``schema``) maps every word through an English Snowball stemmer without
stop words, as FTS5's ``porter`` stems without dropping any word.

User text is never ``tsquery`` syntax: each word becomes a phrase of its
words (``<->``), all ANDed, then ORed; a raw query is read as FTS5 syntax
(phrases, ``*`` prefixes, ``AND``/``OR``/``NOT``, parentheses) and rebuilt.
"""

from __future__ import annotations

import re
import unicodedata

from ..errors import SearchQueryError
from ..fts import CJK_RUN_RE, fold, segment_cjk
from ..hits import all_then_any

CONFIG = "hc_search"
# Characters of a message indexed at most: a tsvector holds at most 1 MB.
MAX_INDEXED_CHARS = 250_000
MATCH_IDS = (
    f"SELECT id FROM messages WHERE search_vector @@ to_tsquery('{CONFIG}', %s) "
    "AND id < %s ORDER BY id DESC LIMIT %s"
)
_WORD_RE = re.compile(r"[^\W_]+")
# A raw query's pieces: a phrase (``""`` escapes a quote), a bracket, a bare word.
_RAW_TOKEN_RE = re.compile(r'"(?:[^"]|"")*"\*?|[()]|[^\s()"]+|"')
_OPERATORS = ("AND", "OR", "NOT")


def index_words(text: str) -> str:
    """``text`` as the words PostgreSQL indexes, separated by spaces."""
    text = fold(text[:MAX_INDEXED_CHARS]).lower()
    if not text.isascii():
        bare = "".join(
            c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c)
        )
        text = unicodedata.normalize("NFC", bare)
    return " ".join(_WORD_RE.findall(text))


def _phrase(text: str, *, prefix: bool = False) -> str | None:
    """A ``tsquery`` phrase of the words of ``text`` (the last a prefix), or None."""
    words = index_words(segment_cjk(fold(text))).split()
    if not words:
        return None
    if prefix:
        words[-1] += ":*"
    return words[0] if len(words) == 1 else "(" + " <-> ".join(words) + ")"


def _literal(word: str) -> str | None:
    if len(word) == 1 and CJK_RUN_RE.fullmatch(word):
        # A lone CJK character is indexed only inside bigrams: match them by prefix.
        return _phrase(word, prefix=True)
    return _phrase(word)


def literal_query(query: str, *, any_term: bool = False) -> str | None:
    """User text as a ``tsquery`` text in which every word is literal; None when no word."""
    phrases = [p for p in (_literal(w) for w in fold(query).split()) if p]
    if not phrases:
        return None
    return (" | " if any_term else " & ").join(phrases)


def expressions(query: str, raw: bool) -> list[tuple[str, str]]:
    """(kind, ``tsquery`` text) to try in order, as ``hits`` ranks them.

    Raises:
        SearchQueryError: a raw query cannot be read.
    """
    if raw:
        expr = RawQuery(query).parse()
        return [("raw", expr)] if expr else []
    return all_then_any(literal_query, query)


class RawQuery:
    """An FTS5 expression read into a ``tsquery`` text (``NOT`` binds tighter than AND, then OR).

    Column filters and ``NEAR`` have no ``tsquery`` counterpart and are refused.
    """

    def __init__(self, query: str) -> None:
        self.query = query
        self.tokens = _RAW_TOKEN_RE.findall(fold(query))
        self.pos = 0

    def fail(self, problem: str) -> SearchQueryError:
        return SearchQueryError(self.query, problem)

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise self.fail("the query ends where a word or phrase was expected")
        self.pos += 1
        return token

    def parse(self) -> str | None:
        expr = self.either()
        if self.peek() is not None:
            raise self.fail(f"unexpected {self.peek()!r}")
        return expr

    def either(self) -> str | None:
        parts = [self.both()]
        while self.peek() == "OR":
            self.take()
            parts.append(self.both())
        return _join(parts, " | ")

    def both(self) -> str | None:
        parts = [self.unless()]
        while self.peek() not in (None, ")", "OR"):
            if self.peek() == "AND":
                self.take()
            parts.append(self.unless())
        return _join(parts, " & ")

    def unless(self) -> str | None:
        expr = self.primary()
        while self.peek() == "NOT":
            self.take()
            right = self.primary()
            if right is not None:
                expr = f"({expr} & !{right})" if expr is not None else None
        return expr

    def primary(self) -> str | None:
        token = self.take()
        if token == "(":
            expr = self.either()
            if self.take() != ")":
                raise self.fail("a bracket is not closed")
            return expr
        if token == '"' or token in (")", *_OPERATORS):
            raise self.fail(f"unexpected {token!r}" if token != '"' else "a phrase is not closed")
        if token.startswith('"'):
            prefix = token.endswith("*")
            return _phrase(token.rstrip("*")[1:-1].replace('""', '"'), prefix=prefix)
        if (token == "NEAR" and self.peek() == "(") or ":" in token or token[0] in "^{":
            raise self.fail(f"{token!r}: NEAR and column filters are not supported on PostgreSQL")
        return _phrase(token.rstrip("*"), prefix=token.endswith("*"))


def _join(parts: list[str | None], op: str) -> str | None:
    kept = [p for p in parts if p is not None]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else "(" + op.join(kept) + ")"
