"""Walk one compiled rule forward from a wall-clock time, period by period.

Two walkers: one for FREQ of a day or longer (a period is a set of days
times a set of times of day) and one for HOURLY/MINUTELY/SECONDLY (a period
is one hour, minute or second on a matching day). Both only ever visit
matching days (`Candidates`), and both stop when `gap_limit` days pass
without an occurrence: a rule that is silent for a whole cycle is silent
for ever.
"""

from __future__ import annotations

import bisect
from collections import deque
from datetime import date, datetime, timedelta
from typing import Iterator, Sequence
from zoneinfo import ZoneInfo

from .engine import MAX_ORDINAL, Budget, Candidates, Plan, cycle_days, jan1, week1_start
from .model import UNIT_SECONDS, Rule
from .zones import in_gap, wall_utc

Clock = tuple[int, int, int]


class TimeSet:
    """hours x minutes x seconds in sorted order, indexable without building it."""

    def __init__(self, hours: Sequence[int], minutes: Sequence[int], seconds: Sequence[int]):
        self.h, self.m, self.s = hours, minutes, seconds

    def __len__(self) -> int:
        return len(self.h) * len(self.m) * len(self.s)

    def __getitem__(self, i: int) -> Clock:
        rest, s = divmod(i, len(self.s))
        h, m = divmod(rest, len(self.m))
        return self.h[h], self.m[m], self.s[s]

    def __iter__(self) -> Iterator[Clock]:
        return ((h, m, s) for h in self.h for m in self.m for s in self.s)

    def first_at_or_after(self, clock: Clock) -> int:
        """The index of the first time >= `clock` (len(self) if none), without building the set."""
        h, m, s = clock
        lm, ls = len(self.m), len(self.s)
        i = bisect.bisect_left(self.h, h)
        if i == len(self.h) or self.h[i] > h:
            return i * lm * ls
        j = bisect.bisect_left(self.m, m)
        if j == lm or self.m[j] > m:
            return (i * lm + j) * ls
        return (i * lm + j) * ls + bisect.bisect_left(self.s, s)  # past the last second: the next minute


def _at(o: int, clock: Clock) -> datetime:
    d = date.fromordinal(o)
    return datetime(d.year, d.month, d.day, *clock)


