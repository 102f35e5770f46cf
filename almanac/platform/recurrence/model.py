"""The parsed form of a recurrence: one or more RFC 5545 rules plus RDATE/EXDATE.

The rules are wall-clock: their `datetime` values are naive and mean a time on
the clock of the recurrence's IANA zone; conversion to instants happens only
in `occurrences.py`, so the calendar arithmetic never sees a UTC offset.
RDATE and EXDATE are instants (aware), each in the zone its line named.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

FREQS = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
# Seconds in one period of the sub-daily frequencies.
UNIT_SECONDS = {"HOURLY": 3600, "MINUTELY": 60, "SECONDLY": 1}
MAX_INPUT_BYTES = 4096


def freq_rank(freq: str) -> int:
    """0 for YEARLY ... 6 for SECONDLY: larger is finer."""
    return FREQS.index(freq)


@dataclass(frozen=True)
class Rule:
    """One RRULE. BY-lists are sorted tuples of what the text said (no defaults).

    `byday` holds (n, weekday) pairs: n == 0 is a plain weekday, otherwise the
    n-th (negative: from the end) weekday of the month or year. `until` is a
    naive wall-clock time in the recurrence's zone.
    """

    freq: str
    interval: int = 1
    count: int | None = None
    until: datetime | None = None
    wkst: int = 0
    bymonth: tuple[int, ...] = ()
    byweekno: tuple[int, ...] = ()
    byyearday: tuple[int, ...] = ()
    bymonthday: tuple[int, ...] = ()
    byday: tuple[tuple[int, int], ...] = ()
    byhour: tuple[int, ...] = ()
    byminute: tuple[int, ...] = ()
    bysecond: tuple[int, ...] = ()
    bysetpos: tuple[int, ...] = ()

    @property
    def plain_days(self) -> tuple[int, ...]:
        return tuple(sorted({wd for n, wd in self.byday if n == 0}))

    @property
    def nth_days(self) -> tuple[tuple[int, int], ...]:
        return tuple((n, wd) for n, wd in self.byday if n != 0)


@dataclass(frozen=True)
class CalendarClause:
    """A business calendar an English rule names, and what a non-business day does to an
    occurrence. `name` None is the tenant's default calendar ("every business day")."""

    name: str | None
    policy: Literal["skip", "before", "after"]


@dataclass(frozen=True)
class Recurrence:
    """A parsed recurrence; build it with `parse()` or `load()`.

    `dtstart` is aware (in `timezone`); `start_wall` is the same time as a
    naive wall-clock value, which is what the rules are expanded against.
    A recurrence without rules fires at DTSTART and its RDATEs only. `rdates` and
    `exdates` are aware instants in increasing order, each in its own zone (or UTC).
    """

    input_kind: str
    timezone: str
    dtstart: datetime
    canonical: str
    rules: tuple[Rule, ...] = ()
    rdates: tuple[datetime, ...] = ()
    exdates: tuple[datetime, ...] = ()
    start_wall: datetime = field(default=datetime(1970, 1, 1))
    # Not in `canonical`: the schedule keeps the calendar in its own fields.
    calendar: CalendarClause | None = None

    @property
    def rule(self) -> Rule | None:
        return self.rules[0] if self.rules else None
