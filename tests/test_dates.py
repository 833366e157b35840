"""Reading the timestamps apps send, and resolving relative dates against them."""

from __future__ import annotations

from datetime import UTC, datetime, timezone, timedelta

import pytest

from memsdk.dates import parse_when, render_when, resolve_relative

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("1:56 pm on 8 May, 2023", MAY_8),
        ("8 May, 2023", datetime(2023, 5, 8, tzinfo=UTC)),
        ("May 8, 2023", datetime(2023, 5, 8, tzinfo=UTC)),
        ("Sept. 8, 2023", datetime(2023, 9, 8, tzinfo=UTC)),  # every spelling memsdk.dates.MONTH knows
        ("12:05 am on 1 Jan, 2024", datetime(2024, 1, 1, 0, 5, tzinfo=UTC)),
        ("2023-05-08T13:56:00", MAY_8),
        (datetime(2023, 5, 8, 13, 56), MAY_8),  # naive: taken as UTC
        ("last spring", None),
        ("31 February 2023", None),
        (None, None),
    ],
)
def test_parse_when(raw, expected) -> None:
    assert parse_when(raw) == expected


def test_an_aware_datetime_keeps_its_zone_and_renders_like_locomo() -> None:
    paris = datetime(2023, 5, 8, 9, 0, tzinfo=timezone(timedelta(hours=2)))
    assert parse_when(paris) is paris
    assert render_when(MAY_8) == "1:56 pm on 8 May 2023" and render_when(datetime(2023, 5, 8, tzinfo=UTC)) == "8 May 2023"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I went to the support group yesterday, it was great.", "I went to the support group yesterday (7 May 2023), it was great."),
        ("Tonight we cook; tomorrow we fly.", "Tonight (8 May 2023) we cook; tomorrow (9 May 2023) we fly."),
        ("We moved two weeks ago.", "We moved two weeks ago (2 weeks before 8 May 2023)."),
        ("I painted last Saturday.", "I painted last Saturday (6 May 2023)."),
        ("Last Monday was hard.", "Last Monday (1 May 2023) was hard."),  # the one before, not today
        ("Last year I ran; next month I start.", "Last year (2022) I ran; next month (June 2023) I start."),
        ("3 days ago, last weekend, last week", "3 days ago (5 May 2023), last weekend (the weekend before 8 May 2023), last week (the week before 8 May 2023)"),
        ("In January, two months ago", "In January, two months ago (March 2023)"),
        ("The exam is next Friday; we meet next Monday.", "The exam is next Friday (12 May 2023); we meet next Monday (15 May 2023)."),  # the coming one, never today
        ("This Monday is busy, this coming Sunday too.", "This Monday (8 May 2023) is busy, this coming Sunday (14 May 2023) too."),
        ("The day after tomorrow, not tomorrow.", "The day after tomorrow (10 May 2023), not tomorrow (9 May 2023)."),
        ("In 3 days, a week from today, two weeks from now.", "In 3 days (11 May 2023), a week from today (15 May 2023), two weeks from now (22 May 2023)."),
        ("Nothing relative here.", "Nothing relative here."),
    ],
)
def test_relative_dates_are_followed_by_what_they_mean(text: str, expected: str) -> None:
    assert resolve_relative(text, MAY_8) == expected
    assert resolve_relative(expected, MAY_8) == expected  # resolving twice changes nothing


def test_without_a_time_nothing_is_resolved() -> None:
    assert resolve_relative("I went yesterday", None) == "I went yesterday"