def _pick(days: Sequence[int], times: TimeSet, setpos: Sequence[int]) -> list[datetime]:
    """BYSETPOS: positions in the period's set (days x times), as dateutil does."""
    size = len(days) * len(times)
    chosen = {p - 1 if p > 0 else size + p for p in setpos}
    picked = [i for i in chosen if 0 <= i < size]
    return sorted({_at(days[i // len(times)], times[i % len(times)]) for i in picked})


# ---------------------------------------------------------------- periods


def _period(plan: Plan, cands: Candidates, o: int) -> int:
    freq = plan.freq
    if freq == "YEARLY":
        return cands.year_of(o)
    if freq == "MONTHLY":
        d = date.fromordinal(o)
        return d.year * 12 + d.month - 1
    if freq == "WEEKLY":
        return (o - 1 - plan.days.wkst) // 7
    return o


def _bounds(plan: Plan, p: int) -> tuple[int, int]:
    """First and last day (ordinals) of period `p`."""
    freq = plan.freq
    if freq == "YEARLY":
        if plan.weekyear:
            wk = plan.days.wkst
            return week1_start(p, wk), week1_start(p + 1, wk) - 1
        return jan1(p), jan1(p + 1) - 1
    if freq == "MONTHLY":
        y, m = divmod(p, 12)
        nxt = jan1(y + 1) if m == 11 else _month_first(y, m + 2)
        return _month_first(y, m + 1), nxt - 1
    if freq == "WEEKLY":
        first = 7 * p + 1 + plan.days.wkst
        return first, first + 6
    return p, p


def _month_first(year: int, month: int) -> int:
    if year > 9999:
        return MAX_ORDINAL + 1
    return date(year, month, 1).toordinal()


def walk(plan: Plan, start: datetime, budget: Budget, hard_limit: int) -> Iterator[datetime]:
    """Occurrences >= start (and >= DTSTART) in order; stops at hard_limit."""
    start = max(start, plan.anchor)
    gap = cycle_days(plan) + 7
    cands = Candidates(plan.days, budget)
    if plan.freq in UNIT_SECONDS:
        inner = _walk_subdaily(plan, start, cands, gap, hard_limit)
    else:
        inner = _walk_days(plan, start, cands, gap, hard_limit)
    for when in inner:
        if when >= start:
            yield when


def _walk_days(plan: Plan, start: datetime, cands: Candidates, gap: int, hard: int) -> Iterator[datetime]:
    p0 = _period(plan, cands, plan.anchor.toordinal())
    times = TimeSet(plan.hours, plan.minutes, plan.seconds)
    o = _bounds(plan, _period(plan, cands, start.toordinal()))[0]
    last_hit = o
    while True:
        c = cands.next(o, min(hard, last_hit + gap))
        if c is None:
            return
        p = _period(plan, cands, c)
        off = (p - p0) % plan.interval
        if off:
            o = _bounds(plan, p + plan.interval - off)[0]
            continue
        last = _bounds(plan, p)[1]
        days = cands.between(c, min(last, MAX_ORDINAL))
        if p == p0 and plan.freq == "WEEKLY":
            # dateutil's first week starts at DTSTART, not at WKST; it only
            # matters to BYSETPOS, and we follow the reference implementation.
            days = [d for d in days if d >= plan.anchor.toordinal()]
        found = _pick(days, times, plan.setpos) if plan.setpos else _in_order(days, times, start)
        for when in found:
            last_hit = when.toordinal()
            yield when
        o = _bounds(plan, p + plan.interval)[0]


def _in_order(days: Sequence[int], times: TimeSet, start: datetime) -> Iterator[datetime]:
    """days x times from `start` on, one at a time: a period of every second of a year is 31 million
    times, so it is never built, and the caller's budget counts each one it takes."""
    first = start.toordinal()
    for d in days:
        if d < first:
            continue
        begin = times.first_at_or_after((start.hour, start.minute, start.second)) if d == first else 0
        for i in range(begin, len(times)):
            yield _at(d, times[i])


def _walk_subdaily(plan: Plan, start: datetime, cands: Candidates, gap: int, hard: int) -> Iterator[datetime]:
    o = last_hit = start.toordinal()
    unit = UNIT_SECONDS[plan.freq]
    first_idx = (o * 86400 + start.hour * 3600 + start.minute * 60 + start.second) // unit
    while True:
        c = cands.next(o, min(hard, last_hit + gap))
        if c is None:
            return
        for when in _day_periods(plan, c, cands.budget, first_idx):
            last_hit = c
            yield when
        o = c + 1


def _day_periods(plan: Plan, day: int, budget: Budget, first_idx: int) -> Iterator[datetime]:
    """The HOURLY/MINUTELY/SECONDLY periods of one day that are on the grid."""
    unit = UNIT_SECONDS[plan.freq]
    a = plan.anchor
    anchor_idx = (a.toordinal() * 86400 + a.hour * 3600 + a.minute * 60 + a.second) // unit
    day_first = day * 86400 // unit
    k = _grid_at_or_after(max(day_first, anchor_idx, first_idx), anchor_idx, plan.interval)
    end = (day + 1) * 86400 // unit
    while k < end:
        budget.tick()
        sod = k * unit - day * 86400
        target = _skip_to(plan, sod)
        if target is None:
            yield from _period_set(plan, day, sod)
            k += plan.interval
            continue
        if target >= 86400:
            return
        k = _grid_at_or_after(day_first + -(-target // unit), anchor_idx, plan.interval)


def _grid_at_or_after(idx: int, anchor_idx: int, interval: int) -> int:
    steps = -(-(idx - anchor_idx) // interval)
    return anchor_idx + steps * interval


def _skip_to(plan: Plan, sod: int) -> int | None:
    """None if the period starting at `sod` passes the limiting BY parts,
    else the second of the day where the next passing period may start."""
    h, rem = divmod(sod, 3600)
    m, s = divmod(rem, 60)
    if h not in plan.hours:
        return _next_value(plan.hours, h, 3600, 0, 86400)
    if plan.freq != "HOURLY" and m not in plan.minutes:
        return _next_value(plan.minutes, m, 60, h * 3600, 3600)
    if plan.freq == "SECONDLY" and s not in plan.seconds:
        return _next_value(plan.seconds, s, 1, h * 3600 + m * 60, 60)
    return None


def _next_value(values: Sequence[int], current: int, size: int, base: int, span: int) -> int:
    i = bisect.bisect_right(values, current)
    if i < len(values):
        return base + values[i] * size
    return base + span  # the start of the next hour, minute or day


def _period_set(plan: Plan, day: int, sod: int) -> list[datetime]:
    h, rem = divmod(sod, 3600)
    m, s = divmod(rem, 60)
    if plan.freq == "HOURLY":
        times = TimeSet((h,), plan.minutes, plan.seconds)
    elif plan.freq == "MINUTELY":
        times = TimeSet((h,), (m,), plan.seconds)
    else:
        times = TimeSet((h,), (m,), (s,))
    if plan.setpos:
        return _pick([day], times, plan.setpos)
    return [_at(day, t) for t in times]  # at most 3,600: the seconds of one hour


def rule_walk(rule: Rule, plan: Plan, start: datetime, budget: Budget,
              zone: ZoneInfo | None = None) -> Iterator[datetime]:
    """Apply COUNT (counted from DTSTART) and UNTIL to `walk`, as instants.

    With `zone`, UNTIL is compared with the instant each wall time fires
    at (so an UNTIL in the second pass of a repeated hour is honoured), and
    COUNT counts fired occurrences: a wall time that a gap moves onto an
    instant already counted is the same occurrence and is not counted twice.
    """
    hard = MAX_ORDINAL
    until = None
    if rule.until is not None:
        hard = min(hard, rule.until.toordinal() + 2)  # a gap moves a time by < 2 days
        until = wall_utc(rule.until, zone)
    begin = plan.anchor if rule.count is not None else start
    left = rule.count
    counted = _Recent()
    for when in walk(plan, begin, budget, hard):
        budget.tick()  # converting and counting an occurrence is work too
        utc = wall_utc(when, zone)
        if until is not None and utc > until:
            if in_gap(when, zone):
                continue  # moved past UNTIL; later wall times may still fit
            return
        if left is not None:
            if zone is not None and counted.seen(utc):
                continue
            if left == 0:
                return
            left -= 1
        if when >= start:
            yield when


class _Recent:
    """The instants of the last two days (no gap is longer), to tell a wall
    time that a gap moved onto an instant already counted."""

    def __init__(self) -> None:
        self.order: deque[datetime] = deque()
        self.members: set[datetime] = set()

    def seen(self, utc: datetime) -> bool:
        if utc in self.members:
            return True
        self.order.append(utc)
        self.members.add(utc)
        horizon = utc - timedelta(days=2)
        while self.order[0] < horizon:
            self.members.discard(self.order.popleft())
        return False
