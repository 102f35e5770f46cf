"""From wall-clock occurrences to instants in the rule's zone.

The rules are expanded on the wall clock (naive datetimes), then each wall
time becomes an instant:

* a time in a spring-forward gap fires at the same offset after the gap
  (02:30 in Berlin on the last Sunday of March becomes 03:30 CEST; 02:15
  on Lord Howe's 30-minute gap becomes 02:45);
* a time that occurs twice in the fall-back overlap fires once, at the
  first (fold=0, still on summer time);
* two wall times that land on the same instant fire once.

This is wall-clock iteration for every FREQ, HOURLY/MINUTELY/SECONDLY
included: an hourly rule fires once per wall-clock hour, so on the night
the clocks go back it fires at 02:00 summer time and not again at 02:00
winter time (23 or 24 fires that day, never 25), and on the night they go
forward the 02:00 fire is moved to 03:00 and merged with the 03:00 one.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterator
from zoneinfo import ZoneInfo

from almanac.errors import InvalidRule

from .engine import SEARCH_STEPS, Budget, SearchTooLong, compile_plan, current_budget
from .expand import rule_walk
from .model import UNIT_SECONDS, Recurrence, Rule
from .static import static_reason
from .zones import get_zone, in_gap, to_instant, to_wall, utc_key

# Enough to cover any gap in tzdata (Samoa skipped a whole day in 2011).
_MAX_SHIFT = timedelta(days=2)


def wall_stream(rec: Recurrence, start: datetime, budget: Budget) -> Iterator[datetime]:
    """The rules' wall-clock occurrences >= start (RDATE and EXDATE are instants: `instant_stream`)."""
    plans = [(r, compile_plan(r, rec.start_wall)) for r in rec.rules]
    zone = get_zone(rec.timezone)
    # A rule the static checks prove silent is skipped rather than searched.
    streams = [rule_walk(r, p, start, budget, zone) for r, p in plans
               if static_reason(r, p) is None]
    if not rec.rules and start <= rec.start_wall:
        streams.append(iter([rec.start_wall]))  # a block without RRULE fires at DTSTART
    last = None
    for when in heapq.merge(*streams):
        if when != last:
            last = when
            yield when


def instant_stream(rec: Recurrence, after: datetime, budget: Budget) -> Iterator[datetime]:
    """Aware occurrences >= after, strictly increasing: the rules' and the RDATEs', less the EXDATEs.

    RDATE and EXDATE name instants, each in its own zone (or UTC): they are merged and matched
    by instant, so an EXDATE in the second pass of a repeated hour does not remove the first.
    """
    zone = get_zone(rec.timezone)
    after_utc = after.astimezone(timezone.utc)
    extra = iter([d.astimezone(zone) for d in rec.rdates if utc_key(d) >= after_utc])
    excluded = {utc_key(d) for d in rec.exdates}
    last: datetime | None = None
    for when in heapq.merge(_rule_instants(rec, after, budget), extra, key=utc_key):
        if utc_key(when) not in excluded and (last is None or utc_key(when) > last):
            last = utc_key(when)
            yield when


def _rule_instants(rec: Recurrence, after: datetime, budget: Budget) -> Iterator[datetime]:
    """The rules' occurrences as aware times >= after, strictly increasing.

    A gap moves a wall time forward past later wall times, so converted
    times wait in a heap until the wall stream has passed their new wall
    time; after that nothing earlier can arrive. Comparisons are made in
    UTC: two times of one zone compare by wall clock (PEP 495), which would
    confuse the two passes of a repeated hour.
    """
    zone = get_zone(rec.timezone)
    after_utc = after.astimezone(timezone.utc)
    waiting: list[tuple[datetime, datetime]] = []
    last: datetime | None = None
    for wall in wall_stream(rec, to_wall(after, zone) - _lookback(rec, after, zone), budget):
        while waiting and waiting[0][1].replace(tzinfo=None) <= wall:
            last = yield from _emit(heapq.heappop(waiting), after_utc, last)
        moved = to_instant(wall, zone)
        heapq.heappush(waiting, (moved.astimezone(timezone.utc), moved))
    while waiting:
        last = yield from _emit(heapq.heappop(waiting), after_utc, last)


def _lookback(rec: Recurrence, after: datetime, zone: ZoneInfo) -> timedelta:
    """How far before `after` on the wall clock the rules must be walked: over a recent gap, unless
    every wall time in the gap is shadowed. A sub-daily rule on a plain grid whose step divides the
    gap's length (every second, every 5 minutes) also makes each gap time's moved wall time itself,
    so walking the gap (3,600 times for every second) would only find duplicates."""
    gap = _recent_gap(after, zone)
    if gap and rec.rules and all(_grid_shadows_gap(rule, gap) for rule in rec.rules):
        return timedelta(0)
    return gap


