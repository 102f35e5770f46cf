"""Expansion of one RRULE into naive wall-clock datetimes, always bounded.

Why not python-dateutil's rrule: it walks the rule period by period and only
returns when a period yields something, so FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30
loops for seconds, and a MINUTELY rule that rarely matches walks every day.
Here the day-level BY parts (month, month day, year day, week number,
weekday) are turned into a per-year table of matching days, cached by the
year's shape (leap or not, weekday of 1 January: 14 shapes), so skipping a
year with no match costs a dictionary look-up. The periods of FREQ/INTERVAL
and the times of day are then checked only on matching days.

Semantics follow RFC 5545 and python-dateutil (the default BY values taken
from DTSTART, BYSETPOS over the period's sorted set, DTSTART itself counted
only if it matches). BYWEEKNO periods are ISO-style week-years that start on
WKST.

Every loop ticks a `Budget` of work steps (never a clock); the search also stops once it has looked one
full period of the rule (the Gregorian 400-year cycle combined with the
INTERVAL) past the last occurrence, because after that the pattern repeats.
"""

from __future__ import annotations

import bisect
import math
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache
from typing import Iterator

from .model import UNIT_SECONDS, Rule, freq_rank

MAX_ORDINAL = date.max.toordinal()
CYCLE_DAYS = 146097  # 400 Gregorian years; also 20871 whole weeks
_PERIODS_PER_CYCLE = {"YEARLY": 400, "MONTHLY": 4800, "WEEKLY": 20871, "DAILY": CYCLE_DAYS}


class SearchTooLong(Exception):
    """The work budget ran out before the search could decide."""


# One step is one bounded piece of work (a candidate year, day or period
# looked at). Counting work instead of reading a clock makes the answer a
# function of the rule alone: a busy machine is slower, never differently
# right. A step costs about 1-6 us, so a preview's 4,000 stay well within 50 ms
# (SPEC: 100 ms); a worker's search for the next fire may do more.
PREVIEW_STEPS = 4_000
SEARCH_STEPS = 100_000


class Budget:
    """A cap on the work of one evaluation, counted in steps.

    A budget made by `sub` also spends its parent's steps, so one budget may
    be shared by the several searches of one request (see `budget_scope`).
    """

    def __init__(self, steps: int = SEARCH_STEPS, parent: "Budget | None" = None) -> None:
        self.limit = steps
        self.steps = 0
        self.parent = parent

    def sub(self, steps: int) -> "Budget":
        """A budget of at most `steps` that also draws on this one."""
        return Budget(steps, self)

    def tick(self) -> None:
        self.steps += 1
        if self.steps > self.limit:
            raise SearchTooLong
        if self.parent is not None:
            self.parent.tick()


_SCOPE: ContextVar[Budget | None] = ContextVar("recurrence_budget", default=None)


@contextmanager
def budget_scope(steps: int) -> Iterator[Budget]:
    """Share one work budget between every search made inside the block."""
    outer = _SCOPE.get()
    budget = outer.sub(steps) if outer is not None else Budget(steps)
    token = _SCOPE.set(budget)
    try:
        yield budget
    finally:
        _SCOPE.reset(token)


def current_budget(steps: int) -> Budget:
    """The enclosing scope's budget, or a fresh one of `steps`."""
    outer = _SCOPE.get()
    return outer if outer is not None else Budget(steps)


def limited_budget(steps: int) -> Budget:
    """At most `steps`, and never past the enclosing scope's budget."""
    outer = _SCOPE.get()
    return outer.sub(steps) if outer is not None else Budget(steps)


@dataclass(frozen=True)
class DayFilter:
    """The day-level BY parts after defaults; hashable for the year cache."""

    months: frozenset[int]
    monthdays: frozenset[int]
    yeardays: frozenset[int]
    weeknos: frozenset[int]
    plain: frozenset[int]
    nth: frozenset[tuple[int, int]]
    nth_in_year: bool
    wkst: int


