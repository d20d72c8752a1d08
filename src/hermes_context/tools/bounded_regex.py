"""A regular expression the model wrote, run under one deadline.

Threat: ``search_files`` runs a pattern the model chose (or text it read told
it to choose) over every line of the workspace. A backtracking engine takes
exponential time on some patterns — ``(a|aa)+$`` or ``(a+)+$`` against a line
of ``a`` s and one other character: 1.2 s at 24 characters with ``re``,
four times more every two characters — so one tool call can hold a turn, a
bridge worker and the session's lock for hours (ReDoS).

Answer: patterns run on the ``regex`` engine, whose every call takes a
``timeout``; one deadline (``SEARCH_BUDGET_SECONDS``) covers the whole search,
and a call that reaches it raises ``RegexTooSlow`` saying what to do. To keep
ordinary searches near ``re``'s speed (a timed call costs a few microseconds),
a file is searched whole (multi-line mode) from line to line: the line where
the next match starts is checked alone (line-by-line meaning is kept: a
match across lines does not count), the lines skipped cannot hold one. This
is skipped for patterns whose meaning depends on where the string starts or
ends (``\\A``, ``\\Z``, lookarounds), which run line by line.
``benchmarks/regex_search.py`` measures the engines side by side.
"""

from __future__ import annotations

import bisect
import io
import itertools
import re
import time
from collections.abc import Iterator

import regex

from ..errors import HermesContextError

# Seconds one search_files call may spend matching, all files together.
SEARCH_BUDGET_SECONDS = 5.0
# Constructs under which a line's match may not be found in the whole file:
# lookarounds, string anchors, atomic groups and possessive repetition.
_LINE_BOUND = re.compile(r"\(\?<?[=!>]|\\[AZGz]|[*+?}]\+")


class RegexTooSlow(HermesContextError):
    """The search reached its deadline; the message says how to narrow it."""


class BoundedRegex:
    """The model's pattern, compiled once, every match within one deadline.

    Args:
        pattern: A Python regular expression (``re`` syntax).
        budget: Seconds all calls together may take, from construction
            (default ``SEARCH_BUDGET_SECONDS``).

    Raises:
        ValueError: The pattern does not compile; the message says why.
    """

    def __init__(self, pattern: str, *, budget: float | None = None) -> None:
        try:
            self._line = regex.compile(pattern)
            whole_file_safe = not _LINE_BOUND.search(pattern)
            self._file = regex.compile(pattern, regex.MULTILINE) if whole_file_safe else None
        except (regex.error, OverflowError, RecursionError) as exc:
            raise ValueError(f"bad regular expression: {exc}") from None
        self.pattern = pattern
        self.budget = SEARCH_BUDGET_SECONDS if budget is None else budget
        self._deadline = time.monotonic() + self.budget

    def expired(self) -> bool:
        """True once the deadline has passed."""
        return time.monotonic() >= self._deadline

    def matching_lines(self, text: str) -> Iterator[tuple[int, str]]:
        """``(number, line)`` of each line of ``text`` (newline kept) holding a match."""
        lines = io.StringIO(text).readlines()
        if self._file is None:
            yield from ((n, line) for n, line in enumerate(lines, start=1) if self.search(line))
            return
        # Each newline doubled: after a line's own newline comes one more, so "$"
        # and "\B" there see what they see at the end of the line alone.
        doubled = text.replace("\n", "\n\n")
        starts = list(
            itertools.accumulate((len(line) + line.endswith("\n") for line in lines), initial=0)
        )
        index = 0
        while index < len(lines):
            found = self._call(self._file, doubled, starts[index])
            if found is None:
                return
            # A match at the very end belongs to the last line.
            index = min(bisect.bisect_right(starts, found.start()), len(lines)) - 1
            if self.search(lines[index]):
                yield index + 1, lines[index]
            index += 1

    def search(self, line: str) -> bool:
        """True when ``line`` holds a match."""
        return self._call(self._line, line) is not None

    def _call(
        self, compiled: regex.Pattern[str], text: str, pos: int = 0
    ) -> regex.Match[str] | None:
        left = self._deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            return compiled.search(text, pos, timeout=left)
        except TimeoutError:
            raise RegexTooSlow(
                f"the search stopped after {self.budget:g} s: either the pattern backtracks "
                "without end (nested repetition such as (a+)+ or (a|aa)+ — rewrite it without "
                "nesting) or it covers too much (give a narrower path or glob)"
            ) from None
