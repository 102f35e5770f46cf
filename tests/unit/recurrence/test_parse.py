"""The four input forms become one canonical RFC 5545 block."""

from __future__ import annotations

from datetime import datetime

import pytest

from almanac.errors import InvalidRule, ValidationError
from almanac.platform.recurrence import load, occurrences, parse, preview

from .conftest import NOW, iso

WEEKDAYS_9 = "DTSTART;TZID=Europe/Berlin:20261123T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"


@pytest.mark.parametrize(("text", "kind"), [
    pytest.param("every weekday at 9am", "text", id="english"),
    pytest.param("0 9 * * 1-5", "cron", id="cron-5"),
    pytest.param("0 0 9 * * MON-FRI", "cron", id="cron-6-seconds-first"),
    pytest.param("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9;BYMINUTE=0", "rrule", id="rrule"),
    pytest.param("RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9;BYMINUTE=0;BYSECOND=0", "rrule",
                 id="rrule-prefixed"),
])
def test_same_rule_in_every_form_gives_one_canonical(text: str, kind: str) -> None:
    rec = parse(text, "Europe/Berlin", now=NOW)
    assert rec.input_kind == kind
    assert rec.canonical == WEEKDAYS_9
    assert rec.dtstart.isoformat() == "2026-11-23T09:00:00+01:00"


@pytest.mark.parametrize(("text", "canonical_rrule", "first"), [
    pytest.param("the last Friday of every month at noon", "FREQ=MONTHLY;BYDAY=-1FR",
                 "2026-11-27T12:00:00+01:00", id="last-friday-noon"),
    pytest.param("every 2 weeks on Monday and Friday at 17:30", "FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,FR",
                 "2026-11-20T17:30:00+01:00", id="fortnightly"),
    pytest.param("every 15 minutes", "FREQ=MINUTELY;INTERVAL=15", "2026-11-20T11:15:00+01:00",
                 id="every-15-minutes-on-the-quarter"),
    pytest.param("the 3rd last Tuesday of every month at 8am", "FREQ=MONTHLY;BYDAY=-3TU",
                 "2026-12-15T08:00:00+01:00", id="third-last-tuesday"),
    pytest.param("every year on February 29 at 9:00 AM", "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
                 "2028-02-29T09:00:00+01:00", id="feb-29"),
    pytest.param("*/15 * * * *", "FREQ=MINUTELY;INTERVAL=15", "2026-11-20T11:15:00+01:00",
                 id="cron-step"),
    pytest.param("@monthly", "FREQ=MONTHLY;BYMONTHDAY=1", "2026-12-01T00:00:00+01:00",
                 id="cron-monthly"),
    pytest.param("0 12 * * FRI#3", "FREQ=MONTHLY;BYDAY=3FR", "2026-11-20T12:00:00+01:00",
                 id="cron-third-friday"),
    pytest.param("daily at 10:30", "FREQ=DAILY", "2026-11-20T11:07:00+01:00", id="daily-at"),
])
def test_english_and_cron(text: str, canonical_rrule: str, first: str) -> None:
    p = preview(text, "Europe/Berlin", start=None, now=NOW, count=3)
    assert p.rrule.splitlines()[1] == "RRULE:" + canonical_rrule
    if text != "daily at 10:30":
        assert p.next[0].isoformat() == first


def test_cron_day_of_month_or_day_of_week() -> None:
    rec = parse("0 0 1,15 * MON", "UTC", now=NOW)
    got = iso(occurrences(rec, after=NOW, count=4))
    assert got == ["2026-11-23T00:00:00+00:00", "2026-11-30T00:00:00+00:00",
                   "2026-12-01T00:00:00+00:00", "2026-12-07T00:00:00+00:00"]


