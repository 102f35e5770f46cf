"""A rule under a business calendar: the times a schedule runs, and how its calendar travels.

Both claim paths (per tenant on SQLite, across tenants on PostgreSQL) plan a schedule's next
time from its stored rule text alone. A schedule's calendar therefore travels inside that text:
one `X-ALMANAC-CALENDAR` line (RFC 5545 lets X- properties through) holding the policy and a
snapshot of the calendar's JSON. `attach` writes it, `detach` reads it back; the canonical
block without the line is what people see.

`runs` walks a rule's occurrences through `roll` and answers the ones that run after a time. It
starts `LOOKBACK_DAYS` earlier, because whether an occurrence runs depends on the runs the
calendar moved before it (one run a day); the time a run is keyed by is the time it runs, so the
answer for a time is the same whenever it is asked (docs/decisions/0181-calendar-occurrence-key.md).
The walk is bounded: after an occurrence on a closed day, on a day that already holds a moved
run, or before the asked time, it goes on from the next day (those occurrences cannot change
what the calendar does: see `roll`), and it stops after `MAX_STEPS` occurrences.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from typing import Iterator

from .calendars import BusinessCalendar
from .describe import describe
from .model import CalendarClause, Recurrence
from .occurrences import occurrences
from .window import DaySlice
from .roll import POLICIES, Policy, Rolled, _why_not, check_policy, roll
from .zones import get_zone, to_instant

LINE = "X-ALMANAC-CALENDAR"
LOOKBACK_DAYS = 31
MAX_STEPS = 1500
_CHUNK = 16
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True)
class Business:
    """The calendar a schedule runs under, and what happens on a day that is not a business day."""

    calendar: BusinessCalendar
    policy: Policy = "skip"


def attach(canonical: str, business: Business | None) -> str:
    """The stored rule text: the canonical block, plus the calendar line when there is one."""
    if business is None:
        return canonical
    snapshot = json.dumps(business.calendar.to_json(), separators=(",", ":"), ensure_ascii=True)
    return f"{canonical}\n{LINE};POLICY={business.policy.upper()}:{snapshot}"


def detach(stored: str) -> tuple[str, Business | None]:
    """The canonical block and the calendar of a stored rule text (None: no calendar line)."""
    head, sep, line = stored.partition(f"\n{LINE};")
    if not sep:
        return stored, None
    params, _, snapshot = line.partition(":")
    policy = check_policy(params.removeprefix("POLICY=").lower())
    return head, Business(BusinessCalendar.from_json(json.loads(snapshot)), policy)


def why_closed(cal: BusinessCalendar, day: date) -> str | None:
    """None for a business day, else why not; a year the holiday library does not cover says so
    ("holidays unknown for 2101") rather than raising."""
    return _why_not(cal, day)


def describe_with(rec: Recurrence, business: Business | None) -> str:
    """A rule's description with the calendar it runs under, in the words the English parser reads
    back ("... except holidays in DE-BY", "..., or the business day before if it is not a business
    day in acme-de"): the calendar the schedule runs under replaces any the rule's English named."""
    if business is None:
        return describe(rec)
    return describe(replace(rec, calendar=CalendarClause(business.calendar.name, business.policy)))


def runs(rec: Recurrence, business: Business, after: datetime) -> Iterator[Rolled]:
    """What the calendar makes of each of the rule's occurrences, in order, from the first whose
    original or moved time is after `after` (lazily; bounded by `MAX_STEPS`)."""
    zone = get_zone(rec.timezone)
    after = after.astimezone(zone)
    lookback = 0 if business.policy == "skip" else LOOKBACK_DAYS
    moved_into: set[date] = set()
    walk = _Walk(rec, business.calendar, after, moved_into, after - timedelta(days=lookback))
    for rolled in roll(walk, business.calendar, business.policy):
        if rolled.action == "moved" and rolled.when is not None:
            moved_into.add(rolled.when.date())
        if rolled.original > after or (rolled.when is not None and rolled.when > after):
            yield rolled


def next_run_after(rec: Recurrence, business: Business, after: datetime) -> datetime | None:
    """The first time the schedule runs strictly after `after`, or None (none within reach)."""
    for rolled in runs(rec, business, after):
        if rolled.when is not None and rolled.when > after:
            return rolled.when
    return None


def first_runs(rec: Recurrence, business: Business, now: datetime, count: int) -> list[Rolled]:
    """What the calendar does from `now` on until `count` runs at or after `now` are found: the
    runs, and the occurrences it skipped or moved on the way (what a preview shows)."""
    out: list[Rolled] = []
    found = 0
    for rolled in runs(rec, business, now - _TICK):
        if rolled.original < now and (rolled.when is None or rolled.when < now):
            continue
        out.append(rolled)
        found += rolled.when is not None and rolled.when >= now
        if found >= count:
            break
    return out


def runs_by_day(rec: Recurrence, business: Business, edges: list[datetime], keep: int) -> list[DaySlice]:
    """`window.by_day` for a rule under a calendar: each day's first `keep` runs and how many.
    Days the bounded walk does not reach are marked not exact."""
    days = [DaySlice() for _ in edges[:-1]]
    day, reached = 0, False
    for rolled in runs(rec, business, edges[0] - _TICK):
        when = rolled.when
        if when is None or when < edges[0]:
            continue
        while day < len(days) and when >= edges[day + 1]:
            day += 1
        if day == len(days):
            reached = True
            break
        piece = days[day]
        if len(piece.first) < keep:
            piece.first.append(when)
        piece.count += 1
    else:
        reached = True  # the rule ended, or the walk's bound: only the former is exact
    for piece in days[day + 1:] if not reached else ():
        piece.exact = False
    return days


def runs_between(rec: Recurrence, business: Business, start: datetime, end: datetime, limit: int
                 ) -> list[datetime]:
    """The first `limit` runs in [start, end)."""
    found: list[datetime] = []
    for rolled in runs(rec, business, start - _TICK):
        if rolled.when is None or rolled.when < start:
            continue
        if rolled.when >= end or len(found) >= limit:
            break
        found.append(rolled.when)
    return found


class _Walk:
    """The rule's occurrences from `start`, one a day where the rest of the day cannot matter."""

    def __init__(self, rec: Recurrence, cal: BusinessCalendar, after: datetime,
                 moved_into: set[date], start: datetime) -> None:
        self.rec, self.cal, self.after, self.moved_into = rec, cal, after, moved_into
        self.zone = get_zone(rec.timezone)
        self.cursor, self.buffer, self.steps = start, list[datetime](), 0

    def __iter__(self) -> Iterator[datetime]:
        while self.steps < MAX_STEPS:
            when = self._next()
            if when is None:
                return
            self.steps += 1
            yield when
            self.cursor = self._resume(when)

    def _next(self) -> datetime | None:
        self.buffer = [w for w in self.buffer if w >= self.cursor]
        if not self.buffer:
            self.buffer = occurrences(self.rec, after=self.cursor, count=_CHUNK)
        return self.buffer[0] if self.buffer else None

    def _resume(self, when: datetime) -> datetime:
        """Where to look next: the next day, unless the rest of `when`'s day can still run."""
        day = when.date()
        if when > self.after and day not in self.moved_into and _why_not(self.cal, day) is None:
            return when + _TICK
        midnight = to_instant(datetime.combine(day + timedelta(days=1), time()), self.zone)
        if when <= self.after:
            midnight = min(midnight, self.after + _TICK)
        return max(when + _TICK, midnight)


__all__ = ["Business", "LINE", "POLICIES", "attach", "describe_with", "detach", "first_runs", "next_run_after",
           "runs", "runs_between", "runs_by_day", "why_closed"]
