"""What text an entry may hold, and how stored text is shown to people.

Threats, beyond the prompt-injection deny-list of ``threats.py``:

1. Hiding text from the person who reviews memory. A carriage return, a
   backspace or an ANSI escape (``ESC[8m`` conceal, ``ESC[2K`` erase line) in a
   staged note makes a terminal show a harmless cover line while the real text
   is what gets approved. Entries may not hold control characters other than
   newline and tab; and because files can be edited by hand, everything the CLI
   prints from the store goes through ``visible`` first.
2. Forging the structure of the system prompt. Entries are pasted between
   separator rules under ``MEMORY (...)`` / ``USER PROFILE (...)`` headers; an
   entry holding a rule or a header line could pass the agent's own notes off
   as the user's profile. Such entries are refused on write and withheld from
   the snapshot when found on disk.
3. Text that cannot be stored: a lone surrogate (from a JSON escape such as
   ``\\ud83d``) cannot be encoded as UTF-8, so it is refused, not crashed on.
"""

from __future__ import annotations

import re
import unicodedata

MEMORY_BLOCK_HEADERS = {
    "memory": "MEMORY (your personal notes)",
    "user": "USER PROFILE (who the user is)",
}
# Rule drawn above and below each block header in the system prompt.
BLOCK_SEPARATOR = "═" * 46

# Pattern ids of the prompt-structure rules (reported like the scanner's ids).
SEPARATOR_ID = "structure.block_separator"
HEADER_ID = "structure.block_header"
STRUCTURE_DESCRIPTIONS = {
    SEPARATOR_ID: "a separator rule like the ones around memory blocks",
    HEADER_ID: "a line that reads as a memory block header",
}
# Three box-drawing double bars already read as a rule; ordinary notes never hold them.
_SEPARATOR_RUN_RE = re.compile("\u2550{3,}")
# A line of box-drawing characters only (any weight), e.g. "━━━━" or "╔════╗".
_RULE_LINE_RE = re.compile(r"^\s*[\u2500-\u257f](?:\s*[\u2500-\u257f]){2,}\s*$")
# Header lines, matched after NFKC, case folding and dropping leading punctuation
# ("## USER PROFILE ..."): the exact block names, or either name followed by a
# usage bracket ("MEMORY [3% — ...").
_NAME = r"(?:memory|user\s+profile)"
_HEADER_RES = (
    re.compile(
        r"^(?:memory\s*\(\s*your\s+personal\s+notes|user\s+profile\s*\(\s*who\s+the\s+user)"
    ),
    re.compile(rf"^{_NAME}\s*(?:\([^)\n]*\)\s*)?\[\s*\d+\s*%"),
)
_LEADING_PUNCT_RE = re.compile(r"^[\W_]+")

# Control characters an entry may hold: the two that only lay text out.
ALLOWED_CONTROLS = frozenset("\n\t")
_CONTROL_NAMES = {
    "\x00": "NUL",
    "\x07": "bell",
    "\x08": "backspace",
    "\x0b": "vertical tab",
    "\x0c": "form feed",
    "\r": "carriage return",
    "\x1b": "escape (starts ANSI terminal sequences)",
    "\x7f": "delete",
    "\x85": "next line",
    "\x9b": "control sequence introducer",
}
# Shown escaped by ``visible`` besides control characters and lone surrogates:
# they reorder or break lines in a terminal, or are invisible copies of ASCII.
_DISPLAY_ESCAPED = frozenset(
    [chr(c) for c in range(0x202A, 0x202F)]  # bidi embeddings and overrides
    + [chr(c) for c in range(0x2066, 0x206A)]  # bidi isolates
    + ["\u200e", "\u200f", "\u061c", "\u2028", "\u2029"]  # bidi marks, line/paragraph separators
)
_TAG_RANGE = (0xE0000, 0xE007F)
_NAMED_ESCAPES = {"\r": "\\r", "\n": "\\n", "\t": "\\t"}


def is_control(char: str) -> bool:
    """True for a C0 or C1 control character (Unicode category Cc), DEL included."""
    return unicodedata.category(char) == "Cc"


def _is_surrogate(char: str) -> bool:
    return "\ud800" <= char <= "\udfff"


def bad_character(text: str, *, controls: bool = True) -> str | None:
    """Describe the first character an entry may not hold, or ``None`` when there is none.

    Refused: lone surrogates (not encodable as UTF-8) and, unless ``controls``
    is false, control characters other than newline and tab (they can hide
    text in a terminal).
    """
    for i, char in enumerate(text):
        if _is_surrogate(char):
            return (
                f"a lone surrogate (U+{ord(char):04X}) at position {i}, half of an escaped "
                "character that cannot be saved as UTF-8; send the whole character (both "
                "halves of the escape) or leave it out"
            )
        if controls and is_control(char) and char not in ALLOWED_CONTROLS:
            name = _CONTROL_NAMES.get(char, "control character")
            return (
                f"the control character U+{ord(char):04X} ({name}) at position {i}; control "
                "characters can hide text from the person who reviews memory. Remove it "
                "(newlines and tabs are fine)"
            )
    return None


def structure_ids(text: str) -> list[str]:
    """Ids of the prompt-structure rules ``text`` breaks (empty when it breaks none)."""
    found = []
    lines = text.splitlines()  # also splits on \r, \x0b, \x0c, \x1c-\x1e, \x85, U+2028/9
    if _SEPARATOR_RUN_RE.search(text) or any(_RULE_LINE_RE.match(line) for line in lines):
        found.append(SEPARATOR_ID)
    if any(_is_header_line(line) for line in lines):
        found.append(HEADER_ID)
    return found


def _is_header_line(line: str) -> bool:
    folded = unicodedata.normalize("NFKC", line).casefold().strip()
    folded = _LEADING_PUNCT_RE.sub("", folded)
    return any(rx.match(folded) for rx in _HEADER_RES)


def structure_message(ids: list[str]) -> str:
    """``id (description), ...`` for error messages."""
    return ", ".join(f"{pid} ({STRUCTURE_DESCRIPTIONS[pid]})" for pid in ids)


def visible(text: str, *, keep_newlines: bool = True) -> str:
    """``text`` safe to print to a terminal: control and invisible layout characters escaped.

    Carriage returns show as ``\\r``, an ANSI escape as ``\\x1b[...``, bidi
    overrides as ``\\u202e``; tabs stay, and newlines stay unless
    ``keep_newlines`` is false (for one-line listings).
    """
    if text.isascii() and text.isprintable():
        return text
    out = []
    for char in text:
        if char == "\t" or (char == "\n" and keep_newlines):
            out.append(char)
        elif is_control(char) or _is_surrogate(char) or char in _DISPLAY_ESCAPED:
            out.append(_escape(char))
        elif _TAG_RANGE[0] <= ord(char) <= _TAG_RANGE[1]:
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


def _escape(char: str) -> str:
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
