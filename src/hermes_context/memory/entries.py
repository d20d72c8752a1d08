"""The on-disk format of MEMORY.md / USER.md and pure operations on entry lists.

A file is its entries joined by ``ENTRY_DELIMITER`` (a line holding only
``§``); usage is the length of that joined text. Every function here takes a
list of entries and returns a new one; none touches the disk.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .text_rules import bad_character, structure_ids, structure_message

ENTRY_DELIMITER = "\n§\n"
# The delimiter without its newlines: a line holding only this splits entries.
_SECTION_SIGN = "§"
TARGETS = ("memory", "user")
TARGET_FILENAMES = {"memory": "MEMORY.md", "user": "USER.md"}
# How many characters of an entry an error message quotes.
PREVIEW_CHARS = 80
_WORD = re.compile(r"\w+")


class EntryError(Exception):
    """An operation cannot be applied to the entries (internal; the store turns it into a result).

    Attributes:
        reason: Short machine-readable cause (``no_match``, ``multiple_matches``, ...).
        data: Extra fields for the result dict.
    """

    def __init__(self, message: str, *, reason: str, **data: object) -> None:
        super().__init__(message)
        self.reason = reason
        self.data = data


@dataclass(frozen=True)
class Operation:
    """One validated write: ``add`` (content), ``replace`` (old_text, content), ``remove`` (old_text)."""

    action: str
    content: str | None = None
    old_text: str | None = None

    def to_dict(self) -> dict[str, str]:
        """Plain data, for pending files and results."""
        data = {"action": self.action}
        if self.old_text is not None:
            data["old_text"] = self.old_text
        if self.content is not None:
            data["content"] = self.content
        return data


def separator_line(text: str) -> int | None:
    """The number (from 1) of the first line of ``text`` that reads as the entry separator.

    That is a line holding only ``§``, spaces around it aside. Hermes Agent
    (every release since its memory tool's first week) splits a file at
    ``"\\n§\\n"`` exactly, so a sign inside a line never splits anything; the
    spaces are counted too because an editor that trims them turns the line
    into a separator, and a person reads it as one already. Lines end at
    ``\\n``, ``\\r\\n`` or ``\\r``, as Hermes reads them (Python's universal newlines).

    Returns:
        The line number, or ``None`` when there is no such line.
    """
    if _SECTION_SIGN not in text:
        return None
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, line in enumerate(lines, start=1):
        if line.strip() == _SECTION_SIGN:
            return number
    return None


def edge_sign_line(text: str) -> int | None:
    """The number (from 1) of the first line of ``text`` that starts or ends with ``§``.

    Such a line is one edit (a trimmed word, a joined line) away from the
    separator, and Hermes Agent's first memory tool split at every sign; a
    sign inside a line ("cites § 4 of") is safe for every later release.
    """
    if _SECTION_SIGN not in text:
        return None
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith(_SECTION_SIGN) or stripped.endswith(_SECTION_SIGN):
            return number
    return None


def parse_entries(text: str) -> list[str]:
    """Split file text into entries, stripping each and dropping empty ones."""
    return [part.strip() for part in text.split(ENTRY_DELIMITER) if part.strip()]


def drop_duplicates(entries: Sequence[str]) -> tuple[list[str], dict[str, int]]:
    """The entries without repeats, first copy kept, as Hermes Agent loads a file.

    Returns:
        The entries left, and for each repeated entry how many copies were dropped.
    """
    counts = Counter(entries)  # keeps first-seen order
    return list(counts), {entry: n - 1 for entry, n in counts.items() if n > 1}


def render_entries(entries: Sequence[str]) -> str:
    """Join entries into file text (the inverse of ``parse_entries`` for clean entries)."""
    return ENTRY_DELIMITER.join(entries)


def usage(entries: Sequence[str]) -> int:
    """Characters the entries take in the file, the number the limits apply to."""
    return len(render_entries(entries))


def preview(text: str) -> str:
    """A one-line, shortened form of an entry for messages."""
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


def clean_content(content: object, *, field: str = "content") -> str:
    """Validate and strip new entry text (Windows line endings become ``\n``).

    Raises:
        EntryError: the text is empty or not a string, holds a delimiter line, a
            lone surrogate or a control character (``reason="invalid"``), or
            imitates the prompt's block structure (``reason="security"``).
    """
    if not isinstance(content, str) or not content.strip():
        raise EntryError(f"'{field}' must be non-empty text.", reason="invalid")
    text = content.replace("\r\n", "\n").strip()
    bad = bad_character(text)
    if bad:
        raise EntryError(f"'{field}' holds {bad}, then retry.", reason="invalid")
    line = separator_line(text)
    if line is not None:
        raise EntryError(
            f"'{field}' has a line holding only '§' (line {line}). In MEMORY.md and USER.md "
            "that line separates entries, for this tool and for Hermes Agent: the note would be "
            "read back as two entries, and the next write would keep them apart. Keep the sign "
            "inside a sentence ('see § 4') or write 'section' instead, then retry.",
            reason="invalid",
        )
    line = edge_sign_line(text)
    if line is not None:
        raise EntryError(
            f"'{field}' has a line that starts or ends with '§' (line {line}). In MEMORY.md and "
            "USER.md a line holding only that sign separates entries, and early Hermes Agent "
            "releases split at any sign at a line's edge: the note could be read back as two "
            "entries. Keep the sign inside a sentence ('see § 4') or write 'section' instead, "
            "then retry.",
            reason="invalid",
        )
    ids = structure_ids(text)
    if ids:
        raise EntryError(
            f"Refused: '{field}' holds {structure_message(ids)}. Entries are pasted into the "
            "system prompt inside such blocks, so this could pass a note off as another block "
            "(the user's profile, say). Rewrite it as a plain note without that line.",
            reason="security",
            pattern_ids=ids,
        )
    return text


def clean_old_text(old_text: object) -> str:
    """Validate and strip the text that names an existing entry.

    Control characters are allowed here (a hand-edited entry may hold them).

    Raises:
        EntryError: the text is empty, not a string, or holds a lone surrogate.
    """
    if not isinstance(old_text, str) or not old_text.strip():
        raise EntryError(
            "'old_text' must be non-empty text: a unique part of the entry to change.",
            reason="invalid",
        )
    bad = bad_character(old_text, controls=False)
    if bad:
        raise EntryError(f"'old_text' holds {bad}, then retry.", reason="invalid")
    return old_text.strip()


def find_entry(entries: Sequence[str], old_text: object) -> int:
    """Index of the entry ``old_text`` names: a whole entry first, then a substring.

    Identical entries count as one match (the first is used).

    Raises:
        EntryError: no entry, or several distinct entries, match.
    """
    needle = clean_old_text(old_text)
    for i, entry in enumerate(entries):
        if entry == needle:
            return i
    hits = [i for i, entry in enumerate(entries) if needle in entry]
    distinct = list(dict.fromkeys(entries[i] for i in hits))
    if not distinct:
        raise EntryError(
            f"No entry matched '{preview(needle)}'. Check the current entries and use text "
            "that appears in the entry you mean.",
            reason="no_match",
            current_entries=list(entries),
        )
    if len(distinct) > 1:
        raise EntryError(
            f"Multiple entries matched '{preview(needle)}' ({len(distinct)} entries). "
            "Use a longer old_text that appears in only one entry.",
            reason="multiple_matches",
            matches=[preview(e) for e in distinct],
        )
    return hits[0]


def apply_operation(entries: Sequence[str], op: Operation) -> list[str]:
    """Return a new list with ``op`` applied.

    A duplicate add leaves the list as it was; an add that nearly repeats an
    entry (``near_duplicate``) replaces it, so one note is never stored twice.
    """
    result = list(entries)
    if op.action == "add":
        assert op.content is not None
        if op.content in result:
            return result
        near = find_near_duplicate(result, op.content)
        if near is None:
            result.append(op.content)
        else:  # the same note reworded: one entry, in the newer wording
            result[near] = op.content
        return result
    index = find_entry(result, op.old_text)
    if op.action == "remove":
        del result[index]
        return result
    assert op.content is not None
    if op.content in result and result[index] != op.content:
        # Replacing with text that is already another entry merges the two.
        del result[index]
    else:
        result[index] = op.content
    return result


def apply_operations(entries: Sequence[str], ops: Sequence[Operation]) -> list[str]:
    """Apply ``ops`` in order to a copy of ``entries``.

    Raises:
        EntryError: an operation fails; ``data["operation_index"]`` says which.
    """
    result = list(entries)
    for i, op in enumerate(ops):
        try:
            result = apply_operation(result, op)
        except EntryError as exc:
            exc.data["operation_index"] = i
            raise
    return result


def parse_operation(raw: object, *, index: int | None = None) -> Operation:
    """Validate one tool-call operation dict into an ``Operation``.

    Raises:
        EntryError: a field is missing or the action is unknown.
    """
    where = f"operations[{index}]: " if index is not None else ""
    if not isinstance(raw, dict):
        raise EntryError(f"{where}each operation must be an object.", reason="invalid")
    action = raw.get("action")
    try:
        if action == "add":
            return Operation("add", content=clean_content(raw.get("content")))
        if action == "replace":
            old_text = clean_old_text(raw.get("old_text"))
            return Operation(
                "replace", old_text=old_text, content=clean_content(raw.get("content"))
            )
        if action == "remove":
            return Operation("remove", old_text=clean_old_text(raw.get("old_text")))
    except EntryError as exc:
        raise EntryError(where + str(exc), reason=exc.reason, **exc.data) from None
    raise EntryError(
        f"{where}'action' must be one of add, replace, remove (got {action!r}).", reason="invalid"
    )


def normal_text(text: str) -> str:
    """``text`` compared loosely: NFKC, case-folded, its words joined by single spaces."""
    flat = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_WORD.findall(flat))


def find_near_duplicate(entries: Sequence[str], content: str) -> int | None:
    """Index of the entry ``content`` nearly repeats (see ``near_duplicate``), or ``None``."""
    return next((i for i, e in enumerate(entries) if near_duplicate(e, content)), None)


def near_duplicate(a: str, b: str) -> bool:
    """Whether two entries say the same thing in nearly the same words.

    Decided on form, in any language: the same exact values (numbers, paths,
    identifiers: a changed value is a new fact, never a duplicate) and at
    least ``NEAR_DUPLICATE`` of their character trigrams in common.
    """
    if a == b:
        return True
    if min(len(a), len(b)) < 0.5 * max(len(a), len(b)):
        return False  # one says at least twice as much as the other
    na, nb = normal_text(a), normal_text(b)
    if na == nb:
        return True
    if _values(a) != _values(b):
        return False
    ta, tb = _trigrams(na), _trigrams(nb)
    if not ta or not tb:
        return False
    return len(ta & tb) / len(ta | tb) >= NEAR_DUPLICATE


# Jaccard of character trigrams two entries need to be merged. "Don't use tabs for YAML" and
# "Use tabs for YAML" share 0.74 of theirs; a reworded capitalisation or punctuation shares 1.0.
NEAR_DUPLICATE = 0.85
_VALUE_MARKS = frozenset("/_.@~")
_TOKEN_EDGES = ".,;:!?()[]{}<>\"'`"


def _values(text: str) -> set[str]:
    """The words that carry a value: a digit, or a path/identifier mark inside (linear)."""
    out = set()
    for token in text.split():
        word = token.strip(_TOKEN_EDGES).casefold()
        if any(ch.isdigit() or ch in _VALUE_MARKS for ch in word):
            out.add(word)
    return out


def _trigrams(text: str) -> set[str]:
    padded = f" {text} "
    return {padded[i : i + 3] for i in range(len(padded) - 2)}
