"""Business calendars: days checked against the holidays library itself, the
skip/before/after laws as properties, DST, never-fires, and uncovered years."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import holidays
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from almanac.errors import HolidaysUnknown, NeverFires, ValidationError
from almanac.platform.recurrence import ensure_fires, occurrences, parse
from almanac.platform.recurrence.engine import PREVIEW_STEPS, budget_scope
from almanac.platform.recurrence.calendars import (
    BusinessCalendar, ClosedDays, is_business_day, why_not_business_day,
)
from almanac.platform.recurrence.zones import in_gap
from almanac.platform.recurrence.roll import (
    MAX_SEARCH_DAYS, Rolled, check_policy, ensure_fires_with_calendar, roll,
)

BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2026, 11, 20, 10, 7, 33, tzinfo=timezone.utc)
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _days(year: int) -> list[date]:
    first = date(year, 1, 1)
    return [first + timedelta(days=i) for i in range((date(year + 1, 1, 1) - first).days)]


def _cal(**kw: object) -> BusinessCalendar:
    return BusinessCalendar.from_json({"name": "test", **kw})


# ---------------------------------------------------------------- against the library


PLACES = [("DE", None), ("DE", "BY"), ("US", None), ("US", "CA"), ("GB", "ENG"), ("GB", "SCT"),
          ("FR", None), ("JP", None)]


@pytest.mark.parametrize("year", [2024, 2026, 2031])
@pytest.mark.parametrize(("country", "subdivision"), PLACES,
                         ids=[f"{c}-{s}" if s else c for c, s in PLACES])
def test_every_day_of_the_year_agrees_with_the_holidays_library(
        country: str, subdivision: str | None, year: int) -> None:
    cal = _cal(country=country, subdivision=subdivision)
    table = holidays.country_holidays(country, subdiv=subdivision, years=year)
    for day in _days(year):
        expected = day.weekday() < 5 and day not in table
        assert is_business_day(cal, day) is expected, (day, table.get(day))
        if day in table:
            assert why_not_business_day(cal, day) not in (None, "weekend"), day


@pytest.mark.parametrize(("place", "day", "reason"), [
    (("DE", None), "2026-12-25", "Christmas Day"),
    (("DE", "BY"), "2026-01-06", "Epiphany"),
    (("DE", None), "2026-01-06", None),
    (("US", None), "2026-07-03", "Independence Day (observed)"),
    (("GB", "ENG"), "2026-08-31", "Late Summer Bank Holiday"),
    (("GB", "SCT"), "2026-08-31", None),
    (("GB", "SCT"), "2026-08-03", "Summer Bank Holiday"),
    (("FR", None), "2026-07-14", "National Day"),
    (("JP", None), "2026-05-04", "Greenery Day"),
    (("DE", None), "2026-07-25", "weekend"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_why_not_names_the_holiday_in_english(place: tuple[str, str | None], day: str,
                                              reason: str | None) -> None:
    cal = _cal(country=place[0], subdivision=place[1])
    assert why_not_business_day(cal, date.fromisoformat(day)) == reason


def test_other_weekends_and_closed_ranges() -> None:
    cal = _cal(weekend=["friday", "saturday"],
               closed=[{"from": "2026-12-24", "to": "2026-12-31", "label": "company shutdown"},
                       {"from": "2026-03-02", "label": "stocktaking"}])
    assert is_business_day(cal, date(2026, 7, 26))  # a Sunday
    assert why_not_business_day(cal, date(2026, 7, 24)) == "weekend"  # a Friday
    assert why_not_business_day(cal, date(2026, 3, 2)) == "stocktaking"
    assert is_business_day(cal, date(2026, 3, 3))
    assert [why_not_business_day(cal, date(2026, 12, d)) for d in (23, 24, 29, 31)] == \
        [None, "company shutdown", "company shutdown", "company shutdown"]
    assert is_business_day(cal, date(2027, 1, 3))  # a Sunday after the range


def test_a_holiday_is_named_even_inside_a_shutdown_or_on_a_weekend() -> None:
    cal = _cal(country="DE", closed=[{"from": "2026-12-24", "to": "2026-12-31",
                                      "label": "company shutdown"}])
    assert why_not_business_day(cal, date(2026, 12, 25)) == "Christmas Day"
    assert why_not_business_day(cal, date(2026, 12, 28)) == "company shutdown"
    assert why_not_business_day(cal, date(2027, 12, 25)) == "Christmas Day"  # a Saturday


# ---------------------------------------------------------------- uncovered years


@pytest.mark.parametrize("day", [date(2101, 3, 3), date(1990, 3, 6)], ids=["2101", "1990"])
def test_a_year_the_library_does_not_cover_is_reported_not_guessed(day: date) -> None:
    cal = _cal(country="DE", subdivision="BY")
    with pytest.raises(HolidaysUnknown) as err:
        is_business_day(cal, day)
    assert str(day.year) in err.value.message and "DE-BY" in err.value.message
    assert err.value.code == "validation_error"


def test_an_uncovered_year_still_knows_weekends_and_closed_days() -> None:
    cal = _cal(country="DE", closed=[{"from": "2101-03-03", "label": "inventory"}])
    assert why_not_business_day(cal, date(2101, 3, 5)) == "weekend"
    assert why_not_business_day(cal, date(2101, 3, 3)) == "inventory"
    assert is_business_day(_cal(), date(2101, 3, 4))  # no country: no holidays to know


def test_roll_marks_an_uncovered_year_instead_of_keeping_it() -> None:
    cal = _cal(country="DE")
    found = [datetime(2100, 12, 30, 9, tzinfo=BERLIN), datetime(2101, 1, 4, 9, tzinfo=BERLIN)]
    out = list(roll(found, cal, "skip"))
    assert [r.action for r in out] == ["kept", "skipped"]
    assert out[1].reason == "holidays unknown for 2101"


# ---------------------------------------------------------------- JSON and validation


def test_json_round_trip_is_versioned() -> None:
    data = {"version": 1, "name": "payroll", "country": "DE", "subdivision": "BY",
            "weekend": ["friday", "saturday"],
            "closed": [{"from": "2026-12-24", "to": "2026-12-31", "label": "company shutdown"}]}
    cal = BusinessCalendar.from_json(data)
    assert cal.weekend == frozenset({4, 5})
    assert cal.closed == (ClosedDays(date(2026, 12, 24), date(2026, 12, 31), "company shutdown"),)
    assert cal.to_json() == data
    assert BusinessCalendar.from_json(cal.to_json()) == cal


def test_codes_are_read_in_any_case_and_stored_as_the_library_spells_them() -> None:
    cal = _cal(country="gb", subdivision="eng")
    assert (cal.country, cal.subdivision) == ("GB", "ENG")
    assert _cal().weekend == frozenset({5, 6})


@pytest.mark.parametrize(("data", "field", "says"), [
    ({"country": "XX"}, "country", "'XX' is not a country"),
    ({"country": "DE", "subdivision": "ZZ"}, "subdivision", "'ZZ' is not a subdivision of DE"),
    ({"subdivision": "BY"}, "subdivision", "needs a country"),
    ({"weekend": ["saturday", "funday"]}, "weekend", "'funday' is not a weekday"),
    ({"weekend": list(("monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
                       "sunday"))}, "weekend", "no business day"),
    ({"closed": [{"from": "2026-12-31", "to": "2026-12-24"}]}, "closed", "ends before it starts"),
    ({"closed": [{"from": "2026-02-30"}]}, "closed", "'2026-02-30' is not a date"),
    ({"closed": [{"from": "2026-02-03", "label": ""}]}, "closed", "label"),
    ({"closed": "2026-02-03"}, "closed", "list"),
    ({"version": 2}, "version", "version 2"),
    ({"name": "has space"}, "name", "name"),
], ids=lambda v: v if isinstance(v, str) and len(v) < 12 else None)
def test_invalid_calendars_are_refused_with_a_clear_message(
        data: dict[str, object], field: str, says: str) -> None:
    with pytest.raises(ValidationError) as err:
        BusinessCalendar.from_json({"name": "test", **data})
    assert err.value.details == {"field": field}
    assert says in err.value.message


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
# A valid name always, so that the later fields are reached (JSON alone covers a bad name).
FIELDS = st.fixed_dictionaries({"name": st.just("ok")}, optional={
    "version": JSON | st.just(1),
    "country": JSON | st.sampled_from(["DE", "us", "GB", "XX"]),
    "subdivision": JSON | st.sampled_from(["BY", "ENG", "ca"]),
    "weekend": JSON | st.lists(st.sampled_from(["monday", "sunday", "Saturday", "x"]), max_size=8),
    "closed": JSON | st.lists(st.fixed_dictionaries(
        {"from": st.sampled_from(["2026-01-01", "2026-13-01", 5])},
        optional={"to": st.sampled_from(["2025-12-31", "2026-02-01"]), "label": JSON}),
        max_size=3) | st.lists(st.sampled_from(["from", 3, None, {"to": "2026-01-01"}]), max_size=2),
})


@SETTINGS
@given(FIELDS | JSON)
def test_any_json_is_a_calendar_or_a_validation_error(data: object) -> None:
    try:
        cal = BusinessCalendar.from_json(data)
    except ValidationError as err:
        assert err.details is not None and err.message
        return
    assert BusinessCalendar.from_json(cal.to_json()) == cal
    is_business_day(cal, date(2026, 12, 25))


@pytest.mark.parametrize(("country", "covered", "uncovered"), [
    ("DE", [1991, 2100], [1990, 2101]), ("JP", [1949, 2099], [1948, 2100]),
])
def test_the_covered_years_end_exactly_where_the_library_says(
        country: str, covered: list[int], uncovered: list[int]) -> None:
    cal = _cal(country=country)
    for year in covered:
        assert is_business_day(cal, date(year, 1, 1)) is False  # New Year's Day, known
    for year in uncovered:
        with pytest.raises(HolidaysUnknown, match=str(year)):
            is_business_day(cal, _first_weekday(year))


def _first_weekday(year: int) -> date:
    day = date(year, 1, 2)
    while day.weekday() >= 5:
        day += timedelta(days=1)
    return day


def test_policies_are_checked() -> None:
    assert check_policy("before") == "before"
    with pytest.raises(ValidationError, match="skip, before or after"):
        check_policy("nearest")


# ---------------------------------------------------------------- roll: examples


def _at(day: str, hour: int = 10, zone: ZoneInfo = BERLIN) -> datetime:
    return datetime.combine(date.fromisoformat(day), datetime.min.time()).replace(
        hour=hour, tzinfo=zone)


def test_payroll_on_the_25th_or_the_business_day_before() -> None:
    cal = _cal(country="DE", subdivision="BY")
    found = [_at(f"2026-{m:02d}-25") for m in (6, 7, 12)]
    out = list(roll(found, cal, "before"))
    assert [r.action for r in out] == ["kept", "moved", "moved"]
    assert out[1].when == _at("2026-07-24") and out[1].reason == "weekend"
    assert out[1].describe() == "moved from Sat 25 Jul 2026 to Fri 24 Jul 2026: weekend"
    # 25 and 26 Dec are holidays in Bavaria and the 24th is a Thursday.
    assert out[2].when == _at("2026-12-24") and out[2].reason == "Christmas Day"


def test_skip_says_why() -> None:
    out = list(roll([_at("2026-12-25"), _at("2026-12-28")], _cal(country="DE"), "skip"))
    assert [r.describe() for r in out] == ["Fri 25 Dec 2026 skipped: Christmas Day",
                                           "Mon 28 Dec 2026 kept"]
    assert [r.when for r in out] == [None, _at("2026-12-28")]


def test_a_daily_rule_moved_after_makes_one_run_on_monday() -> None:
    found = [_at(f"2026-07-{d}", 9) for d in range(24, 29)]  # Fri .. Tue
    out = list(roll(found, _cal(), "after"))
    assert [(r.action, r.when) for r in out] == [
        ("kept", _at("2026-07-24", 9)),
        ("moved", _at("2026-07-27", 9)),
        ("skipped", None),
        ("skipped", None),
        ("kept", _at("2026-07-28", 9)),
    ]
    assert "Mon 27 Jul 2026 already has a run" in out[2].reason
    assert "moved there" in out[3].reason


def test_a_daily_rule_moved_before_does_not_add_to_friday() -> None:
    found = [_at(f"2026-07-{d}", 9) for d in range(24, 28)]  # Fri .. Mon
    out = list(roll(found, _cal(), "before"))
    assert [r.action for r in out] == ["kept", "skipped", "skipped", "kept"]


@pytest.mark.parametrize(("policy", "original", "moved_to"), [
    # Monday in winter time back to Friday in summer time, and Friday forward to Monday.
    ("before", "2026-10-26", "2026-10-23T09:00:00+02:00"),
    ("after", "2026-10-23", "2026-10-26T09:00:00+01:00"),
], ids=["before-into-summer-time", "after-into-winter-time"])
def test_a_move_across_the_october_change_keeps_the_wall_time(policy: str, original: str,
                                                                moved_to: str) -> None:
    cal = _cal(closed=[{"from": original}])
    (out,) = roll([_at(original, 9)], cal, check_policy(policy))
    assert out.action == "moved" and out.when is not None
    assert out.when.isoformat() == moved_to


def test_a_move_onto_the_spring_gap_day_fires_after_the_gap() -> None:
    cal = _cal(closed=[{"from": "2026-03-30"}], weekend=[])
    (out,) = roll([datetime(2026, 3, 30, 2, 30, tzinfo=BERLIN)], cal, "before")
    assert out.when is not None and out.when.isoformat() == "2026-03-29T03:30:00+02:00"


def test_a_calendar_without_a_business_day_in_reach_never_fires() -> None:
    cal = _cal(closed=[{"from": "2025-01-01", "to": "2027-12-31", "label": "closed for good"}])
    for policy in ("before", "after"):
        with pytest.raises(NeverFires, match=f"no business day within {MAX_SEARCH_DAYS} days"):
            list(roll([_at("2026-06-01")], cal, check_policy(policy)))


# ---------------------------------------------------------------- roll: properties


@st.composite
def calendars(draw: st.DrawFn) -> BusinessCalendar:
    weekend = draw(st.sets(st.integers(0, 6), max_size=5))
    closed = draw(st.lists(st.tuples(st.integers(0, 700), st.integers(0, 20)), max_size=6))
    base = date(2026, 1, 1)
    return BusinessCalendar(
        "prop", draw(st.sampled_from([None, "DE", "US"])), None,
        tuple(sorted(ClosedDays(base + timedelta(days=a), base + timedelta(days=a + n))
                     for a, n in closed)),
        frozenset(weekend))


@st.composite
def streams(draw: st.DrawFn) -> list[datetime]:
    # Whole days and hours as well as any gap: rules mostly fire at one time of day.
    gap = st.one_of(st.integers(1, 86400 * 9), st.sampled_from([3600, 86400, 86400, 2 * 86400]))
    gaps = draw(st.lists(gap, min_size=1, max_size=40))
    when = datetime(2026, 2, 1, tzinfo=timezone.utc) + timedelta(seconds=draw(
        st.integers(0, 86400 * 300)))
    out = []
    for gap in gaps:
        when += timedelta(seconds=gap)
        out.append(when.astimezone(BERLIN))
    return out


def _nearest(cal: BusinessCalendar, day: date, step: int) -> date:
    for n in range(1, MAX_SEARCH_DAYS + 1):
        if is_business_day(cal, day + timedelta(days=step * n)):
            return day + timedelta(days=step * n)
    raise AssertionError("no business day in reach")


@SETTINGS
@given(calendars(), streams(), st.sampled_from(["skip", "before", "after"]))
def test_roll_laws(cal: BusinessCalendar, found: list[datetime], policy: str) -> None:
    try:
        out = list(roll(found, cal, check_policy(policy)))
    except NeverFires:
        return
    assert [r.original for r in out] == found  # one answer per original, in order
    runs = [r for r in out if r.when is not None]
    for r in out:
        assert (r.action == "kept") == (r.when == r.original and is_business_day(cal, r.when.date()))
        if r.action == "skipped":
            assert r.when is None and r.reason
        if r.action == "moved":
            assert r.when is not None and policy != "skip"
            assert not is_business_day(cal, r.original.date())
            step = -1 if policy == "before" else 1
            assert r.when.date() == _nearest(cal, r.original.date(), step)
            assert (r.when < r.original) if policy == "before" else (r.when > r.original)
            wall = datetime.combine(r.when.date(), r.original.replace(tzinfo=None).time())
            if not in_gap(wall, BERLIN):
                assert r.when.replace(tzinfo=None) == wall  # the same wall time, whatever the offset
    for r in runs:
        assert r.when is not None and is_business_day(cal, r.when.date())
    instants = [r.when.astimezone(timezone.utc) for r in runs if r.when is not None]
    assert instants == sorted(set(instants))
    moved_days = [r.when.date() for r in runs if r.action == "moved" and r.when is not None]
    all_days = [r.when.date() for r in runs if r.when is not None]
    for day in moved_days:
        assert all_days.count(day) == 1  # a move never makes two runs on one day
    if policy == "skip":
        assert [r.when for r in runs] == [w for w in found if is_business_day(cal, w.date())]


@SETTINGS
@given(calendars(), streams())
def test_a_skipped_move_is_one_whose_day_already_runs(cal: BusinessCalendar,
                                                      found: list[datetime]) -> None:
    for policy in ("before", "after"):
        try:
            out: list[Rolled] = list(roll(found, cal, check_policy(policy)))
        except NeverFires:
            return
        for i, r in enumerate(out):
            if r.action == "skipped":
                assert any(p.when is not None and p.when.date() in (
                    r.original.date(), _nearest(cal, r.original.date(),
                                                -1 if policy == "before" else 1))
                    for p in out[:i]), r


# ---------------------------------------------------------------- never fires with a calendar


def _rec(text: str, tz: str = "Europe/Berlin"):  # type: ignore[no-untyped-def]
    rec = parse(text, tz, start=None, now=NOW)
    ensure_fires(rec, NOW)
    return rec


def test_christmas_every_year_never_fires_on_a_german_calendar_when_skipped() -> None:
    rec = _rec("FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=25;BYHOUR=10;BYMINUTE=0;BYSECOND=0")
    cal = _cal(country="DE")
    with pytest.raises(NeverFires) as err:
        ensure_fires_with_calendar(rec, cal, "skip", NOW)
    assert "from 2026-11-20 to 2036-11-" in err.value.message
    assert "Christmas Day" in err.value.message
    ensure_fires_with_calendar(rec, cal, "before", NOW)


def test_every_saturday_never_fires_on_a_saturday_weekend_but_does_on_another() -> None:
    rec = _rec("FREQ=WEEKLY;BYDAY=SA;BYHOUR=9;BYMINUTE=0;BYSECOND=0")
    with pytest.raises(NeverFires, match="weekend"):
        ensure_fires_with_calendar(rec, _cal(), "skip", NOW)
    ensure_fires_with_calendar(rec, _cal(weekend=["friday", "sunday"]), "skip", NOW)
    ensure_fires_with_calendar(rec, _cal(), "after", NOW)


def test_a_long_shutdown_defers_a_minutely_rule_but_is_not_never_fires() -> None:
    rec = _rec("FREQ=MINUTELY")
    cal = _cal(closed=[{"from": "2026-11-20", "to": "2027-10-31", "label": "shutdown"}])
    ensure_fires_with_calendar(rec, cal, "skip", NOW)
    cal = _cal(closed=[{"from": "2026-11-20", "to": "2040-01-01", "label": "shutdown"}])
    with pytest.raises(NeverFires, match="shutdown"):
        ensure_fires_with_calendar(rec, cal, "skip", NOW)


@st.composite
def weekly_or_denser(draw: st.DrawFn) -> str:
    days = draw(st.lists(st.sampled_from(["MO", "TU", "WE", "TH", "FR", "SA", "SU"]),
                         min_size=1, max_size=3, unique=True))
    hours = draw(st.lists(st.integers(0, 23), min_size=1, max_size=2, unique=True))
    return (f"FREQ=WEEKLY;BYDAY={','.join(days)};BYHOUR={','.join(map(str, sorted(hours)))};"
            "BYMINUTE=30;BYSECOND=0")


@st.composite
def calendars_closing_near_now(draw: st.DrawFn) -> BusinessCalendar:
    """Large weekends and closures from just before `NOW`: the cases where one day survives."""
    weekend = draw(st.sets(st.integers(0, 6), min_size=3, max_size=6))
    closed = draw(st.lists(st.tuples(st.integers(-10, 120), st.integers(0, 40)), max_size=5))
    base = NOW.date()
    return BusinessCalendar(
        "near", draw(st.sampled_from([None, "DE"])), None,
        tuple(sorted(ClosedDays(base + timedelta(days=a), base + timedelta(days=a + n))
                     for a, n in closed)),
        frozenset(weekend))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calendars_closing_near_now(), weekly_or_denser(),
       st.sampled_from(["skip", "before", "after"]))
def test_never_fires_with_a_calendar_agrees_with_rolling_every_occurrence(
        cal: BusinessCalendar, text: str, policy: str) -> None:
    """The check's jumps past closed days change nothing: it refuses exactly when rolling
    every occurrence of the next 400 (a year or more; the generated closures end sooner) keeps none."""
    rec = _rec(text)
    try:
        every = list(roll(occurrences(rec, after=NOW, count=400), cal, check_policy(policy)))
    except NeverFires:
        every = []
    survives = any(r.when is not None and r.when >= NOW for r in every)
    try:
        ensure_fires_with_calendar(rec, cal, check_policy(policy), NOW)
        assert survives, (text, policy)
    except NeverFires:
        assert not survives, (text, policy)


def test_the_jump_past_closed_days_lands_on_the_first_business_day() -> None:
    # Sunday is closed, Monday is the only day left: the check must not jump past it.
    rec = _rec("FREQ=WEEKLY;BYDAY=SU,MO;BYHOUR=9;BYMINUTE=0;BYSECOND=0")
    ensure_fires_with_calendar(rec, _cal(), "skip", NOW)
    rec = _rec("FREQ=WEEKLY;BYDAY=SA,SU;BYHOUR=9;BYMINUTE=0;BYSECOND=0")
    with pytest.raises(NeverFires, match="100 checked"):
        ensure_fires_with_calendar(rec, _cal(), "skip", NOW)


def test_a_before_move_into_the_past_does_not_count_as_firing() -> None:
    now = datetime(2026, 11, 21, 8, tzinfo=BERLIN)  # a Saturday
    rec = parse("FREQ=DAILY;COUNT=2;BYHOUR=9;BYMINUTE=0;BYSECOND=0", "Europe/Berlin",
                start=datetime(2026, 11, 21, 9), now=now)
    with pytest.raises(NeverFires, match="before now"):
        ensure_fires_with_calendar(rec, _cal(), "before", now)


def test_a_rule_living_past_the_librarys_years_says_the_holidays_are_unknown() -> None:
    now = datetime(2101, 1, 3, tzinfo=timezone.utc)
    rec = parse("FREQ=DAILY;BYHOUR=9;BYMINUTE=0;BYSECOND=0", "Europe/Berlin", start=None, now=now)
    with pytest.raises(NeverFires, match="holidays unknown for 2101"):
        ensure_fires_with_calendar(rec, _cal(country="DE"), "skip", now)


RULES = [
    "FREQ=DAILY;BYHOUR=8;BYMINUTE=0;BYSECOND=0",
    "FREQ=MONTHLY;BYMONTHDAY=25;BYHOUR=10;BYMINUTE=0;BYSECOND=0",
    "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=17;BYMINUTE=0;BYSECOND=0",
    "FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=25",
    "FREQ=MINUTELY",
    "FREQ=SECONDLY",
]


def check_within_the_preview_budget(text: str, closed_to: str, policy: str) -> None:
    """The verdict for `text` under a Bavarian calendar closed from now to `closed_to`,
    reached inside the preview's work budget (never 'too costly to evaluate')."""
    rec = _rec(text)
    cal = _cal(country="DE", subdivision="BY",
               closed=[{"from": "2026-11-20", "to": closed_to, "label": "shutdown"}])
    refused = closed_to == "2045-01-01" or (text.startswith("FREQ=YEARLY") and policy == "skip")
    with budget_scope(PREVIEW_STEPS):
        try:
            ensure_fires_with_calendar(rec, cal, check_policy(policy), NOW)
            assert not refused, (text, policy)
        except NeverFires as err:
            assert refused, (text, policy, err.message)
            assert any(why in err.message for why in ("shutdown", "Christmas Day",
                                                      "no business day within 366 days"))


@pytest.mark.parametrize("policy", ["skip", "before", "after"])
@pytest.mark.parametrize("closed_to", ["2027-01-08", "2045-01-01"], ids=["short", "endless"])
@pytest.mark.parametrize("text", RULES)
def test_never_fires_with_a_calendar_is_decided_within_the_preview_budget(
        text: str, closed_to: str, policy: str) -> None:
    check_within_the_preview_budget(text, closed_to, policy)