def _grid_shadows_gap(rule: Rule, gap: timedelta) -> bool:
    step = UNIT_SECONDS.get(rule.freq, 0) * rule.interval
    plain = not (rule.byhour or rule.byminute or rule.bysecond or rule.bysetpos)
    return bool(step) and plain and int(gap.total_seconds()) % step == 0


def _recent_gap(after: datetime, zone: ZoneInfo) -> timedelta:
    """How far a gap just before `after` may have pushed earlier wall times.

    Only wall times that a spring-forward moved can be earlier on the wall
    than `after` and yet fire at or after it.
    """
    now = after.astimezone(zone).utcoffset() or timedelta(0)
    before = (after - _MAX_SHIFT).astimezone(zone).utcoffset() or timedelta(0)
    return max(now - before, timedelta(0))


def _emit(item: tuple[datetime, datetime], after_utc: datetime,
          last: datetime | None) -> Iterator[datetime]:
    utc, when = item
    if utc >= after_utc and (last is None or utc > last):
        yield when
        return utc
    return last


def occurrences(rec: Recurrence, *, after: datetime, count: int) -> list[datetime]:
    """The first `count` occurrences at or after `after` (and DTSTART), in the
    rule's zone with their offsets. A naive `after` is wall-clock time in the
    rule's zone. Bounded: raises InvalidRule if the rule is too costly to
    evaluate within the work budget (which no tested rule does); the same
    rule always gets the same answer, however busy the machine."""
    zone = get_zone(rec.timezone)
    after = _aware(after, zone)
    out: list[datetime] = []
    if count <= 0:
        return out
    try:
        for when in instant_stream(rec, after, current_budget(SEARCH_STEPS)):
            out.append(when)
            if len(out) >= count:
                break
    except SearchTooLong:
        # A rare rule (say once in decades) may not yield `count` dates within
        # the budget: the ones found are correct, so return those.
        if not out:
            raise _too_costly() from None
    return out


def next_after(rec: Recurrence, after: datetime) -> datetime | None:
    """The first occurrence strictly after `after`, or None once spent."""
    zone = get_zone(rec.timezone)
    after = _aware(after, zone)
    try:
        after_utc = after.astimezone(timezone.utc)
        for when in instant_stream(rec, after, current_budget(SEARCH_STEPS)):
            if when.astimezone(timezone.utc) > after_utc:
                return when
    except SearchTooLong:
        raise _too_costly() from None
    return None


def _aware(when: datetime, zone: ZoneInfo) -> datetime:
    return to_instant(when, zone) if when.tzinfo is None else when


def _too_costly() -> InvalidRule:
    return InvalidRule("This rule is too costly to evaluate; please simplify it.",
                       details={"position": 0})


# ---------------------------------------------------------------- DST notes


@dataclass(frozen=True)
class Shift:
    """An occurrence moved by a spring-forward gap: `wall` (naive, in the rule's
    zone) does not exist that day, so it runs at `runs_at`."""

    wall: datetime
    runs_at: datetime

    @property
    def note(self) -> str:
        return (f"{self.wall:%H:%M} does not exist on {self.wall.day} {self.wall:%b %Y}: "
                f"runs at {self.runs_at:%H:%M}")


def gap_shifts(rec: Recurrence, found: list[datetime]) -> list[Shift]:
    """Which of `found` are moved by a DST gap, and from which wall time.

    Only an occurrence just after a gap can have been moved: its wall time
    minus the gap's length is a candidate, kept if it does not exist on the
    clock and the rule produces it. Bounded by the enclosing budget; on
    running out, the notes found so far are returned.
    """
    zone = get_zone(rec.timezone)
    out = []
    try:
        for when in found:
            wall = _moved_from(rec, when, zone)
            if wall is not None:
                out.append(Shift(wall, when))
    except SearchTooLong:
        pass
    return out


def _moved_from(rec: Recurrence, when: datetime, zone: ZoneInfo) -> datetime | None:
    offset = when.utcoffset() or timedelta(0)
    earlier = (when.astimezone(timezone.utc) - _MAX_SHIFT).astimezone(zone).utcoffset()
    jump = offset - (earlier or timedelta(0))
    if jump <= timedelta(0):
        return None
    wall = to_wall(when, zone) - jump
    if not in_gap(wall, zone) or to_instant(wall, zone) != when:
        return None
    produced = next(wall_stream(rec, wall, current_budget(SEARCH_STEPS)), None)
    return wall if produced == wall else None
