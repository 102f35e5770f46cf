"""Business calendars said in English: which rule, which calendar, what a closed day does; and
the description says the calendar and reads back to the same rule and calendar."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from almanac.errors import InvalidRule
from almanac.platform.recurrence import describe, occurrences
from almanac.platform.recurrence.api import parse
from almanac.platform.recurrence.calendars import place_code
from almanac.platform.recurrence.engine import budget_scope
from almanac.platform.recurrence.model import CalendarClause

NOW = datetime(2026, 11, 20, 10, 7, tzinfo=timezone.utc)  # a Friday
WEEKDAYS = "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"

CASES = [
    ("every business day at 8", WEEKDAYS, "080000", None, "skip"),
    ("every weekday at 9am except holidays in Germany", WEEKDAYS, "090000", "DE", "skip"),
    ("every weekday at 9am except public holidays in germany", WEEKDAYS, "090000", "DE", "skip"),
    ("every weekday at 9am except holidays in Bavaria, Germany", WEEKDAYS, "090000", "DE-BY", "skip"),
    ("every weekday at 9am except holidays in DE-BY", WEEKDAYS, "090000", "DE-BY", "skip"),
    ("every weekday at 9am except holidays in de-by", WEEKDAYS, "090000", "DE-BY", "skip"),
    ("every weekday at 9am except holidays in payroll-calendar", WEEKDAYS, "090000",
     "payroll-calendar", "skip"),
    ("every weekday at 9am except holidays in Payroll.EU", WEEKDAYS, "090000", "Payroll.EU", "skip"),
    ("every Monday at 7 except holidays", "FREQ=WEEKLY;BYDAY=MO", "070000", None, "skip"),
    ("every weekday at 9 except holidays in New York, United States", WEEKDAYS, "090000", "US-NY",
     "skip"),
    ("on the 25th of every month at 10, or the business day before if it is not a business day "
     "in DE-BY", "FREQ=MONTHLY;BYMONTHDAY=25", "100000", "DE-BY", "before"),
    ("on the 25th of every month at 10, or the business day before", "FREQ=MONTHLY;BYMONTHDAY=25",
     "100000", None, "before"),
    ("on the 25th of every month at 10, or the next business day", "FREQ=MONTHLY;BYMONTHDAY=25",
     "100000", None, "after"),
    ("the 15th of every month at noon, or the previous business day in Germany",
     "FREQ=MONTHLY;BYMONTHDAY=15", "120000", "DE", "before"),
    ("the last business day of every month at 17:00",
     "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0;BYSETPOS=-1", None, None,
     "before"),
    ("the first business day of every month",
     "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=0;BYMINUTE=0;BYSECOND=0;BYSETPOS=1", None, None,
     "after"),
    ("the last business day of every month at 17:00 in Germany",
     "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=17;BYMINUTE=0;BYSECOND=0;BYSETPOS=-1", None, "DE",
     "before"),
]


@pytest.mark.parametrize(("text", "rrule", "clock", "name", "policy"), CASES,
                         ids=[c[0][:60] for c in CASES])
def test_calendar_phrase(text: str, rrule: str, clock: str | None, name: str | None,
                         policy: str) -> None:
    rec = parse(text, "Europe/Berlin", now=NOW)
    assert rec.calendar == CalendarClause(name, policy)  # type: ignore[arg-type]
    lines = rec.canonical.splitlines()
    assert lines[1] == "RRULE:" + rrule  # the calendar is not in the canonical text
    if clock is not None:
        assert lines[0].endswith("T" + clock)


@pytest.mark.parametrize(("text", "rrule", "clock", "name", "policy"), CASES,
                         ids=[c[0][:60] for c in CASES])
def test_calendar_description_reads_back(text: str, rrule: str, clock: str | None,
                                         name: str | None, policy: str) -> None:
    rec = parse(text, "Europe/Berlin", now=NOW)
    said = describe(rec)
    assert (" in " + name) in said or f'"{name}"' in said if name else True
    again = parse(said, "Europe/Berlin", start=rec.dtstart, now=rec.dtstart)
    assert again.calendar == rec.calendar, said
    assert again.canonical == rec.canonical, said
    with budget_scope(10_000_000):
        assert occurrences(again, after=rec.dtstart, count=12) == \
            occurrences(rec, after=rec.dtstart, count=12)


def test_a_calendar_named_like_a_place_reads_back_as_that_calendar() -> None:
    rec = parse('every weekday at 9 except holidays in the "germany" calendar', "UTC", now=NOW)
    assert rec.calendar == CalendarClause("germany", "skip")
    said = describe(rec)
    assert '"germany" calendar' in said
    assert parse(said, "UTC", now=NOW).calendar == rec.calendar


@pytest.mark.parametrize(("words", "code"), [
    ("Germany", "DE"), ("the United Kingdom", "GB"), ("Scotland, UK", "GB-SCT"), ("FRA", "FR"),
    ("Baden-Württemberg, Germany", "DE-BW"), ("Bayern, Germany", "DE-BY"), ("us-ca", "US-CA"),
    ("payroll", None), ("Atlantis", None), ("DE-XX", None), ("January", None),
])
def test_places_are_the_holiday_librarys_codes(words: str, code: str | None) -> None:
    assert place_code(words) == code


@pytest.mark.parametrize(("text", "marked"), [
    ("the 2nd business day of every month", "2nd"),
    ("the last business day of every month, or the next business day", ", or the next business day"),
    ("every weekday except holidays in New Atlantis", "New Atlantis"),
])
def test_calendar_words_that_cannot_be_used_are_refused(text: str, marked: str) -> None:
    with pytest.raises(InvalidRule) as refused:
        parse(text, "UTC", now=NOW)
    details = refused.value.details
    assert text[details["position"]:details["position"] + details["length"]] == marked


def test_a_rule_without_calendar_words_has_no_calendar() -> None:
    assert parse("every weekday at 9am", "UTC", now=NOW).calendar is None
    assert parse("FREQ=WEEKLY;BYDAY=MO", "UTC", now=NOW).calendar is None
