"""Views of a note that undo the disguises an attacker uses to slip past the scanner.

Threat: the same instruction can be written so no rule sees it — look-alike
letters from other scripts (Armenian ``օ``, small capitals ``ɪɢɴᴏʀᴇ``,
mathematical letters), leetspeak (``1gn0r3``), letters spaced or hyphenated
out (``I-g-n-o-r-e``), or the whole command hidden in base64, hex,
percent-encoding, ``\\x`` escapes or ROT13 with "decode and run". ``views``
returns the text in each undisguised form so the rules (and the semantic
classifier) judge what the model would end up reading.

The skeleton uses the Unicode confusables data (UTS #39) shipped by the
``confusable-homoglyphs`` package, restricted to scripts whose letters pass
for Latin ones, so Chinese, Japanese, Korean, Arabic or Hebrew text is left
alone.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import json
import re
import unicodedata
from importlib import resources

# Scripts whose letters can pass for Latin ones; confusables of other scripts are kept.
_LOOKALIKE_SCRIPTS = (
    "LATIN",
    "CYRILLIC",
    "GREEK",
    "ARMENIAN",
    "CHEROKEE",
    "COPTIC",
    "MATHEMATICAL",
    "MODIFIER LETTER",
    "SCRIPT",
    "DOUBLE-STRUCK",
    "BLACK-LETTER",
    "FULLWIDTH",
    "CIRCLED LATIN",
    "PARENTHESIZED LATIN",
    "SQUARED LATIN",
    "NEGATIVE",
    "REGIONAL INDICATOR",
    "LISU",
    "TIFINAGH",
    "GOTHIC",
    "OLD ITALIC",
)
# Leetspeak digits and symbols inside words, and the letters they stand for.
_LEET = str.maketrans(
    {"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s"}
)
_LEET_WORD_RE = re.compile(r"\b(?=[\w@$]*[a-zA-Z])(?=[\w@$]*[013457@$])[\w@$]{3,}\b")
# Words spelled out letter by letter: "I-g-n-o-r-e", "i.g.n.o.r.e", "i g n o r e".
_SPELLED_RE = re.compile(r"(?<![\w-])(?:[A-Za-z]([-_.])){2,}[A-Za-z](?![\w-])")
_SPACED_RE = re.compile(r"(?<!\S)(?:[A-Za-z] ){3,}[A-Za-z](?!\S)")
# A phrase spaced out character by character, words set apart by wider gaps:
# "s e n d e   d a s   p a s s w o r t" (any characters, not only letters).
_SPACED_PHRASE_RE = re.compile(r"(?<!\S)\S(?: {1,3}\S(?!\S))+")
_WIDE_GAP_RE = re.compile(r" {2,}")
_MIN_SPACED_CHARS = 8
_SMALL_CAPITAL_RE = re.compile(r"LATIN (?:LETTER SMALL CAPITAL|SMALL CAPITAL LETTER) ([A-Z])\b")
# Encoded spans worth trying: base64, hex, percent-encoding, \x and \u escapes.
_BASE64_RE = re.compile(r"(?<![\w+/=])[A-Za-z0-9+/]{12,}={0,2}(?![\w+/=])")
_HEX_RE = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){8,}(?![0-9A-Fa-f])")
_PERCENT_RE = re.compile(r"(?:%[0-9A-Fa-f]{2}){3,}(?:[^\s%]{0,3}(?:%[0-9A-Fa-f]{2})+)*")
_ESCAPE_RE = re.compile(r"(?:\\x[0-9A-Fa-f]{2}){3,}|(?:\\u[0-9A-Fa-f]{4}){3,}")
_ROT13_HINT_RE = re.compile(r"\brot[\s_-]?13\b|\bcaesar\b|\bmirror\b", re.I)
# A decoded span must read as text: mostly printable characters, some letters.
_MIN_DECODED_CHARS = 6
_INVISIBLE = dict.fromkeys(
    [*range(0x200B, 0x200E), *range(0x2060, 0x2065), 0xFEFF, 0x180E, 0x034F, 0x00AD]
)


def views(text: str) -> list[str]:
    """The text as the rules should see it, plus every undisguised form that differs.

    The first view is NFKC with invisible characters removed and look-alike
    letters folded to Latin (the skeleton); then the same without the folding
    (for rules written in Cyrillic or Greek), leetspeak undone, spelled-out
    words joined, and each encoded span decoded (with its surroundings).
    """
    plain = unicodedata.normalize("NFKC", text).translate(_INVISIBLE)
    base = skeleton(plain)
    out = [base]
    for variant in (plain, _unleet(base), _unspell(base), *decoded_spans(base)):
        if variant and variant not in out:
            out.append(variant)
    return out


def folded(text: str) -> str:
    """The first of ``views``: NFKC, invisible characters removed, look-alike letters folded."""
    return skeleton(unicodedata.normalize("NFKC", text).translate(_INVISIBLE))


@functools.cache
def _skeleton_table() -> dict[int, str]:
    """Look-alike characters of Latin-passing scripts mapped to their ASCII prototype."""
    data = _confusables()
    table: dict[int, str] = {}
    for code in range(0x1D00, 0x1D2C):  # phonetic small capitals (ᴀ ᴇ ᴛ ...)
        m = _SMALL_CAPITAL_RE.search(unicodedata.name(chr(code), ""))
        if m:
            table[code] = m.group(1).lower()
    for code in range(0x0250, 0x02B0):  # IPA small capitals (ɢ ɴ ʀ ʟ ɪ ...)
        m = _SMALL_CAPITAL_RE.search(unicodedata.name(chr(code), ""))
        if m:
            table[code] = m.group(1).lower()
    for char, glyphs in data.items():
        if len(char) != 1 or char.isascii() or not _lookalike_script(char):
            continue
        targets = [g["c"] for g in glyphs if len(g["c"]) == 1 and g["c"].isascii()]
        letters = [t for t in targets if t.isalnum()]
        if letters:
            # Keep the case of the look-alike: Greek capital iota reads "I", not "l".
            same_case = [t for t in letters if t.isupper() == char.isupper() and t.isalpha()]
            target = (same_case or letters)[0]
            if char.isupper() and target == "l":
                target = "I"  # UTS #39 folds capital I to l; the rules read words
            table.setdefault(ord(char), target)
    return table


def _confusables() -> dict[str, list[dict[str, str]]]:
    try:
        path = resources.files("confusable_homoglyphs").joinpath("confusables.json")
        data: dict[str, list[dict[str, str]]] = json.loads(path.read_text(encoding="utf-8"))
    except (ModuleNotFoundError, FileNotFoundError, ValueError):  # pragma: no cover
        return {}
    return data


def _lookalike_script(char: str) -> bool:
    name = unicodedata.name(char, "")
    return name.startswith(_LOOKALIKE_SCRIPTS) or "SMALL CAPITAL" in name


def skeleton(text: str) -> str:
    """``text`` with look-alike letters (UTS #39 confusables of Latin, small capitals) replaced
    by ASCII, and accents dropped from Latin letters (``ìgnóre`` reads ``ignore``)."""
    if text.isascii():
        return text
    # The table maps look-alike letters only; without one, building it (~50 ms once) is waste.
    if any(not ch.isascii() and _lookalike_script(ch) for ch in text):
        text = text.translate(_skeleton_table())
    if text.isascii():
        return text
    return "".join(_plain_latin(ch) for ch in text)


@functools.cache
def _plain_latin(char: str) -> str:
    if char.isascii() or not unicodedata.name(char, "").startswith("LATIN"):
        return char
    base = unicodedata.normalize("NFKD", char)[0]
    return base if base.isascii() else char


def _unleet(text: str) -> str:
    """Leetspeak undone inside words that mix letters with 0/1/3/4/5/7/@/$."""
    if not _LEET_WORD_RE.search(text):
        return ""
    return _LEET_WORD_RE.sub(lambda m: m.group(0).translate(_LEET), text)


def _unspell(text: str) -> str:
    """Words spelled letter by letter ("I-g-n-o-r-e a-l-l", "i g n o r e") joined back,
    and phrases spaced out character by character ("s e n d e   d a s") read as words."""
    phrases = [m for m in _SPACED_PHRASE_RE.finditer(text) if _spaced_phrase(m.group(0))]
    if not (phrases or _SPELLED_RE.search(text) or _SPACED_RE.search(text)):
        return ""
    for m in reversed(phrases):
        words = (w.replace(" ", "") for w in _WIDE_GAP_RE.split(m.group(0)))
        text = text[: m.start()] + " ".join(words) + text[m.end() :]
    text = _SPELLED_RE.sub(lambda m: re.sub(r"[-_.]", "", m.group(0)), text)
    return _SPACED_RE.sub(lambda m: m.group(0).replace(" ", ""), text)


def _spaced_phrase(run: str) -> bool:
    """Whether ``run`` (single characters between blanks) spells out words: enough
    characters, and its words set apart by wider gaps than its letters."""
    return len(run.replace(" ", "")) >= _MIN_SPACED_CHARS and bool(_WIDE_GAP_RE.search(run))


def decoded_spans(text: str) -> list[str]:
    """Each encoded span of ``text`` decoded and put back in place (one view per span).

    Base64 (also the pieces of one split across lines joined), hex, percent
    encoding, ``\\x``/``\\u`` escapes, and ROT13 of the whole text when the text
    mentions ROT13. Spans that do not decode to readable text are skipped.
    """
    out = []
    pieces = []
    for m in _BASE64_RE.finditer(text):
        pieces.append(m.group(0))
        decoded = _b64(m.group(0))
        if decoded:
            out.append(text[: m.start()] + decoded + text[m.end() :])
    if len(pieces) > 1:
        joined = _b64("".join(pieces))
        if joined:
            out.append(joined)
    for regex, decode in ((_HEX_RE, _hex), (_PERCENT_RE, _percent), (_ESCAPE_RE, _escapes)):
        for m in regex.finditer(text):
            decoded = decode(m.group(0))
            if decoded:
                out.append(text[: m.start()] + decoded + text[m.end() :])
    if _ROT13_HINT_RE.search(text):
        out.append(codecs.encode(text, "rot13"))
    return out


def _readable(raw: bytes) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    if len(text) < _MIN_DECODED_CHARS:
        return ""
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in text)
    letters = sum(ch.isalpha() for ch in text)
    return text if printable >= 0.95 * len(text) and letters >= 0.3 * len(text) else ""


def _b64(span: str) -> str:
    padded = span + "=" * (-len(span) % 4)
    try:
        return _readable(base64.b64decode(padded, validate=True))
    except (binascii.Error, ValueError):
        return ""


def _hex(span: str) -> str:
    try:
        return _readable(bytes.fromhex(span))
    except ValueError:
        return ""


def _percent(span: str) -> str:
    from urllib.parse import unquote_to_bytes

    return _readable(unquote_to_bytes(span))


def _escapes(span: str) -> str:
    try:
        if span.startswith("\\x"):
            return _readable(bytes.fromhex(span.replace("\\x", "")))
        return _readable(span.encode("ascii").decode("unicode_escape").encode("utf-8"))
    except (ValueError, UnicodeError):
        return ""
