"""Hypothesis properties: expansion agrees with python-dateutil, occurrences
strictly increase, descriptions parse back to the same dates, and the
never-fires verdict agrees with an exhaustive search to year 9999."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from dateutil.rrule import rrulestr
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from almanac.errors import InvalidRule, NeverFires
from almanac.platform.recurrence import describe, ensure_fires, load, occurrences, parse
from almanac.platform.recurrence.engine import Budget, SearchTooLong, budget_scope, compile_plan
from almanac.platform.recurrence.expand import rule_walk
from almanac.platform.recurrence.model import WEEKDAYS
from almanac.platform.recurrence.parse_rrule import parse_rule

SETTINGS = settings(max_examples=80, deadline=None,
                    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])


def _subset(values: list[int], most: int = 3) -> st.SearchStrategy[list[int]]:
    return st.lists(st.sampled_from(values), min_size=1, max_size=most, unique=True)


@st.composite
def rules(draw: st.DrawFn, freqs: tuple[str, ...] = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY")) -> str:
    freq = draw(st.sampled_from(freqs))
    parts = [f"FREQ={freq}"]
    interval = draw(st.sampled_from([1, 1, 2, 3, 4, 7, 12]))
    if interval > 1:
        parts.append(f"INTERVAL={interval}")
    day_level = freq in ("YEARLY", "MONTHLY", "WEEKLY", "DAILY")
    if day_level and draw(st.booleans()):
        parts.append("BYMONTH=" + ",".join(map(str, draw(_subset(list(range(1, 13)))))))
    if freq != "WEEKLY" and day_level and draw(st.booleans()):
        days = draw(_subset([d for d in range(-31, 32) if d]))
        parts.append("BYMONTHDAY=" + ",".join(map(str, days)))
    if day_level and draw(st.booleans()):
        numbered = freq in ("MONTHLY", "YEARLY") and draw(st.booleans())
        items = draw(_subset(list(range(7))))
        ns = [draw(st.sampled_from([1, 2, -1, -2, 3, 5])) if numbered else 0 for _ in items]
        parts.append("BYDAY=" + ",".join(f"{n or ''}{WEEKDAYS[wd]}" for n, wd in zip(ns, items)))
    if freq == "YEARLY" and draw(st.booleans()):
        parts.append("BYYEARDAY=" + ",".join(map(str, draw(_subset([1, 60, 100, 200, 365, 366, -1, -306])))))
    if draw(st.booleans()):
        parts.append("BYHOUR=" + ",".join(map(str, draw(_subset([0, 2, 9, 13, 23], 2)))))
    if draw(st.booleans()):
        parts.append("BYMINUTE=" + ",".join(map(str, draw(_subset([0, 15, 30, 59], 2)))))
    if day_level and draw(st.integers(0, 4)) == 0:
        parts.append("BYSETPOS=" + ",".join(map(str, draw(_subset([1, 2, -1, 3], 2)))))
    if draw(st.integers(0, 3)) == 0:
        parts.append(f"COUNT={draw(st.integers(1, 20))}")
    if freq == "WEEKLY" and draw(st.booleans()):
        parts.append("WKST=" + draw(st.sampled_from(WEEKDAYS)))
    return ";".join(parts)


starts = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2030, 12, 31)).map(
    lambda d: d.replace(second=0, microsecond=0))


def _valid(rule: str) -> bool:
    try:
        parse_rule(rule, 0, "UTC")
    except InvalidRule:
        return False
    return True


def _ours(rule: str, start: datetime, count: int) -> list[datetime] | None:
    parsed = parse_rule(rule, 0, "UTC")
    walk = rule_walk(parsed, compile_plan(parsed, start), start, Budget(200_000))
    out: list[datetime] = []
    try:
        for when in walk:
            out.append(when)
            if len(out) >= count or when.year > start.year + 30:
                break
    except SearchTooLong:  # a grid that never meets its BY values
        return None
    return out


def _dateutil(rule: str, start: datetime, stop: datetime, count: int) -> list[datetime]:
    out = []
    for when in rrulestr(f"DTSTART:{start:%Y%m%dT%H%M%S}\nRRULE:{rule};UNTIL={stop:%Y%m%dT%H%M%S}"
                         if "COUNT" not in rule else f"DTSTART:{start:%Y%m%dT%H%M%S}\nRRULE:{rule}"):
        if when > stop or len(out) >= count:
            break
        out.append(when)
    return out


@SETTINGS
@given(rules(), starts)
def test_expansion_matches_dateutil(rule: str, start: datetime) -> None:
    assume(_valid(rule))
    ours = _ours(rule, start, 12)
    assume(ours)  # rules that never fire are the never-fires property's job
    stop = ours[-1]
    assert ours == _dateutil(rule, start, stop, len(ours))


@SETTINGS
@given(rules(("HOURLY", "MINUTELY")), starts)
def test_subdaily_expansion_matches_dateutil(rule: str, start: datetime) -> None:
    assume(_valid(rule))
    ours = _ours(rule, start, 30)
    assume(ours)
    assert ours == _dateutil(rule, start, ours[-1], len(ours))


@SETTINGS
@given(rules(("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY")), starts,
       st.sampled_from(["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"]))
def test_occurrences_strictly_increase(rule: str, start: datetime, zone: str) -> None:
    assume(_valid(rule))
    rec = load(f"DTSTART;TZID={zone}:{start:%Y%m%dT%H%M%S}\nRRULE:{rule}")
    with budget_scope(10_000_000):
        got = occurrences(rec, after=rec.dtstart - timedelta(days=1), count=40)
    utc = [d.astimezone(timezone.utc) for d in got]
    assert all(a < b for a, b in zip(utc, utc[1:]))
    assert all(d >= rec.dtstart for d in got)


@SETTINGS
@given(rules(("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY")), starts,
       st.sampled_from(["Europe/Berlin", "UTC", "America/Sao_Paulo"]))
def test_description_parses_back_to_the_same_dates(rule: str, start: datetime, zone: str) -> None:
    assume(_valid(rule))
    rec = load(f"DTSTART;TZID={zone}:{start:%Y%m%dT%H%M%S}\nRRULE:{rule}")
    text = describe(rec)
    with budget_scope(10_000_000):  # generous: a busy test box must not cut the search short
        again = parse(text, zone, start=start, now=rec.dtstart)
        want = occurrences(rec, after=rec.dtstart, count=15)
        got = occurrences(again, after=rec.dtstart, count=15)
    assert again.input_kind == "text"
    assert got == want, text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(rules(("YEARLY", "MONTHLY")), st.datetimes(min_value=datetime(9300, 1, 1),
                                                   max_value=datetime(9400, 12, 31)))
def test_never_fires_agrees_with_exhaustive_search(rule: str, start: datetime) -> None:
    """Starting in the 9300s, dateutil's walk to year 9999 is exhaustive and
    still longer than our one-cycle (at most 400 years here) search."""
    assume(_valid(rule) and "COUNT" not in rule)
    assume("INTERVAL=7" not in rule)  # lcm(4800, 7) months is past year 9999
    start = start.replace(second=0, microsecond=0)
    rec = load(f"DTSTART;TZID=UTC:{start:%Y%m%dT%H%M%S}\nRRULE:{rule}")
    try:
        with budget_scope(10_000_000):
            ensure_fires(rec, rec.dtstart)
        ours = True
    except NeverFires:
        ours = False
    theirs = next(iter(rrulestr(f"DTSTART:{start:%Y%m%dT%H%M%S}\nRRULE:{rule}")), None) is not None
    assert ours == theirs
