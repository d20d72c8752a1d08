"""Who said a conversation turn, and whether a question names them.

A turn item opens with its speaker (``Ana on 2 May: What did you name the
puppy?``, ``Ana: …``). A question that names one of the speakers ("What did
Ana name her puppy?") asks about what *that* person said or did: on LoCoMo's
tuned half, 656 of the 680 questions naming one speaker had an answer in that
speaker's own turns. The name also misleads the encoders: every turn of Ana
opens with "Ana", so the question's embedding is near all of them and the
words that say what is asked weigh less. Recall therefore lifts the named
speaker's turns and embeds the question with the name replaced by a pronoun
(``LocalMemoryProvider.search``; ``docs/providers.md``).
"""

from __future__ import annotations

import re
from collections.abc import Container

# A speaker: one to four words, each opening with a capital letter or a letter of a script
# without case (Chinese, Japanese, Arabic...), then " on <date>" or ":" (the shortest such
# opening: "Ana on Monday on 2 May: …" is Ana's).
_HEADER_RE = re.compile(r"^([^\W\d_][\w'’.-]*(?: [^\W\d_][\w'’.-]*){0,3}?)(?: on |:)")
_WORD_RE = re.compile(r"[^\W\d_][\w'’.-]*")
# Words in a speaker's name, at most (the header pattern's four).
MAX_NAME_WORDS = 4


def turn_speaker(text: str) -> str | None:
    """The speaker a turn's text opens with (``"Ana on 2 May: …"`` -> ``"Ana"``), if any."""
    match = _HEADER_RE.match(text)
    if match is None:
        return None
    name = match.group(1)
    if any(word[0].islower() for word in name.split()):
        return None  # prose ("yes on Monday: …"), not a name
    return name


def named_speakers(query: str, speakers: Container[str]) -> list[str]:
    """The ``speakers`` that ``query`` names, in its order.

    A name is matched whole, as a run of the query's words ("Ana", "Dr Ana
    Lima"); "Ana's" names Ana.
    """
    words = [
        m.group().rstrip(".").removesuffix("'s").removesuffix("’s")
        for m in _WORD_RE.finditer(query)
    ]
    found: list[str] = []
    start = 0
    while start < len(words):
        step = 1
        for size in range(min(MAX_NAME_WORDS, len(words) - start), 0, -1):
            name = " ".join(words[start : start + size])
            if name in speakers:
                if name not in found:
                    found.append(name)
                step = size  # the words of a name name no one else
                break
        start += step
    return found


def without_name(query: str, name: str) -> str:
    """``query`` with ``name`` replaced by a pronoun ("What did Ana's dog eat?" -> "their")."""
    pattern = re.compile(rf"(?<![\w'’]){re.escape(name)}(['’]s)?(?![\w])")
    return pattern.sub(lambda m: "their" if m.group(1) else "they", query)
