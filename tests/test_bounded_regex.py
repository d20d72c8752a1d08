"""``BoundedRegex``: the same lines as ``re`` line by line, within one deadline."""

from __future__ import annotations

import io
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_context.tools.bounded_regex import BoundedRegex, RegexTooSlow

# Pieces whose meaning at a line's end or start is where a whole-file search could differ.
_ATOMS = [
    "a", "b", " ", ".", r"\s", r"\w", r"\W", r"\b", r"\B", "^", "$", "[ab]", "[^a]", r"\n",
    "(?:a|b)", "(a)", r"\1", r"(?>a\s*)", r"\s*+", "(?s:.)", "(?:$|b)", "(?:^|a)", "(?m:$)",
    "(?m:^)",
]  # fmt: skip
_SUFFIXES = ["", "*", "+", "?", "{2}", "*?", "+?"]
_PATTERNS = st.lists(st.tuples(st.sampled_from(_ATOMS), st.sampled_from(_SUFFIXES)), max_size=6)
_TEXTS = st.text(alphabet="ab \n\t", max_size=40)


def reference(pattern: str, text: str) -> list[tuple[int, str]]:
    """What search_files did before: ``re.search`` on each line, newline kept."""
    compiled = re.compile(pattern)
    return [(n, line) for n, line in enumerate(io.StringIO(text), start=1) if compiled.search(line)]


@settings(max_examples=400, deadline=None)
@given(_PATTERNS, _TEXTS)
def test_the_same_lines_as_re_line_by_line(parts, text):
    pattern = "".join(atom + suffix for atom, suffix in parts)
    try:
        expected = reference(pattern, text)
    except re.error:
        return  # not a pattern re accepts
    assert list(BoundedRegex(pattern).matching_lines(text)) == expected


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        (r"^$", "a\n"),
        (r"^$", "a\n\nb"),
        (r"a\s+b", "a\nb\n"),
        (r"(?<!\s)b", "a\nb\n"),
        (r"\Ab", "a\nb"),
        (r"b\Z", "a\nb"),
        (r"x*", ""),
        (r"x*", "a\nb"),
        (r"\n$", "a\nb\n"),
        (r"\s\B", "a \nb"),
        (r"$", "a\tb"),
        (r"(?>\s*)$", "a \nnext\n"),
    ],
)
def test_line_edges(pattern, text):
    assert list(BoundedRegex(pattern).matching_lines(text)) == reference(pattern, text)


def test_the_deadline_covers_every_call():
    matcher = BoundedRegex(r"(a|aa)+$", budget=0.3)
    started = time.monotonic()
    with pytest.raises(RegexTooSlow, match="stopped after 0.3 s"):
        list(matcher.matching_lines("a" * 60 + "!\n"))
    assert time.monotonic() - started < 1.5
    with pytest.raises(RegexTooSlow):  # the budget is spent: every later call stops at once
        matcher.search("b")


def test_a_bad_pattern_is_a_value_error():
    with pytest.raises(ValueError, match="bad regular expression"):
        BoundedRegex("(")
