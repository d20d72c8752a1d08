"""Dates in text (``providers.dates``) and the local provider's lift for a question naming one."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_context.providers import local
from hermes_context.providers.dates import DAY, date_ranges, item_date


def _day(year: int, month: int, day: int) -> float:
    return datetime(year, month, day, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Who did Maria have dinner with on May 3, 2023?", [(_day(2023, 5, 3), _day(2023, 5, 4))]),
        ("What movie did Joanna watch on 1 May, 2022?", [(_day(2022, 5, 1), _day(2022, 5, 2))]),
        ("the 3rd of May 2023", [(_day(2023, 5, 3), _day(2023, 5, 4))]),
        ("What did Nate do in April 2022?", [(_day(2022, 4, 1), _day(2022, 5, 1))]),
        ("a trip in Sept. 2021", [(_day(2021, 9, 1), _day(2021, 10, 1))]),
        ("December 2022 and 2023-01-09", [(_day(2022, 12, 1), _day(2023, 1, 1)), (_day(2023, 1, 9), _day(2023, 1, 10))]),
        ("what happened in 2019?", [(_day(2019, 1, 1), _day(2020, 1, 1))]),
        ("Caroline on 1:56 pm on 8 May, 2023: hi", [(_day(2023, 5, 8), _day(2023, 5, 9))]),
        # Read by the next form when a day cannot be: month and year.
        ("the 31st of February 2023", [(_day(2023, 2, 1), _day(2023, 3, 1))]),
    ],
)  # fmt: skip
def test_date_ranges_reads_the_forms_people_write(text, expected):
    assert date_ranges(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "When did Melanie go camping in June?",  # no year: says nothing alone
        "Port 2023 is open",  # a number, not a year
        "last week and yesterday",
        "version 2023.1.4",
        "",
    ],
)
def test_date_ranges_reads_no_date_where_there_is_none(text):
    assert date_ranges(text) == []


@given(st.text(max_size=200))
def test_date_ranges_never_fails_and_ranges_are_ordered_days_months_or_years(text):
    for start, end in date_ranges(text):
        assert start < end
        assert end - start in (DAY,) or end - start >= 28 * DAY


def test_item_date_is_the_first_day_named_else_when_stored():
    stored = _day(2026, 1, 1)
    assert item_date("Jon on 2:00 pm on 9 June, 2023: the gym opened", stored) == _day(2023, 6, 9)
    assert item_date("we moved in 2022", stored) == stored  # a year is not a day
    assert item_date("no date at all", stored) == stored


needs_embeddings = pytest.mark.skipif(
    not local.embeddings_available(), reason='needs pip install "hermes-context[semantic]"'
)


@needs_embeddings
def test_a_question_naming_a_date_lifts_what_was_said_that_day(tmp_path):
    provider = local.LocalMemoryProvider(tmp_path / "m.db", use_embeddings=True)
    provider.initialize("s", user_id="u")
    dates = ["3 March, 2023", "9 May, 2023", "21 July, 2023", "2 October, 2023"]
    provider.add_many(
        [(f"Ana on {d}: went to the pottery class again", local.TURN_KIND, f"s{i}") for i, d in enumerate(dates)]
    )  # fmt: skip
    hits = provider.search("What did Ana do on 9 May, 2023?", k=4, mode="hybrid")
    assert "9 May, 2023" in hits[0].text
    hits = provider.search("What did Ana do in October 2023?", k=4, mode="hybrid")
    assert "2 October, 2023" in hits[0].text
    # The lift belongs to hybrid: BM25 alone ranks words only ("Ana" and "2023" are on
    # every item, so they are left out, and only the day's words find an item).
    bm25 = provider.search("What did Ana do on 9 May, 2023?", k=4, mode="bm25")
    assert [h.text for h in bm25] == ["Ana on 9 May, 2023: went to the pottery class again"]
    # A question whose telling words match nothing still finds what its other words hold.
    assert len(provider.search("What did Ana do on 10 June, 2023?", k=4, mode="bm25")) == 4
    provider.shutdown()


@needs_embeddings
def test_items_stored_before_dating_are_dated_on_the_next_search(tmp_path):
    import sqlite3

    provider = local.LocalMemoryProvider(tmp_path / "m.db", use_embeddings=True)
    provider.initialize("s", user_id="u")
    provider.add("Ana on 9 May, 2023: pottery", kind=local.TURN_KIND, session_id="s1")
    provider.shutdown()
    with sqlite3.connect(tmp_path / "m.db") as conn:
        conn.execute("UPDATE items SET dated = NULL")
    conn.close()
    again = local.LocalMemoryProvider(tmp_path / "m.db", use_embeddings=True)
    again.initialize("s", user_id="u")
    again.search("pottery", k=1, mode="hybrid")
    (dated,) = again._db().execute("SELECT dated FROM items").fetchone()
    assert dated == _day(2023, 5, 9)
    again.shutdown()