def test_iso_instant_is_a_one_off() -> None:
    p = preview("2026-12-01T09:00:00+01:00", "Europe/Berlin", start=None, now=NOW)
    assert p.input_kind == "at"
    assert p.rrule == ("DTSTART;TZID=Europe/Berlin:20261201T090000\n"
                       "RDATE;TZID=Europe/Berlin:20261201T090000")
    assert iso(p.next) == ["2026-12-01T09:00:00+01:00"]
    assert p.description == "once on December 1, 2026 at 9:00 AM (Europe/Berlin)"


def test_block_keeps_its_own_tzid_and_exdate() -> None:
    text = ("DTSTART;TZID=America/New_York:20261201T090000\nRRULE:FREQ=DAILY;COUNT=4\n"
            "EXDATE;TZID=America/New_York:20261202T090000\n"
            "RDATE;TZID=America/New_York:20261210T170000")
    rec = parse(text, "Europe/Berlin", now=NOW)
    assert rec.timezone == "America/New_York"
    assert [d.day for d in occurrences(rec, after=NOW, count=10)] == [1, 3, 4, 10]
    assert load(rec.canonical).canonical == rec.canonical


def test_start_naive_is_wall_clock_in_zone() -> None:
    rec = parse("FREQ=DAILY", "Asia/Tokyo", start=datetime(2027, 1, 5, 8, 0), now=NOW)
    assert rec.dtstart.isoformat() == "2027-01-05T08:00:00+09:00"


def test_until_is_stored_in_utc() -> None:
    rec = parse("FREQ=DAILY;UNTIL=20261231T235959Z", "Europe/Berlin", now=NOW)
    assert "UNTIL=20261231T235959Z" in rec.canonical
    assert occurrences(rec, after=NOW, count=100)[-1].date().isoformat() == "2026-12-31"


@pytest.mark.parametrize(("text", "position", "words"), [
    pytest.param("FREQ=DAILY;INTERVAL=0", 20, "1 or more", id="interval-zero"),
    pytest.param("FREQ=DAILY;INTERVAL=-2", 20, "1 or more", id="interval-negative"),
    pytest.param("FREQ=WEEKLY;BYDAY=MO;BYDAY=TU", 21, "twice", id="duplicated-part"),
    pytest.param("FREQ=MONTHLY;BYMONTHDAY=32", 24, "out of range", id="monthday-32"),
    pytest.param("FREQ=DAILY;BYHOUR=24", 18, "out of range", id="hour-24"),
    pytest.param("FREQ=DAILY;BYMONTH=0", 19, "out of range", id="month-0"),
    pytest.param("FREQ=FORTNIGHTLY", 5, "FREQ", id="unknown-freq"),
    pytest.param("FREQ=DAILY;COUNT=2;UNTIL=20270101T000000Z", 19, "both", id="count-and-until"),
    pytest.param("FREQ=DAILY;BYDAY=1MO", 11, "MONTHLY", id="numbered-weekday-daily"),
    pytest.param("FREQ=DAILY;BYSOMETHING=1", 11, "Unknown", id="unknown-part"),
    pytest.param("x" * 4097, 4096, "4096", id="over-4-KiB"),
    pytest.param("61 * * * *", 0, "out of range", id="cron-minute-61"),
    pytest.param("every blue moon", 6, "understand", id="english-nonsense"),
])
def test_invalid_rules_say_where(text: str, position: int, words: str) -> None:
    with pytest.raises(InvalidRule) as err:
        parse(text, "UTC", now=NOW)
    assert err.value.details["position"] == position
    assert words in err.value.message


def test_unknown_zone_is_invalid_rule() -> None:
    with pytest.raises(InvalidRule):
        parse("FREQ=DAILY", "Mars/Olympus", now=NOW)


def test_count_out_of_range_is_validation_error() -> None:
    with pytest.raises(ValidationError):
        preview("FREQ=DAILY", "UTC", start=None, now=NOW, count=51)


def test_load_is_cached_and_round_trips() -> None:
    rec = parse("every weekday at 9am", "Europe/Berlin", now=NOW)
    assert load(rec.canonical) is load(rec.canonical)
    assert load(rec.canonical).rules == rec.rules
