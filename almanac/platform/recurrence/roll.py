"""What a business calendar does to a rule's occurrences: keep, skip or move.

`roll` takes the occurrences a rule makes (aware, in the rule's zone) and
answers one `Rolled` per original occurrence, in order:

* on a business day it is kept;
* otherwise, by the policy: `skip` drops it; `before` moves it to the
  previous business day and `after` to the next one, at the same wall-clock
  time in the rule's zone (so 09:00 stays 09:00 across a DST change; a time
  in a spring-forward gap moves forward by the gap, as everywhere else);
* a move never makes two runs on one day: a day that holds a moved run
  takes no other, and a day that already holds a run takes no moved one;
  the later original occurrence is the one skipped, with the reason.

The search for a business day is bounded (`MAX_SEARCH_DAYS`); a calendar
with none in reach is `NeverFires`. A year the holiday library does not
cover is never treated as free of holidays: such an occurrence is skipped
and its reason says the holidays are unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Iterable, Iterator, Literal

from almanac.errors import HolidaysUnknown, InvalidRule, NeverFires, ValidationError

from .calendars import BusinessCalendar, why_not_business_day
from .model import Recurrence
from .occurrences import occurrences
from .zones import get_zone, to_instant

Policy = Literal["skip", "before", "after"]
POLICIES: tuple[Policy, ...] = ("skip", "before", "after")
MAX_SEARCH_DAYS = 366
# The never-fires check with a calendar looks this far ahead, and at no more
# occurrences than this (each followed by a jump past the closed days it fell
# on), so it stays within the preview's time.
HORIZON_YEARS = 10
HORIZON_STEPS = 100


@dataclass(frozen=True)
class Rolled:
    """One original occurrence and what the calendar made of it.

    `action` is "kept", "moved" or "skipped"; `when` is the run's time (None when
    skipped); `reason` is empty when kept.
    """

    original: datetime
    action: Literal["kept", "moved", "skipped"]
    when: datetime | None
    reason: str = ""

    def describe(self) -> str:
        """The line a preview shows: "25 Dec skipped: Christmas Day"."""
        if self.action == "kept":
            return f"{_day(self.original)} kept"
        if self.action == "skipped":
            return f"{_day(self.original)} skipped: {self.reason}"
        assert self.when is not None
        return f"moved from {_day(self.original)} to {_day(self.when)}: {self.reason}"


def _day(when: datetime) -> str:
    return f"{when:%a} {when.day} {when:%b %Y}"


def check_policy(policy: str) -> Policy:
    """The policy named, or ValidationError listing the three."""
    for known in POLICIES:
        if policy == known:
            return known
    raise ValidationError(f"{policy[:20]!r} is not a calendar policy: use skip, before or after.",
                          details={"field": "policy"})


def roll(found: Iterable[datetime], cal: BusinessCalendar, policy: Policy = "skip"
         ) -> Iterator[Rolled]:
    """One Rolled per occurrence of `found` (aware, increasing), lazily and in order."""
    moved_days: set[date] = set()
    last_move: tuple[date, date] | None = None  # (from, to) of the latest search
    last_day: date | None = None  # the latest day holding a run
    for original in found:
        day = original.date()
        reason = _why_not(cal, day)
        if reason is None:
            if day in moved_days:
                yield Rolled(original, "skipped", None,
                             f"{_day(original)} already has a run moved there by the calendar")
                continue
            last_day = day
            yield Rolled(original, "kept", original)
            continue
        if policy == "skip":
            yield Rolled(original, "skipped", None, reason)
            continue
        target = _moved(original, cal, policy, last_move)
        last_move = (day, target.date())
        if target.date() == last_day or target.date() in moved_days:
            yield Rolled(original, "skipped", None,
                         f"{reason}; {_day(target)} already has a run")
            continue
        moved_days.add(target.date())
        last_day = target.date()
        yield Rolled(original, "moved", target, reason)


def _why_not(cal: BusinessCalendar, day: date) -> str | None:
    try:
        return why_not_business_day(cal, day)
    except HolidaysUnknown:
        return f"holidays unknown for {day.year}"


def _moved(original: datetime, cal: BusinessCalendar, policy: Policy,
           last_move: tuple[date, date] | None) -> datetime:
    """The same wall time on the nearest business day before or after `original`'s day.

    `last_move` is the previous search: every day strictly between its two ends is
    excluded, so a search that reaches it ends there; a long closed range then costs
    one walk, not one walk per occurrence in it.
    """
    step = timedelta(days=-1 if policy == "before" else 1)
    day = original.date()
    reason = None
    for _ in range(MAX_SEARCH_DAYS):
        if last_move is not None and min(last_move) <= day <= max(last_move) \
                and day != last_move[1]:
            day = last_move[1]
        else:
            day += step
            reason = _why_not(cal, day)
            if reason is not None:
                continue
        # fold=0: on the target day a repeated time fires at its first pass, as everywhere.
        wall = datetime.combine(day, original.replace(tzinfo=None).time().replace(fold=0))
        return to_instant(wall, original.tzinfo)  # type: ignore[arg-type]
    # The last reason seen tells an unknown-holidays year from a truly closed calendar.
    raise NeverFires(
        f"Calendar {cal.name!r} has no business day within {MAX_SEARCH_DAYS} days "
        f"{policy} {original:%Y-%m-%d} ({reason} on {day:%Y-%m-%d}), "
        "so an occurrence there can never be moved to one."
    )


# ---------------------------------------------------------------- never fires


def ensure_fires_with_calendar(rec: Recurrence, cal: BusinessCalendar, policy: Policy,
                               now: datetime) -> None:
    """NeverFires, naming the horizon, if no occurrence at or after `now` survives the calendar.

    Call after `ensure_fires` (the rule alone fires). The horizon is `HORIZON_YEARS`
    after `now`, at most `HORIZON_STEPS` occurrences, and what the work budget
    allows. After an occurrence on a closed day the search jumps to the next
    business day: whatever the policy, the occurrences in between are skipped or
    moved onto a day that already has a run, so a rule firing every minute costs
    one step per closed stretch, not per minute.
    """
    zone = get_zone(rec.timezone)
    now = now.astimezone(zone)
    horizon = _Horizon(min(now + timedelta(days=round(365.25 * HORIZON_YEARS)),
                           datetime(9999, 12, 30, tzinfo=zone)))
    first: Rolled | None = None
    for rolled in roll(_jumps(rec, cal, now, horizon), cal, policy):
        if rolled.when is not None and rolled.when >= now:
            return
        first = first or rolled
    if first is None:
        return  # nothing in the horizon at all: the rule's own check decides
    shown = first.describe() if first.action == "skipped" else f"{first.describe()}, before now"
    raise NeverFires(
        f"Every occurrence from {now:%Y-%m-%d} to {horizon.end:%Y-%m-%d} falls on a day that "
        f"is not a business day in calendar {cal.name!r} with policy {policy}, so it never "
        f"fires ({shown}; {horizon.steps} checked)."
    )


@dataclass
class _Horizon:
    """How far the never-fires check looked: `end` shrinks to the last day seen
    when the step count or the work budget stops it first."""

    end: datetime
    steps: int = 0


def _jumps(rec: Recurrence, cal: BusinessCalendar, now: datetime, horizon: _Horizon
           ) -> Iterator[datetime]:
    """The rule's occurrences from `now` to the horizon, less those after the first
    of each stretch of closed days."""
    cursor = now
    while True:
        try:
            found = occurrences(rec, after=cursor, count=1)
        except InvalidRule:  # the work budget is spent: the horizon ends at the last day seen
            horizon.end = cursor
            return
        if not found or found[0] > horizon.end:
            return
        if horizon.steps >= HORIZON_STEPS:
            horizon.end = cursor
            return
        horizon.steps += 1
        yield found[0]
        cursor = found[0] + timedelta(microseconds=1)
        day = _next_business_day(cal, found[0].date())
        if day != found[0].date():
            midnight = to_instant(datetime.combine(day, datetime.min.time()), found[0].tzinfo)  # type: ignore[arg-type]
            cursor = max(cursor, midnight)


def _next_business_day(cal: BusinessCalendar, day: date) -> date:
    """`day` if it is a business day, else the next one, or the day after the search's reach."""
    for _ in range(MAX_SEARCH_DAYS + 1):
        if _why_not(cal, day) is None:
            return day
        day += timedelta(days=1)
    return day
