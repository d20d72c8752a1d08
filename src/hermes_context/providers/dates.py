"""Dates written in text, as time ranges: what a question asks about, when an item was said.

A question that names a date ("What did Joanna do in January 2022?", "Who did
Maria have dinner with on May 3, 2023?") is answered by what was said around
that date; an item carries its date in its text ("Joanna on 21 January, 2022:
...") or, failing that, in when it was stored. Only absolute dates are read,
in the forms people write in English: a day with its month and year in either
order (``3 May 2023``, ``May 3rd, 2023``), a month and year (``January 2022``),
an ISO date (``2023-05-03``) and a year alone (``in 2022``). Relative dates
("last week") and a month without its year say nothing on their own and are
not read.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime

_MONTHS = {
    name: number
    for number in range(1, 13)
    for name in (calendar.month_name[number].lower(), calendar.month_abbr[number].lower())
}
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# Most specific first: a day-month-year is not read again as its month-year or year.
_FORMS = (
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.I),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.I),
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.I),
    re.compile(rf"\b(?:in|of|during|since|until|before|after|by)\s+{_YEAR}\b", re.I),
)
DAY = 86_400.0


def _start(year: int, month: int, day: int) -> float:
    return datetime(year, month, day, tzinfo=UTC).timestamp()


def _span(match: re.Match[str]) -> tuple[float, float] | None:
    parts = match.groupdict()
    year = int(parts["year"])
    month_text = parts.get("month")
    if month_text is None:
        return _start(year, 1, 1), _start(year + 1, 1, 1)
    month = int(month_text) if month_text.isdigit() else _MONTHS[month_text.lower().rstrip(".")]
    if not 1 <= month <= 12:
        return None
    day_text = parts.get("day")
    if day_text is None:
        end = _start(year + 1, 1, 1) if month == 12 else _start(year, month + 1, 1)
        return _start(year, month, 1), end
    day = int(day_text)
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    start = _start(year, month, day)
    return start, start + DAY


def date_ranges(text: str) -> list[tuple[float, float]]:
    """The ``[start, end)`` epoch-second ranges (UTC days, months or years) ``text`` names,
    in the order written; each stretch of text is read once, by its most specific form."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, tuple[float, float]]] = []
    for form in _FORMS:
        for match in form.finditer(text):
            start, end = match.span()
            if any(start < e and s < end for s, e in taken):
                continue
            span = _span(match)
            if span is not None:
                taken.append((start, end))
                found.append((start, span))
    return [span for _, span in sorted(found)]


def item_date(text: str, stored_at: float) -> float:
    """The day an item is dated: the first day it names (when it was said, or what it is
    about: either is what a question naming that day asks for), else when it was stored."""
    for start, end in date_ranges(text):
        if end - start <= DAY:
            return start
    return stored_at
