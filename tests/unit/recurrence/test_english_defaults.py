"""English never depends on the moment it was typed (SPEC section 5): a rule that names no time
fires at 00:00, no day of the month on the 1st, a week with no weekday on Monday, "quarterly" on
the 1st of January, April, July and October; an interval rule starts at its first matching date
at or after the start; every description, read back from any start, gives the same dates."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from almanac.platform.recurrence import preview

UTC = timezone.utc
SUNDAY_0429 = datetime(2026, 11, 29, 4, 29, 17, tzinfo=UTC)


def _dates(text: str, now: datetime = SUNDAY_0429, count: int = 4, start: datetime | None = None) -> list[str]:
    found = preview(text, "UTC", start=start, now=now, count=count, min_interval_s=60).next
    return [d.strftime("%a %Y-%m-%d %H:%M") for d in found]


@pytest.mark.parametrize(("phrase", "expected"), [
    ("quarterly", ["Fri 2027-01-01 00:00", "Thu 2027-04-01 00:00", "Thu 2027-07-01 00:00", "Fri 2027-10-01 00:00"]),
    ("daily", ["Mon 2026-11-30 00:00", "Tue 2026-12-01 00:00", "Wed 2026-12-02 00:00", "Thu 2026-12-03 00:00"]),
    ("every monday", ["Mon 2026-11-30 00:00", "Mon 2026-12-07 00:00", "Mon 2026-12-14 00:00", "Mon 2026-12-21 00:00"]),
    ("every weekday", ["Mon 2026-11-30 00:00", "Tue 2026-12-01 00:00", "Wed 2026-12-02 00:00", "Thu 2026-12-03 00:00"]),
    ("weekly", ["Mon 2026-11-30 00:00", "Mon 2026-12-07 00:00", "Mon 2026-12-14 00:00", "Mon 2026-12-21 00:00"]),
    ("monthly", ["Tue 2026-12-01 00:00", "Fri 2027-01-01 00:00", "Mon 2027-02-01 00:00", "Mon 2027-03-01 00:00"]),
    ("yearly", ["Fri 2027-01-01 00:00", "Sat 2028-01-01 00:00", "Mon 2029-01-01 00:00", "Tue 2030-01-01 00:00"]),
    ("every hour", ["Sun 2026-11-29 05:00", "Sun 2026-11-29 06:00", "Sun 2026-11-29 07:00", "Sun 2026-11-29 08:00"]),
    ("every 1.5 hours", ["Sun 2026-11-29 04:30", "Sun 2026-11-29 06:00", "Sun 2026-11-29 07:30", "Sun 2026-11-29 09:00"]),
    ("every 2 weeks on Monday and Friday at 17:30",
     ["Mon 2026-11-30 17:30", "Fri 2026-12-04 17:30", "Mon 2026-12-14 17:30", "Fri 2026-12-18 17:30"]),
], ids=lambda v: v if isinstance(v, str) else None)
def test_what_english_leaves_unsaid_is_fixed(phrase: str, expected: list[str]) -> None:
    assert _dates(phrase) == expected


@pytest.mark.parametrize("phrase", ["daily", "every monday", "monthly", "quarterly", "every hour", "every 1.5 hours",
                                    "every weekday at 9am", "every 15 minutes"])
def test_the_minute_it_was_typed_does_not_move_the_dates(phrase: str) -> None:
    later = SUNDAY_0429 + timedelta(minutes=13, seconds=29)
    assert set(_dates(phrase, now=later)) <= set(_dates(phrase, count=8))


@pytest.mark.parametrize("rule", ["18 */8 * * *", "every 2 weeks on Monday and Friday at 17:30", "every 3 days",
                                  "FREQ=HOURLY;INTERVAL=7;BYMINUTE=5", "every 1.5 hours"])
def test_a_description_read_back_from_another_start_gives_the_same_dates(rule: str) -> None:
    first = preview(rule, "UTC", start=None, now=SUNDAY_0429, count=6, min_interval_s=60)
    for other in (SUNDAY_0429 - timedelta(days=9, hours=5), SUNDAY_0429 - timedelta(hours=3)):
        again = preview(first.description, "UTC", start=other, now=other, count=40, min_interval_s=60)
        later = [d for d in again.next if d >= first.next[0]][:6]
        assert later == first.next, first.description


@pytest.mark.parametrize(("phrase", "expected"), [
    ("tomorrow at 9", ["Mon 2026-11-30 09:00"]),
    ("today at 5pm", ["Sun 2026-11-29 17:00"]),
    ("tomorrow", ["Mon 2026-11-30 00:00"]),
])
def test_today_and_tomorrow_are_one_offs_on_the_date_they_name(phrase: str, expected: list[str]) -> None:
    assert _dates(phrase) == expected
