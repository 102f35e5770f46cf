"""RDATE, EXDATE and a UTC DTSTART are instants (RFC 5545 3.8.5): each keeps its own TZID or Z.

The rules are wall-clock times in the rule's zone; a date named in another zone, or in UTC, names
one instant, which the canonical text keeps under its own zone and which matches or removes only
that instant (the second pass of a repeated hour is not the first).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from almanac.errors import NeverFires
from almanac.platform.recurrence import describe, load, occurrences, parse, preview

UTC = timezone.utc
NOW = datetime(2031, 1, 1, tzinfo=UTC)


def _utc(found: list[datetime]) -> list[str]:
    return [d.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ") for d in found]


def _next(text: str, tz: str = "Europe/Berlin", count: int = 5, now: datetime = NOW) -> list[str]:
    return _utc(preview(text, tz, start=None, now=now, count=count).next)


def test_an_rdate_in_another_zone_is_its_own_instant_and_keeps_its_zone() -> None:
    block = ("DTSTART;TZID=Europe/Berlin:20310301T090000\nRRULE:FREQ=YEARLY;COUNT=1\n"
             "RDATE;TZID=America/New_York:20310305T110000")
    assert _next(block) == ["2031-03-01T08:00Z", "2031-03-05T16:00Z"]
    canonical = parse(block, "Europe/Berlin", now=NOW).canonical
    assert "RDATE;TZID=America/New_York:20310305T110000" in canonical


def test_an_exdate_in_another_zone_removes_its_occurrence() -> None:
    block = ("DTSTART;TZID=Europe/Berlin:20310301T170000\nRRULE:FREQ=DAILY;COUNT=3\n"
             "EXDATE;TZID=America/New_York:20310302T110000")
    assert _next(block) == ["2031-03-01T16:00Z", "2031-03-03T16:00Z"]


def test_a_utc_dtstart_iterates_in_utc_whatever_the_timezone_says() -> None:
    found = _next("DTSTART:20311024T080000Z\nRRULE:FREQ=DAILY;COUNT=4", "Europe/Berlin")
    assert found == ["2031-10-24T08:00Z", "2031-10-25T08:00Z", "2031-10-26T08:00Z", "2031-10-27T08:00Z"]


def test_an_rdate_after_start_but_before_the_rules_first_occurrence_is_kept() -> None:
    start = datetime(2031, 3, 2, 0, 0, tzinfo=UTC)  # a Sunday; the rule's first Monday is the 3rd
    rule = "RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=9;BYMINUTE=0\nRDATE:20310302T120000Z"
    found = preview(rule, "UTC", start=start, now=start, count=2).next
    assert _utc(found) == ["2031-03-02T12:00Z", "2031-03-03T09:00Z"]


# Berlin falls back on 26 Oct 2031: 02:30 CEST is 00:30Z, 02:30 CET is 01:30Z.
FALL = "DTSTART;TZID=Europe/Berlin:20311026T023000\nRRULE:FREQ=DAILY;COUNT=1\n"


def test_a_utc_rdate_in_the_second_pass_of_a_repeated_hour_is_not_a_duplicate() -> None:
    found = _next(FALL + "RDATE:20311026T013000Z", now=datetime(2031, 10, 1, tzinfo=UTC))
    assert found == ["2031-10-26T00:30Z", "2031-10-26T01:30Z"]
    assert "RDATE:20311026T013000Z" in parse(FALL + "RDATE:20311026T013000Z", "Europe/Berlin", now=NOW).canonical


def test_an_exdate_naming_the_second_pass_does_not_remove_the_first() -> None:
    found = _next(FALL + "EXDATE:20311026T013000Z", now=datetime(2031, 10, 1, tzinfo=UTC))
    assert found == ["2031-10-26T00:30Z"]


def test_an_exdate_naming_the_first_pass_in_utc_removes_it() -> None:
    with pytest.raises(NeverFires):
        _next(FALL + "EXDATE:20311026T003000Z", now=datetime(2031, 10, 1, tzinfo=UTC))


@pytest.mark.parametrize("block", [
    FALL + "RDATE:20311026T013000Z",
    "DTSTART;TZID=Europe/Berlin:20310301T090000\nRRULE:FREQ=WEEKLY;COUNT=3\nRDATE;TZID=America/New_York:20310305T110000",
    "DTSTART;TZID=Europe/Berlin:20310301T090000\nRRULE:FREQ=DAILY;COUNT=5\nEXDATE:20310302T080000Z",
], ids=["second-pass-rdate", "new-york-rdate", "utc-exdate"])
def test_canonical_text_and_description_give_the_same_instants(block: str) -> None:
    start = datetime(2031, 1, 1, tzinfo=UTC)
    rec = parse(block, "Europe/Berlin", now=start)
    again = load(rec.canonical)
    said = parse(describe(rec), "Europe/Berlin", start=rec.dtstart, now=start)
    first = _utc(occurrences(rec, after=start, count=10))
    assert _utc(occurrences(again, after=start, count=10)) == first
    assert _utc(occurrences(said, after=start, count=10)) == first


def test_a_one_off_in_the_second_pass_fires_once_at_that_instant() -> None:
    rec = parse("2031-10-26T01:30:00Z", "Europe/Berlin", now=datetime(2031, 10, 1, tzinfo=UTC))
    assert _utc(occurrences(rec, after=datetime(2031, 10, 1, tzinfo=UTC), count=5)) == ["2031-10-26T01:30Z"]


def test_rule_parts_come_in_any_order() -> None:
    assert parse("INTERVAL=4;FREQ=HOURLY", "UTC", now=NOW).canonical == parse("FREQ=HOURLY;INTERVAL=4", "UTC",
                                                                              now=NOW).canonical


def test_a_start_in_a_gap_after_until_never_fires() -> None:
    """Berlin springs forward on 28 Mar 2032: a start at 02:30 (in the gap) is 03:30 CEST, past UNTIL."""
    with pytest.raises(NeverFires):
        preview("FREQ=MINUTELY;UNTIL=20320328T011500Z", "Europe/Berlin", start=datetime(2032, 3, 28, 2, 30),
                now=datetime(2032, 3, 1, tzinfo=UTC), count=3)


def test_every_second_from_a_start_in_a_gap_fires_every_second_after_it() -> None:
    """Berlin's 28 Mar 2032 gap: a start at 02:30 is 03:30 CEST, and a rule that fires every second
    fires every second from there (walking the gap's 1,800 moved times found only duplicates)."""
    found = preview("FREQ=SECONDLY", "Europe/Berlin", start=datetime(2032, 3, 28, 2, 30),
                    now=datetime(2032, 3, 1, tzinfo=UTC), count=3, min_interval_s=1).next
    assert [d.astimezone(UTC).strftime("%H:%M:%S") for d in found] == ["01:30:00", "01:30:01", "01:30:02"]


def test_a_gap_walk_is_kept_where_gap_times_are_not_shadowed() -> None:
    """A daily 02:30 rule on the gap day still fires, moved to 03:30 (the lookback is still walked)."""
    found = preview("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "Europe/Berlin", start=datetime(2032, 3, 28, 2, 30),
                    now=datetime(2032, 3, 1, tzinfo=UTC), count=2).next
    assert [d.strftime("%d %H:%M") for d in found] == ["28 03:30", "29 02:30"]
