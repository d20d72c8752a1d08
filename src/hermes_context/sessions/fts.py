"""Full-text indexing text and query building for the FTS5 index over messages.

SQLite's built-in tokenizers cannot find two-character CJK words: ``trigram``
needs three characters and ``unicode61`` keeps a whole CJK run as one token.
So the index is built over a *derived* text in which every run of Han, Kana or
Hangul letters is rewritten as overlapping bigrams (``数据库`` -> ``数据 据库``;
a one-character run stays as it is) and everything else is left to the
``porter unicode61`` tokenizer, which stems English. Queries are segmented the
same way, so a CJK word becomes a phrase of consecutive bigrams.

The derived text is also *decoded* and *folded*: a tool result or tool-call
arguments that are JSON are indexed as their decoded string values (so a word
after an escaped ``\\n`` is a word of its own), text is NFKC-normalised (full-width
``ｆｕｌｌ`` is ``full``) and lone surrogates, which SQLite cannot hold as text, become
U+FFFD. Queries are folded the same way.

The derived text is computed in Python when a message is written and stored
in ``messages.search_text`` (NULL when it equals the plain content); triggers
copy it into the index, so any connection (the CLI, a rebuild, another
process) keeps the index in sync without an application-defined SQL function.
When these rules change, a migration recomputes the stored text
(``indexing.recompute_search_text``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from ..messages import content_text, json_loads_or_none, without_lone_surrogates

FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"

# Letters written without spaces between words (Han, Kana, Hangul). CJK
# punctuation and full-width forms are left out: unicode61 treats them as
# separators or as Latin letters already.
_CJK_LETTERS = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3005-\u3007"  # ideographic iteration mark, closing mark, number zero
    "\u3041-\u309f"  # Hiragana
    "\u30a1-\u30fa\u30fc-\u30ff"  # Katakana (without the middle dot U+30FB)
    "\u3131-\u318e"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\ua960-\ua97f"  # Hangul Jamo extended A
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0002fa1f"  # CJK extensions B-F, compatibility supplement
)
CJK_RUN_RE = re.compile(f"[{_CJK_LETTERS}]+")
_HAS_CJK_RE = re.compile(f"[{_CJK_LETTERS}]")
# FTS5 operators that only mean something outside a quoted string.
_RAW_PHRASE_RE = re.compile(r'"(?:[^"]|"")*"')


def bigrams(run: str) -> list[str]:
    """Overlapping two-character grams of a CJK run; a 1-character run is kept whole."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def segment_cjk(text: str) -> str:
    """Rewrite every CJK run of ``text`` as space-separated bigrams; leave the rest."""
    if not _HAS_CJK_RE.search(text):
        return text
    return CJK_RUN_RE.sub(lambda m: " " + " ".join(bigrams(m.group())) + " ", text)


def fold(text: str) -> str:
    """Text as the index compares it: lone surrogates replaced, NFKC-normalised, NUL a space.

    NUL separates words (as the tokenizer reads it) and cannot be stored in a
    PostgreSQL text column.
    """
    if "\x00" in text:
        text = text.replace("\x00", " ")
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", without_lone_surrogates(text))


def _json_leaves(data: Any) -> str:
    """The string and number values of decoded JSON, one per line, in document order."""
    leaves: list[str] = []
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            leaves.append(item)
        elif isinstance(item, Mapping):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif item is not None:
            leaves.append(str(item))
    return "\n".join(leaves)


def _argument_text(arguments: Any) -> str:
    """Searchable text of tool-call arguments: the values of the JSON, else the raw text."""
    if not isinstance(arguments, str):
        return _json_leaves(arguments)
    data = json_loads_or_none(arguments)  # None too for JSON nested too deep to decode
    return arguments if data is None else _json_leaves(data)


def _tool_output_text(text: str) -> str:
    """A tool result as search sees it: a JSON object or array decoded to its values.

    Tools often answer ``{"output": "...\\nKeyError: ...", "exit_code": 1}``;
    indexed raw, the escape glues ``n`` to the next word. Anything else
    (plain text, invalid or too deeply nested JSON) is indexed as it is.
    """
    if not text.lstrip().startswith(("{", "[")):
        return text
    data = json_loads_or_none(text)
    return _json_leaves(data) if isinstance(data, (dict, list)) else text


# Metadata key of messages stored for the record but left out of search.
UNINDEXED_KEY = "_unindexed"


def indexed_text(message: Mapping[str, Any]) -> str:
    """Everything of ``message`` that search should find: content, tool names and arguments.

    A JSON tool result and JSON arguments contribute their decoded values. A
    message marked ``UNINDEXED_KEY`` (an agent's system prompt, the same
    boilerplate in every session) contributes nothing.
    """
    if message.get(UNINDEXED_KEY):
        return ""
    content = content_text(message.get("content"))
    parts = [_tool_output_text(content) if message.get("role") == "tool" else content]
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            fn = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(fn, Mapping):
                parts.append(f"{fn.get('name') or ''} {_argument_text(fn.get('arguments') or '')}")
    return "\n".join(p for p in parts if p)


def search_text_for(message: Mapping[str, Any]) -> str | None:
    """The derived text to store in ``messages.search_text``; None when the content says it all."""
    text = segment_cjk(fold(indexed_text(message)))
    content = message.get("content")
    if isinstance(content, str) and text == content:
        return None
    return text


def _quote_term(term: str) -> str | None:
    if not any(ch.isalnum() for ch in term):
        return None  # the tokenizer would make an empty phrase of it
    if len(term) == 1 and CJK_RUN_RE.fullmatch(term):
        # A lone CJK character is indexed only inside bigrams: match them by prefix.
        return f'"{term}"*'
    return '"' + segment_cjk(term).strip().replace('"', '""') + '"'


def quote_query(query: str, *, any_term: bool = False) -> str | None:
    """Turn user text into an FTS5 expression in which every word is literal.

    Each whitespace-separated word becomes a quoted phrase (so ``NOT``, ``OR``,
    ``*``, ``:`` and quotes mean nothing); CJK words become phrases of bigrams.
    Words are ANDed, or ORed when ``any_term`` is set.

    Returns:
        The expression, or None when the text holds no searchable word.
    """
    # SQLite ends a string at NUL, leaving an unterminated phrase: split there instead.
    words = fold(query).replace("\x00", " ").split()
    phrases = [p for p in (_quote_term(t) for t in words) if p]
    if not phrases:
        return None
    return (" OR " if any_term else " ").join(phrases)


def raw_query(query: str) -> str:
    """Prepare an explicit FTS5 expression: only CJK runs are rewritten as bigrams.

    Inside a quoted phrase the bigrams stay a phrase; outside one they become a
    quoted phrase of their own, so ``数据库 OR cache`` keeps its meaning.
    """
    query = fold(query)
    out: list[str] = []
    pos = 0
    for m in _RAW_PHRASE_RE.finditer(query):
        out.append(_segment_bare(query[pos : m.start()]))
        out.append(segment_cjk(m.group()))
        pos = m.end()
    out.append(_segment_bare(query[pos:]))
    return "".join(out)


def _segment_bare(text: str) -> str:
    return CJK_RUN_RE.sub(lambda m: '"' + " ".join(bigrams(m.group())) + '"', text)


def query_terms(query: str) -> list[str]:
    """The (folded) words of a query, for ranking and for locating a match in a snippet."""
    words = re.findall(r"\w+", fold(query))
    return [w for w in words if w.upper() not in ("AND", "OR", "NOT", "NEAR")]
