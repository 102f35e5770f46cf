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
  other rule are listed one by one, at most `cap` a day (`SHIFT_LIST` after a change);
  past that the count is a lower bound (`exact` False).

So one day costs at most `keep + max(cap, SHIFT_LIST)` occurrences and a few engine
starts, however dense the rule. Everything takes its bounds as instants; nothing reads the clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from itertools import chain, islice
from typing import Iterator
from zoneinfo import ZoneInfo

from .engine import SEARCH_STEPS, Budget, current_budget
from .model import UNIT_SECONDS, Recurrence
from .occurrences import instant_stream
from .zones import get_zone


# The stretch after an offset change is listed up to this many (every 30 s across a one-hour shift).
SHIFT_LIST = 250


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
    of that day is counted (`_rest`), which hands back a stream that goes on from the next
    day (or the stream starts again there), so a dense rule never lists more than a day's
    bound. Raises SearchTooLong when the enclosing budget runs out.
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
        piece = days[day]
        if len(piece.first) < keep:
            piece.first.append(when)
            piece.count += 1
            continue
        more, piece.exact, going_on = _rest(rec, when, edges[day + 1], cap, budget)
        piece.count += more
        day += 1
        if day < len(days):
            stream = going_on if going_on is not None else instant_stream(rec, edges[day], budget)
    return days


def between(rec: Recurrence, start: datetime, end: datetime, limit: int) -> list[datetime]:
    """The first `limit` occurrences in [start, end)."""
    return list(islice(_until(instant_stream(rec, start, current_budget(SEARCH_STEPS)), end), limit))


# (how many, the stream of the occurrences from the end of the span on, when at hand)
Counted = tuple[int, Iterator[datetime] | None]


def _rest(rec: Recurrence, when: datetime, end: datetime, cap: int,
          budget: Budget) -> tuple[int, bool, Iterator[datetime] | None]:
    """The occurrences in [when, end), `when` being one: (count, exact, stream from `end` on)."""
    step = fixed_step(rec)
    if step is not None:
        found = _count_fixed(rec, step, when, end, cap, budget)
        if found is not None:
            return found[0], True, found[1]
    listed = _listed(rec, when, end, cap + 1, budget)
    return min(listed, cap), listed <= cap, None


def _listed(rec: Recurrence, start: datetime, end: datetime, limit: int, budget: Budget) -> int:
    """How many occurrences in [start, end), counting no further than `limit`."""
    return sum(1 for _ in islice(_until(instant_stream(rec, start, budget), end), limit))


def _until(stream: Iterator[datetime], end: datetime) -> Iterator[datetime]:
    for when in stream:
        if when >= end:
            return
        yield when


def _count_fixed(rec: Recurrence, step: timedelta, start: datetime, end: datetime, cap: int,
                 budget: Budget) -> Counted | None:
    """Occurrences of a fixed-step rule in [start, end), `start` being one, by arithmetic; None
    where that cannot be trusted (the caller then lists them)."""
    change = _offset_change(get_zone(rec.timezone), start, end)
    if change is None:
        return _count_even(rec, step, start, end, budget, first=start)
    at, jump = change
    settled = min(at + abs(jump), end)  # the repeated hour, or where a gap's moved times land
    # After a gap its moved times may fall between the regular ones: up to two a step.
    most = 2 * (abs(jump) // step) + 2
    if most > max(cap, SHIFT_LIST):
        return None
    before = _count_even(rec, step, start, at, budget, first=start)
    during = _listed(rec, at, settled, most + 1, budget)
    after = _count_even(rec, step, settled, end, budget) if settled < end else (0, None)
    if before is None or after is None or during > most:
        return None
    return before[0] + during + after[0], after[1]


def _count_even(rec: Recurrence, step: timedelta, start: datetime, end: datetime, budget: Budget,
                first: datetime | None = None) -> Counted | None:
    """Where the zone's offset is constant the times are `first + k * step`; the last one counted
    must be an occurrence and the next one must not be before `end` (None if either fails)."""
    if first is None:
        stream = instant_stream(rec, start, budget)
        first = next(stream, None)
        if first is None or first >= end:
            return 0, (chain([first], stream) if first is not None else iter(()))
    if first >= end:
        return 0, None
    n = -(-(end - first) // step)  # ceil: first + (n - 1) * step < end
    last = first.astimezone(timezone.utc) + (n - 1) * step  # in UTC: a zone's own arithmetic is wall time
    check = instant_stream(rec, last, budget)
    found, following = next(check, None), next(check, None)
    # Compared in UTC: a time in a repeated hour never equals one of another zone (PEP 495).
    if found is None or found.astimezone(timezone.utc) != last or (following is not None and following < end):
        return None
    return n, (chain([following], check) if following is not None else iter(()))


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