@dataclass(frozen=True)
class Plan:
    freq: str
    interval: int
    days: DayFilter
    hours: tuple[int, ...]
    minutes: tuple[int, ...]
    seconds: tuple[int, ...]
    setpos: tuple[int, ...]
    anchor: datetime

    @property
    def weekyear(self) -> bool:
        return bool(self.days.weeknos)


@lru_cache(maxsize=2048)
def compile_plan(rule: Rule, anchor: datetime) -> Plan:
    """Apply dateutil's defaults: missing BY parts come from DTSTART."""
    bymonth, bymonthday, byday = set(rule.bymonth), set(rule.bymonthday), set(rule.byday)
    if not (rule.byweekno or rule.byyearday or rule.bymonthday or rule.byday):
        if rule.freq == "YEARLY":
            bymonth = bymonth or {anchor.month}
            bymonthday = {anchor.day}
        elif rule.freq == "MONTHLY":
            bymonthday = {anchor.day}
        elif rule.freq == "WEEKLY":
            byday = {(0, anchor.weekday())}
    rank = freq_rank(rule.freq)
    days = DayFilter(
        frozenset(bymonth), frozenset(bymonthday), frozenset(rule.byyearday),
        frozenset(rule.byweekno), frozenset(wd for n, wd in byday if n == 0),
        frozenset((n, wd) for n, wd in byday if n != 0),
        rule.freq == "YEARLY" and not rule.bymonth, rule.wkst,
    )
    return Plan(
        rule.freq, rule.interval, days,
        _time_values(rule.byhour, anchor.hour, rank < 4, 24),
        _time_values(rule.byminute, anchor.minute, rank < 5, 60),
        _time_values(rule.bysecond, anchor.second, rank < 6, 60),
        rule.bysetpos, anchor,
    )


def _time_values(given: tuple[int, ...], default: int, coarser: bool, size: int) -> tuple[int, ...]:
    if given:
        return given
    return (default,) if coarser else tuple(range(size))


# ---------------------------------------------------------------- calendar


def jan1(year: int) -> int:
    """Ordinal of 1 January `year`, valid past 9999 (no date object)."""
    y = year - 1
    return y * 365 + y // 4 - y // 100 + y // 400 + 1


def is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def week1_start(year: int, wkst: int) -> int:
    """First day of week 1: the first week (from WKST) with 4+ days in `year`."""
    first = jan1(year)
    delta = ((first - 1) % 7 - wkst) % 7
    return first - delta + (7 if delta > 3 else 0)


def _year_range(year: int, f: DayFilter) -> tuple[int, int]:
    if f.weeknos:
        return week1_start(year, f.wkst), week1_start(year + 1, f.wkst)
    return jan1(year), jan1(year + 1)


def _day_ok(f: DayFilter, o: int, period_year: int) -> bool:
    d = date.fromordinal(o)
    if f.months and d.month not in f.months:
        return False
    if f.weeknos:
        start, end = _year_range(period_year, f)
        number, weeks = (o - start) // 7 + 1, (end - start) // 7
        if number not in f.weeknos and number - weeks - 1 not in f.weeknos:
            return False
    if f.yeardays:
        day, length = o - jan1(d.year) + 1, 365 + is_leap(d.year)
        if day not in f.yeardays and day - length - 1 not in f.yeardays:
            return False
    mlen = _month_len(d.year, d.month)
    if f.monthdays and d.day not in f.monthdays and d.day - mlen - 1 not in f.monthdays:
        return False
    if f.plain or f.nth:
        return _weekday_ok(f, d, o, mlen)
    return True


