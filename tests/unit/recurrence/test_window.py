"""Occurrences per day (`window.by_day`): the first few and the count of each day agree with listing
every occurrence, on DST days of the rule's zone and of the shown zone, for dense and sparse rules;
and a dense day costs a bounded amount of engine work however many times it fires."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from almanac.platform.recurrence import load, occurrences
from almanac.platform.recurrence.engine import budget_scope
from almanac.platform.recurrence.window import _offset_change, by_day, fixed_step


def _edges(first: date, days: int, zone: str) -> list[datetime]:
    z = ZoneInfo(zone)
    return [datetime.combine(first + timedelta(days=i), time(0), z) for i in range(days + 1)]


def _listed(rec, edges: list[datetime]) -> list[list[datetime]]:
    """Every occurrence of the window, day by day, by plain iteration (the oracle)."""
    every = occurrences(rec, after=edges[0], count=20_000)
    assert len(every) < 20_000 or every[-1] >= edges[-1], "the oracle must see the whole window"
    return [[w for w in every if a <= w < b] for a, b in zip(edges, edges[1:])]


CASES = [
    pytest.param("Europe/Berlin", "20260320T000000", "FREQ=MINUTELY", "Europe/Berlin", date(2026, 3, 28),
                 id="every-minute-berlin-spring-gap"),
    pytest.param("Europe/Berlin", "20261020T000000", "FREQ=MINUTELY", "Europe/Berlin", date(2026, 10, 24),
                 id="every-minute-berlin-fall-back"),
    pytest.param("Europe/Berlin", "20261020T000700", "FREQ=MINUTELY;INTERVAL=7", "UTC", date(2026, 10, 24),
                 id="every-7-minutes-shown-in-utc-fall-back"),
    pytest.param("Europe/Berlin", "20260320T000700", "FREQ=MINUTELY;INTERVAL=7", "Europe/Berlin",
                 date(2026, 3, 28), id="every-7-minutes-spring-gap-moved-times-interleave"),
    pytest.param("Australia/Lord_Howe", "20261001T001000", "FREQ=MINUTELY;INTERVAL=20", "Australia/Lord_Howe",
                 date(2026, 10, 3), id="every-20-minutes-lord-howe-half-hour-gap"),
    pytest.param("America/New_York", "20261025T013000", "FREQ=HOURLY;INTERVAL=5", "Asia/Kolkata",
                 date(2026, 10, 30), id="every-5-hours-new-york-shown-in-kolkata"),
    pytest.param("UTC", "20260101T000000", "FREQ=SECONDLY;INTERVAL=90", "Europe/Berlin", date(2026, 3, 28),
                 id="every-90-seconds-utc-shown-in-berlin"),
    pytest.param("Europe/Berlin", "20260101T090000", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9,10,11;"
                 "BYMINUTE=0,15,30,45", "Europe/Berlin", date(2026, 3, 27), id="cron-like-business-hours"),
    pytest.param("Europe/Berlin", "20260101T023000", "FREQ=DAILY", "Europe/Berlin", date(2026, 3, 27),
                 id="daily-0230-gap-day"),
]


@pytest.mark.parametrize(("tz", "start", "rule", "shown", "first"), CASES)
def test_first_times_and_counts_agree_with_listing(tz, start, rule, shown, first):
    rec = load(f"DTSTART;TZID={tz}:{start}\nRRULE:{rule}")
    edges = _edges(first, 4, shown)
    expected = _listed(rec, edges)
    got = by_day(rec, edges, keep=3, cap=5_000)
    assert [d.first for d in got] == [day[:3] for day in expected]
    assert [d.count for d in got] == [len(day) for day in expected]
    assert all(d.exact for d in got)
    if fixed_step(rec) is not None:  # counted by arithmetic, so exact with a small cap too
        small = by_day(rec, edges, keep=3, cap=10)
        assert [(d.first, d.count, d.exact) for d in small] == [(d.first, d.count, True) for d in got]


def test_until_count_rdate_and_exdate_are_listed_not_counted():
    for extra in (";UNTIL=20261025T110000Z", ";COUNT=3000"):
        assert fixed_step(load(f"DTSTART;TZID=Europe/Berlin:20261024T000000\nRRULE:FREQ=MINUTELY{extra}")) is None
    rec = load("DTSTART;TZID=Europe/Berlin:20261024T000000\nRRULE:FREQ=MINUTELY;UNTIL=20261025T110000Z\n"
               "EXDATE;TZID=Europe/Berlin:20261024T000500")
    edges = _edges(date(2026, 10, 24), 3, "Europe/Berlin")
    got = by_day(rec, edges, keep=2, cap=5_000)
    expected = _listed(rec, edges)
    assert [d.count for d in got] == [len(day) for day in expected]
    assert [d.first for d in got] == [day[:2] for day in expected]
    assert got[0].count == 1439 and got[1].count == 12 * 60 + 1 and got[2].count == 0


def test_a_dense_day_costs_bounded_work_and_says_when_its_count_is_a_lower_bound():
    dense = load("DTSTART;TZID=UTC:20260101T000000\nRRULE:FREQ=MINUTELY;BYHOUR=0,1,2,3,4,5,6,7,8,9,10,11")
    edges = _edges(date(2026, 6, 1), 7, "UTC")
    with budget_scope(10_000_000) as budget:
        got = by_day(dense, edges, keep=4, cap=50)
    assert all(d.count == 54 and not d.exact and len(d.first) == 4 for d in got)
    assert budget.steps < 7 * 60 * 3  # listing the week would be 7 * 720 occurrences
    every_minute = load("DTSTART;TZID=UTC:20260101T000000\nRRULE:FREQ=MINUTELY")
    with budget_scope(10_000_000) as budget:
        got = by_day(every_minute, edges, keep=4, cap=50)
    assert [d.count for d in got] == [1440] * 7 and all(d.exact for d in got)
    assert budget.steps < 7 * 40


def test_the_offset_change_is_found_to_the_second():
    zone = ZoneInfo("Europe/Berlin")
    change = _offset_change(zone, datetime(2026, 10, 24, 22, 0, tzinfo=timezone.utc),
                            datetime(2026, 10, 25, 23, 0, tzinfo=timezone.utc))
    assert change == (datetime(2026, 10, 25, 1, 0, tzinfo=timezone.utc), timedelta(hours=-1))
