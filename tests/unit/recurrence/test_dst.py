"""DST behaviour (SPEC section 5): gap times move forward by the gap, repeated
times fire once at the first, and sub-daily rules iterate on the wall clock."""

from __future__ import annotations

from datetime import datetime

import pytest

from almanac.platform.recurrence import load, next_after, occurrences

from .conftest import iso

CASES = [
    pytest.param("Europe/Berlin", "20260327T023000", "FREQ=DAILY",
                 ["2026-03-28T02:30:00+01:00", "2026-03-29T03:30:00+02:00",
                  "2026-03-30T02:30:00+02:00"], id="berlin-spring-gap-0230-becomes-0330"),
    pytest.param("Europe/Berlin", "20261023T023000", "FREQ=DAILY",
                 ["2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00",
                  "2026-10-26T02:30:00+01:00"], id="berlin-fall-overlap-fires-once-at-first"),
    pytest.param("America/New_York", "20260306T023000", "FREQ=DAILY",
                 ["2026-03-07T02:30:00-05:00", "2026-03-08T03:30:00-04:00",
                  "2026-03-09T02:30:00-04:00"], id="new-york-spring-gap"),
    pytest.param("America/New_York", "20261030T013000", "FREQ=DAILY",
                 ["2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00",
                  "2026-11-02T01:30:00-05:00"], id="new-york-fall-overlap-first-edt"),
    pytest.param("Australia/Lord_Howe", "20261002T021500", "FREQ=DAILY",
                 ["2026-10-03T02:15:00+10:30", "2026-10-04T02:45:00+11:00",
                  "2026-10-05T02:15:00+11:00"], id="lord-howe-30-minute-gap"),
    pytest.param("Australia/Lord_Howe", "20260403T014500", "FREQ=DAILY",
                 ["2026-04-04T01:45:00+11:00", "2026-04-05T01:45:00+11:00",
                  "2026-04-06T01:45:00+10:30"], id="lord-howe-30-minute-overlap"),
    pytest.param("America/Sao_Paulo", "20181102T003000", "FREQ=DAILY",
                 ["2018-11-03T00:30:00-03:00", "2018-11-04T01:30:00-02:00",
                  "2018-11-05T00:30:00-02:00"], id="sao-paulo-2018-midnight-gap"),
    pytest.param("America/Sao_Paulo", "20190215T233000", "FREQ=DAILY",
                 ["2019-02-16T23:30:00-02:00", "2019-02-17T23:30:00-03:00"],
                 id="sao-paulo-2019-overlap-before-midnight"),
    pytest.param("Pacific/Apia", "20111228T090000", "FREQ=DAILY",
                 ["2011-12-29T09:00:00-10:00", "2011-12-31T09:00:00+14:00",
                  "2012-01-01T09:00:00+14:00"], id="samoa-2011-skipped-day-fires-once"),
    pytest.param("Europe/Berlin", "20261024T230000", "FREQ=HOURLY",
                 ["2026-10-25T00:00:00+02:00", "2026-10-25T01:00:00+02:00",
                  "2026-10-25T02:00:00+02:00", "2026-10-25T03:00:00+01:00"],
                 id="berlin-hourly-fall-back-once-per-wall-hour"),
    pytest.param("Europe/Berlin", "20260328T230000", "FREQ=HOURLY",
                 ["2026-03-29T00:00:00+01:00", "2026-03-29T01:00:00+01:00",
                  "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00"],
                 id="berlin-hourly-spring-gap-merged"),
    pytest.param("Europe/Berlin", "20260329T013000", "FREQ=MINUTELY;INTERVAL=15",
                 ["2026-03-29T01:45:00+01:00", "2026-03-29T03:00:00+02:00",
                  "2026-03-29T03:15:00+02:00", "2026-03-29T03:30:00+02:00",
                  "2026-03-29T03:45:00+02:00", "2026-03-29T04:00:00+02:00"],
                 id="berlin-15-minutes-through-gap-strictly-increasing"),
]


@pytest.mark.parametrize(("zone", "start", "rule", "expected"), CASES)
def test_dst(zone: str, start: str, rule: str, expected: list[str]) -> None:
    rec = load(f"DTSTART;TZID={zone}:{start}\nRRULE:{rule}")
    first = datetime.fromisoformat(expected[0])
    got = occurrences(rec, after=first, count=len(expected))
    assert iso(got) == expected


def test_next_after_is_strict_and_skips_the_repeated_hour() -> None:
    rec = load("DTSTART;TZID=Europe/Berlin:20261024T023000\nRRULE:FREQ=DAILY")
    first = datetime.fromisoformat("2026-10-25T02:30:00+02:00")
    assert next_after(rec, first).isoformat() == "2026-10-26T02:30:00+01:00"
    # the second 02:30 (winter time) is not an occurrence
    second = datetime.fromisoformat("2026-10-25T02:30:00+01:00")
    assert next_after(rec, first.replace(minute=29)).isoformat() == first.isoformat()
    assert next_after(rec, second) == datetime.fromisoformat("2026-10-26T02:30:00+01:00")


def test_naive_after_is_wall_clock_in_the_rule_zone() -> None:
    rec = load("DTSTART;TZID=America/New_York:20260101T090000\nRRULE:FREQ=DAILY")
    got = occurrences(rec, after=datetime(2026, 7, 1, 9, 0), count=1)
    assert got[0].isoformat() == "2026-07-01T09:00:00-04:00"


# ---------------------------------------------------------------- preview notes


@pytest.mark.parametrize(("zone", "rule", "now", "notes"), [
    pytest.param("Europe/Berlin", "every day at 2:30", "2026-03-27T00:00:00+00:00",
                 ["02:30 does not exist on 29 Mar 2026: runs at 03:30"], id="berlin-daily-0230"),
    pytest.param("America/New_York", "0 2 * * *", "2026-03-06T12:00:00+00:00",
                 ["02:00 does not exist on 8 Mar 2026: runs at 03:00"], id="new-york-cron-0200"),
    pytest.param("Australia/Lord_Howe", "every day at 2:15", "2026-10-02T00:00:00+00:00",
                 ["02:15 does not exist on 4 Oct 2026: runs at 02:45"], id="lord-howe-half-hour"),
    pytest.param("Europe/Berlin", "every day at 3:30", "2026-03-27T00:00:00+00:00", [],
                 id="after-the-gap-nothing-moves"),
    pytest.param("Europe/Berlin", "every day at 2:30", "2026-10-23T00:00:00+00:00", [],
                 id="fall-back-is-not-a-move"),
])
def test_preview_says_when_a_gap_moves_an_occurrence(zone: str, rule: str, now: str,
                                                     notes: list[str]) -> None:
    from datetime import datetime as dt

    from almanac.platform.recurrence import preview

    p = preview(rule, zone, start=None, now=dt.fromisoformat(now), count=5)
    assert [s.note for s in p.shifts] == notes
    assert all(s.runs_at in p.next for s in p.shifts)