def _weekday_ok(f: DayFilter, d: date, o: int, mlen: int) -> bool:
    wd = d.weekday()
    if wd in f.plain:
        return True
    if f.nth_in_year:
        index, length = o - jan1(d.year), 365 + is_leap(d.year)
    else:
        index, length = d.day - 1, mlen
    return (index // 7 + 1, wd) in f.nth or (-((length - 1 - index) // 7 + 1), wd) in f.nth


def _month_len(year: int, month: int) -> int:
    if month == 2:
        return 28 + is_leap(year)
    return 30 if month in (4, 6, 9, 11) else 31


_SHAPES: dict[tuple[DayFilter, tuple[object, ...]], tuple[int, ...]] = {}


def _shape_days(f: DayFilter, year: int) -> tuple[int, ...]:
    """Matching days of `year` as offsets from its first day."""
    start, end = _year_range(year, f)
    lo, hi = max(start, 1), min(end, MAX_ORDINAL + 1)
    return tuple(o - start for o in range(lo, hi) if _day_ok(f, o, year))


def year_days(f: DayFilter, year: int) -> tuple[int, tuple[int, ...]]:
    """(first ordinal of the period-year, offsets of its matching days).

    Years of the same shape match on the same offsets, so the table is
    computed once per (filter, shape): at most 56 shapes, usually 14.
    """
    start = _year_range(year, f)[0]
    if year <= 1 or year >= 9998:  # clipped years have their own shape
        shape: tuple[object, ...] = ("edge", year)
    elif f.weeknos:  # a week-year spills into the years on either side
        shape = (is_leap(year - 1), is_leap(year), is_leap(year + 1), (jan1(year) - 1) % 7)
    else:
        shape = (is_leap(year), (jan1(year) - 1) % 7)
    offsets = _SHAPES.get((f, shape))
    if offsets is None:
        if len(_SHAPES) > 50000:  # a crude bound on memory; refills quickly
            _SHAPES.clear()
        offsets = _SHAPES[(f, shape)] = _shape_days(f, year)
    return start, offsets


@lru_cache(maxsize=1024)
def _busy_residues(f: DayFilter) -> tuple[int, ...]:
    """Years (mod 400) that have at least one matching day."""
    return tuple(r for r in range(400) if year_days(f, 2000 + r)[1])


class Candidates:
    """The matching days in order, skipping empty years cheaply."""

    def __init__(self, f: DayFilter, budget: Budget) -> None:
        self.f, self.budget = f, budget
        self._year, self._start, self._offs = -1, 0, ()

    def year_of(self, o: int) -> int:
        year = date.fromordinal(min(max(o, 1), MAX_ORDINAL)).year
        if self.f.weeknos:
            if o < week1_start(year, self.f.wkst):
                return year - 1
            if o >= week1_start(year + 1, self.f.wkst):
                return year + 1
        return year

    def next(self, o: int, limit: int) -> int | None:
        """The first matching day in [o, limit], or None."""
        year = self.year_of(o)
        while o <= limit and year <= 9999:
            self.budget.tick()
            if year != self._year:
                self._year = year
                self._start, self._offs = year_days(self.f, year)
            i = bisect.bisect_left(self._offs, o - self._start)
            if i < len(self._offs):
                found = self._start + self._offs[i]
                return found if found <= limit else None
            year = self._next_busy_year(year + 1)
            o = max(o, _year_range(year, self.f)[0])
        return None

    def _next_busy_year(self, year: int) -> int:
        """The first year >= `year` with a matching day (the calendar repeats
        every 400 years, so a table of busy years mod 400 answers it)."""
        if year >= 9998:
            return year
        busy = _busy_residues(self.f)
        if not busy:
            return 10000
        r = year % 400
        i = bisect.bisect_left(busy, r)
        return year + (busy[i] - r if i < len(busy) else 400 - r + busy[0])

    def between(self, lo: int, hi: int) -> list[int]:
        out: list[int] = []
        o = self.next(lo, hi)
        while o is not None:
            out.append(o)
            o = self.next(o + 1, hi)
        return out


def cycle_days(plan: Plan) -> int:
    """Days after which the rule's pattern repeats (calendar x INTERVAL)."""
    if plan.freq in _PERIODS_PER_CYCLE:
        per = _PERIODS_PER_CYCLE[plan.freq]
        return math.lcm(per, plan.interval) // per * CYCLE_DAYS
    step = plan.interval * UNIT_SECONDS[plan.freq]
    return math.lcm(CYCLE_DAYS * 86400, step) // 86400
