"""Every rule the engine accepts gets a description that parses back to the
same dates: generated RRULEs with RDATE/EXDATE and BYSETPOS, and generated
cron expressions (whose BY lists are ranges and steps)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from almanac.errors import AlmanacError, InvalidRule
from almanac.platform.recurrence import describe, load, occurrences, parse
from almanac.platform.recurrence.engine import budget_scope
from almanac.platform.recurrence.model import CalendarClause
from almanac.platform.recurrence.parse_rrule import parse_rule

from .test_cron import cron_expressions
from .test_properties import rules

ROUND = settings(max_examples=150, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
NOW = datetime(2026, 11, 20, 10, 7, tzinfo=timezone.utc)


def _same_dates(rec, text: str, zone: str) -> None:  # type: ignore[no-untyped-def]
    with budget_scope(10_000_000):
        again = parse(text, zone, start=rec.dtstart, now=rec.dtstart)
        want = occurrences(rec, after=rec.dtstart, count=15)
        got = occurrences(again, after=rec.dtstart, count=15)
    assert again.input_kind == "text"
    assert got == want, text


@ROUND
@given(rules(("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY")),
       st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2028, 12, 31)),
       st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]),
       st.lists(st.integers(1, 400), max_size=3), st.lists(st.integers(0, 30), max_size=2))
def test_description_with_rdate_and_exdate_parses_back(rule: str, start: datetime, zone: str,
                                                       extra_days: list[int],
                                                       excluded: list[int]) -> None:
    try:
        parse_rule(rule, 0, "UTC")
    except InvalidRule:
        assume(False)
    start = start.replace(second=0, microsecond=0)
    lines = [f"DTSTART;TZID={zone}:{start:%Y%m%dT%H%M%S}", f"RRULE:{rule}"]
    if extra_days:
        lines.append(f"RDATE;TZID={zone}:" + ",".join(
            f"{start + timedelta(days=d, hours=d % 5):%Y%m%dT%H%M%S}" for d in extra_days))
    rec = load("\n".join(lines))
    with budget_scope(10_000_000):
        first = occurrences(rec, after=rec.dtstart, count=31)
    if excluded and first:
        walls = {first[i % len(first)].astimezone(rec.dtstart.tzinfo).replace(tzinfo=None)
                 for i in excluded}
        lines.append(f"EXDATE;TZID={zone}:" + ",".join(f"{w:%Y%m%dT%H%M%S}" for w in sorted(walls)))
        rec = load("\n".join(lines))
    _same_dates(rec, describe(rec), zone)


@ROUND
@given(cron_expressions())
def test_cron_description_parses_back(expr: str) -> None:
    try:
        rec = parse(expr, "UTC", start=NOW, now=NOW)
        with budget_scope(10_000_000):
            assume(occurrences(rec, after=NOW, count=1))
    except AlmanacError:
        assume(False)
    _same_dates(rec, describe(rec), "UTC")


_CLAUSES = st.builds(
    CalendarClause,
    st.sampled_from([None, "DE", "DE-BY", "US-NY", "GB-SCT", "payroll-calendar", "Acme.Cal_1",
                     "germany", "de-by", "FR"]),
    st.sampled_from(["skip", "before", "after"]))


@ROUND
@given(rules(("YEARLY", "MONTHLY", "WEEKLY", "DAILY")),
       st.datetimes(min_value=datetime(2024, 1, 1), max_value=datetime(2028, 12, 31)),
       _CLAUSES)
def test_description_with_a_calendar_reads_back_to_the_same_calendar(rule: str, start: datetime,
                                                                    clause: CalendarClause) -> None:
    try:
        parse_rule(rule, 0, "UTC")
    except InvalidRule:
        assume(False)
    start = start.replace(second=0, microsecond=0)
    rec = replace(load(f"DTSTART;TZID=Europe/Berlin:{start:%Y%m%dT%H%M%S}\nRRULE:{rule}"),
                  calendar=clause)
    text = describe(rec)
    again = parse(text, "Europe/Berlin", start=rec.dtstart, now=rec.dtstart)
    assert again.calendar == clause, text
    _same_dates(rec, text, "Europe/Berlin")
