"""Occurrences per day of a window: the first few of each day and how many the day holds.

A calendar asks, for each day, "which are the first times, and how many in all?". Listing
an every-minute rule's day costs 1,440 occurrences of the engine; this module lists only
the first `keep` of a day and counts the rest:

* a *fixed-step* rule (one RRULE of FREQ=HOURLY, MINUTELY or SECONDLY with no BY part,
  no COUNT, UNTIL, RDATE or EXDATE) fires at evenly spaced instants wherever its zone
  keeps one UTC offset, so the rest of such a stretch is counted by arithmetic, and the
  last counted time is checked against the engine;
* the stretch just after an offset change (the hour a fall-back repeats, or a
  spring-forward gap whose moved times may fall between the regular ones) and every
  other rule are listed one by one, at most `cap` a day; past that the count is a
  lower bound (`exact` False).

So one day costs at most `keep + cap` occurrences and a few engine starts, however dense
the rule. Everything takes its bounds as instants; nothing reads the clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from itertools import islice
from typing import Iterator
from zoneinfo import ZoneInfo

from .engine import SEARCH_STEPS, Budget, current_budget
from .model import UNIT_SECONDS, Recurrence
from .occurrences import instant_stream
from .zones import get_zone


@dataclass
class DaySlice:
    """One day of one rule: its first occurrences and how many it holds (`exact` False: at least)."""

    first: list[datetime] = field(default_factory=list)
    count: int = 0
    exact: bool = True


def fixed_step(rec: Recurrence) -> timedelta | None:
    """The spacing of a rule that fires every N hours, minutes or seconds and nothing else."""
    if len(rec.rules) != 1 or rec.rdates or rec.exdates:
        return None
    r = rec.rules[0]
    if r.freq not in UNIT_SECONDS or r.count is not None or r.until is not None:
        return None
    if any((r.bymonth, r.byweekno, r.byyearday, r.bymonthday, r.byday, r.byhour, r.byminute,
            r.bysecond, r.bysetpos)):
        return None
    return timedelta(seconds=UNIT_SECONDS[r.freq] * r.interval)


def by_day(rec: Recurrence, edges: list[datetime], keep: int, cap: int) -> list[DaySlice]:
    """For each day [edges[i], edges[i+1]), its first `keep` occurrences and its count.

    One stream walks the window; when a day has shown `keep` times and holds more, the rest
    of that day is counted (`_rest`) and the stream starts again at the next day's first
    instant, so a dense rule never lists more than `keep + cap` times a day. Raises
    SearchTooLong when the enclosing budget runs out.
    """
    budget = current_budget(SEARCH_STEPS)
    days = [DaySlice() for _ in edges[:-1]]
    stream, day = instant_stream(rec, edges[0], budget), 0
    while day < len(days):
        when = next(stream, None)
        if when is None:
            break
        while day < len(days) and when >= edges[day + 1]:
            day += 1
        if day == len(days):
            break
        if len(days[day].first) < keep:
            days[day].first.append(when)
            days[day].count += 1
            continue
        days[day].count, days[day].exact = _rest(rec, when, edges[day + 1], days[day].count, cap, budget)
        day += 1
        if day < len(days):
            stream = instant_stream(rec, edges[day], budget)
    return days


def _rest(rec: Recurrence, when: datetime, end: datetime, counted: int, cap: int,
          budget: Budget) -> tuple[int, bool]:
    """`counted` plus the occurrences in [when, end), `when` being one: (count, exact)."""
    step = fixed_step(rec)
    if step is not None:
        found = _count_fixed(rec, step, when, end, cap, budget)
        if found is not None:
            return counted + found, True
    listed = _listed(rec, when, end, cap + 1, budget)
    return counted + min(listed, cap), listed <= cap


def _listed(rec: Recurrence, start: datetime, end: datetime, limit: int, budget: Budget) -> int:
    """How many occurrences in [start, end), counting no further than `limit`."""
    return sum(1 for _ in islice(_until(instant_stream(rec, start, budget), end), limit))


def _until(stream: Iterator[datetime], end: datetime) -> Iterator[datetime]:
    for when in stream:
        if when >= end:
            return
        yield when


def _count_fixed(rec: Recurrence, step: timedelta, start: datetime, end: datetime, cap: int,
                 budget: Budget) -> int | None:
    """Occurrences of a fixed-step rule in [start, end) by arithmetic, or None where that
    cannot be trusted (the caller then lists them)."""
    zone = get_zone(rec.timezone)
    change = _offset_change(zone, start, end)
    if change is None:
        return _count_even(rec, step, start, end, budget)
    at, jump = change
    settled = min(at + abs(jump), end)  # the repeated hour, or where a gap's moved times land
    before = _count_even(rec, step, start, min(at, end), budget) if start < at else 0
    # After a gap its moved times may fall between the regular ones: up to two a step.
    most = 2 * (abs(jump) // step) + 2
    if most > cap:
        return None
    during = _listed(rec, max(start, at), settled, most + 1, budget) if start < settled else 0
    after = _count_even(rec, step, settled, end, budget) if settled < end else 0
    if before is None or after is None or during > most:
        return None
    return before + during + after


def _count_even(rec: Recurrence, step: timedelta, start: datetime, end: datetime,
                budget: Budget) -> int | None:
    """Where the zone's offset is constant the times are `first + k * step`; the last one
    counted must be an occurrence and the next one must not be before `end`."""
    first = next(instant_stream(rec, start, budget), None)
    if first is None or first >= end:
        return 0
    n = -(-(end - first) // step)  # ceil: first + (n - 1) * step < end
    last = first + (n - 1) * step
    check = list(islice(instant_stream(rec, last, budget), 2))
    if not check or check[0] != last or (len(check) == 2 and check[1] < end):
        return None
    return n


def _offset_change(zone: ZoneInfo, start: datetime, end: datetime) -> tuple[datetime, timedelta] | None:
    """The instant in (start, end] where `zone` changes its UTC offset and by how much, found by
    halving to the second (tzdata's changes fall on whole seconds); None if the offset at both
    ends is the same (a day holds at most one change in every zone of tzdata)."""
    a, b = start.astimezone(zone).utcoffset(), end.astimezone(zone).utcoffset()
    if a == b or a is None or b is None:
        return None
    lo, hi = math.floor(start.timestamp()), math.ceil(end.timestamp())
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, zone).utcoffset() == a:
            lo = mid
        else:
            hi = mid
    return datetime.fromtimestamp(hi, timezone.utc), b - a
