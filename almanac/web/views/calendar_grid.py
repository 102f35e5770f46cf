"""What the calendar pages show, at a cost bounded whatever the tenant holds.

A page takes one page of schedules (`SCHEDULES_PER_PAGE`, by name) and, for each day, each
schedule's first few times and how many the day holds (`recurrence.window.by_day`: a dense rule is
counted, not listed). All recurrence work of a request shares one budget (`PAGE_STEPS`) and each
schedule has its own share (`SCHEDULE_STEPS`); a schedule that does not fit is named on the page as
left out, with a link to its own page. Pending one-off jobs come from one query per page, at most
a few per day plus each day's count. The builders are pure: they take `now`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Sequence
from urllib.parse import quote
from zoneinfo import ZoneInfo

from sqlalchemy import and_, case, func, literal_column, or_, select
from sqlalchemy.orm import Session

from almanac.errors import AlmanacError
from almanac.platform import recurrence
from almanac.platform.store.models import JOB_PENDING, Job, Schedule
from almanac.platform.recurrence.engine import SearchTooLong, budget_scope
from almanac.platform.recurrence.window import DaySlice, between, by_day

SCHEDULES_PER_PAGE = 20
# Engine steps (one is a few microseconds): all of a page's recurrence work, and one schedule's share.
PAGE_STEPS = 100_000
SCHEDULE_STEPS = 8_000
DAY_LIST = 100  # occurrences the day view lists a page
DAY_CAP = 2_000  # a day view counts a rule one by one this far (a fixed-step rule is counted exactly)


@dataclass
class Entry:
    """A line of a day: one occurrence, one job, or a schedule's whole day when it holds more than
    the grid lists for one schedule (`total` its count, `exact` False: at least that many)."""

    when: datetime  # in the shown zone
    label: str
    href: str
    kind: str  # "schedule" or "job"
    total: int = 1
    exact: bool = True
    schedule_id: int | None = None


@dataclass
class Day:
    day: date
    today: bool
    entries: list[Entry] = field(default_factory=list)
    shifts: list[str] = field(default_factory=list)  # "Europe/Berlin: UTC+02:00 → UTC+01:00"
    jobs_total: int = 0  # pending jobs that day, listed or not

    def hidden(self, shown: int) -> tuple[int, bool, int]:
        """What the lines past the first `shown` stand for: occurrences and jobs, whether exactly, and
        how many of them are jobs (a day of dense schedules would otherwise hide its jobs unsaid)."""
        rest = self.entries[shown:]
        jobs_listed = sum(1 for e in self.entries if e.kind == "job")
        jobs = sum(1 for e in rest if e.kind == "job") + self.jobs_total - jobs_listed
        return (sum(e.total for e in rest if e.kind != "job") + jobs, all(e.exact for e in self.entries), jobs)


@dataclass
class LeftOut:
    """A schedule of the page whose occurrences the page could not afford or evaluate."""

    id: int
    name: str
    why: str


@dataclass
class Grid:
    weeks: list[list[Day]]
    left_out: list[LeftOut]


# ---------------------------------------------------------------- days and DST


def _offset(zone: ZoneInfo, when: datetime) -> timedelta:
    return when.replace(tzinfo=zone).utcoffset() or timedelta(0)


def _fmt(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    sign, minutes = ("+" if minutes >= 0 else "-"), abs(minutes)
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def dst_shift(zone: ZoneInfo, day: date) -> str | None:
    """'UTC+01:00 → UTC+02:00' when the zone's offset at the day's end differs from its start."""
    start = _offset(zone, datetime.combine(day, time(0)))
    end = _offset(zone, datetime.combine(day, time(23, 59)))
    return None if start == end else f"{_fmt(start)} → {_fmt(end)}"


def edges(days: Sequence[date], zone: ZoneInfo, now: datetime) -> list[datetime]:
    """The first instant of each day in `zone` (never before `now`: the past does not run), and the
    end of the last, in UTC."""
    starts = [datetime.combine(d, time(0), zone).astimezone(timezone.utc) for d in days]
    end = datetime.combine(days[-1] + timedelta(days=1), time(0), zone).astimezone(timezone.utc)
    return [max(now, s) for s in starts] + [max(now, end)]


def shifts_of(zones: dict[str, ZoneInfo], day: date) -> list[str]:
    return [f"{name}: {shift}" for name, z in sorted(zones.items()) if (shift := dst_shift(z, day))]


# ---------------------------------------------------------------- schedules


def day_slices(sch: Any, bounds: list[datetime], keep: int, cap: int) -> list[DaySlice] | LeftOut:
    """`by_day` for one schedule within its share of the request's budget, or why it is left out."""
    try:
        canonical, business = recurrence.business.detach(sch.rrule)
        rec = recurrence.load(canonical, sch.input_kind)
        with budget_scope(SCHEDULE_STEPS):
            if business is not None:  # its runs, as the calendar skips and moves them
                return recurrence.business.runs_by_day(rec, business, bounds, keep)
            return by_day(rec, bounds, keep, cap)
    except SearchTooLong:
        return LeftOut(sch.id, sch.name, "too many occurrences to compute on one page")
    except AlmanacError:
        return LeftOut(sch.id, sch.name, "its rule cannot be evaluated")


def _entries(sch: Any, piece: DaySlice, keep: int, zone: ZoneInfo) -> list[Entry]:
    href = f"/schedules/{sch.id}"
    if piece.count <= keep and piece.exact:
        return [Entry(w.astimezone(zone), sch.name, href, "schedule", schedule_id=sch.id) for w in piece.first]
    return [Entry(piece.first[0].astimezone(zone), sch.name, href, "schedule", piece.count, piece.exact, sch.id)]


def build_grid(schedules: Sequence[Any], jobs: list[tuple[list[Entry], int]], now: datetime, zone: ZoneInfo,
               dates: list[date], keep: int, cap: int) -> Grid:
    """Weeks (lists of 7 Days, Monday first) from the current week: each schedule's times on its day
    in `zone` (a day holding more than `keep` of one schedule is one line with its count), the jobs
    (`jobs_by_day`), and the DST shifts of `zone` and of the schedules' own zones."""
    today = now.astimezone(zone).date()
    days = [Day(d, d == today) for d in dates]
    bounds = edges(dates, zone, now)
    left_out: list[LeftOut] = []
    with budget_scope(PAGE_STEPS):
        for sch in schedules:
            slices = day_slices(sch, bounds, keep, cap)
            if isinstance(slices, LeftOut):
                left_out.append(slices)
                continue
            for day, piece in zip(days, slices):
                day.entries.extend(_entries(sch, piece, keep, zone) if piece.count else [])
    zones = {str(zone): zone} | zones_of(schedules)
    for day, (listed, total) in zip(days, jobs or [([], 0)] * len(days)):
        day.entries.extend(listed)
        day.jobs_total = total
        day.entries.sort(key=lambda e: (e.when, e.kind != "schedule", e.label))
        day.shifts = shifts_of(zones, day.day)
    return Grid([days[i:i + 7] for i in range(0, len(days), 7)], left_out)


def zones_of(schedules: Sequence[Any]) -> dict[str, ZoneInfo]:
    return {s.timezone: z for s in schedules if (z := zone_named(s.timezone))}


def day_counts(schedules: Sequence[Any], bounds: tuple[datetime, datetime]) -> list[tuple[Any, DaySlice | LeftOut]]:
    """Each schedule's first time and count in one day (counted one by one up to `DAY_CAP`)."""
    with budget_scope(PAGE_STEPS):
        return [(sch, piece[0] if isinstance(piece, list) else piece)
                for sch in schedules for piece in [day_slices(sch, list(bounds), 1, DAY_CAP)]]


def zone_named(name: str | None) -> ZoneInfo | None:
    try:
        return ZoneInfo(name) if name else None
    except (ValueError, OSError):
        return None


# ---------------------------------------------------------------- queries


def schedule_page(s: Session, page: int, only: int | None = None) -> tuple[list[Schedule], int]:
    """One page of the enabled schedules by name (or the one asked for), and how many there are."""
    where = [Schedule.enabled.is_(True)] + ([Schedule.id == only] if only is not None else [])
    total = s.execute(select(func.count()).select_from(Schedule).where(*where)).scalar_one()
    rows = s.execute(select(Schedule).where(*where).order_by(Schedule.name, Schedule.id)
                     .offset(page * SCHEDULES_PER_PAGE).limit(SCHEDULES_PER_PAGE)).scalars()
    return list(rows), int(total)


def jobs_by_day(s: Session, bounds: list[datetime], per_day: int, zone: ZoneInfo) -> list[tuple[list[Entry], int]]:
    """Each day's first `per_day` pending jobs (by time) and how many it holds, in one query."""
    bucket = case(*[(Job.run_at < bounds[i + 1], literal_column(str(i))) for i in range(len(bounds) - 1)])
    ranked = (select(Job.key, Job.run_at, bucket.label("day"),
                     func.row_number().over(partition_by=bucket, order_by=(Job.run_at, Job.id)).label("n"),
                     func.count().over(partition_by=bucket).label("total"))
              .where(Job.state == JOB_PENDING, Job.run_at >= bounds[0], Job.run_at < bounds[-1]).subquery())
    out: list[tuple[list[Entry], int]] = [([], 0) for _ in bounds[:-1]]
    for key, run_at, day, n, total in s.execute(select(ranked).where(ranked.c.n <= max(per_day, 1))):
        listed, _ = out[day]
        if n <= per_day:
            listed.append(_job_entry(key, run_at, zone))
        out[day] = (listed, int(total))
    return out


def _job_entry(key: str, run_at: datetime, zone: ZoneInfo) -> Entry:
    return Entry(run_at.astimezone(zone), key, f"/jobs/{quote(key, safe='')}", "job")


# ---------------------------------------------------------------- one day


@dataclass
class Cursor:
    """Where a page of the day view starts: after this instant and (kind, id), kind 0 a schedule."""

    at: datetime
    kind: int
    id: int

    def text(self) -> str:
        return f"{'sj'[self.kind]}{self.id}"


def day_list(schedules: Sequence[Any], s: Session | None, bounds: tuple[datetime, datetime], after: Cursor | None,
             zone: ZoneInfo) -> tuple[list[Entry], Cursor | None]:
    """The day's occurrences and pending jobs in time order from `after`, `DAY_LIST` at most, and where
    the next page starts (None on the last). Each schedule lists at most `DAY_LIST + 1` times."""
    start, end = bounds if after is None else (max(bounds[0], after.at), bounds[1])
    found: list[tuple[tuple[datetime, int, int], Entry]] = []
    with budget_scope(PAGE_STEPS):
        for sch in schedules:
            try:
                canonical, business = recurrence.business.detach(sch.rrule)
                rec = recurrence.load(canonical, sch.input_kind)
                with budget_scope(SCHEDULE_STEPS):
                    times = (between(rec, start, end, DAY_LIST + 2) if business is None else
                             recurrence.business.runs_between(rec, business, start, end, DAY_LIST + 2))
            except (SearchTooLong, AlmanacError):
                continue  # the day's summary names it as left out
            found += [((w.astimezone(timezone.utc), 0, sch.id), Entry(w.astimezone(zone), sch.name, f"/schedules/{sch.id}", "schedule"))
                      for w in times]
    if s is not None:
        found += [((e.when.astimezone(timezone.utc), 1, jid), e) for jid, e in _day_jobs(s, start, end, after, zone)]
    found = sorted((f for f in found if after is None or f[0] > (after.at, after.kind, after.id)),
                   key=lambda f: f[0])
    page = found[:DAY_LIST]
    more = len(found) > DAY_LIST
    return [e for _, e in page], (Cursor(*page[-1][0]) if more else None)


def _day_jobs(s: Session, start: datetime, end: datetime, after: Cursor | None,
              zone: ZoneInfo) -> list[tuple[int, Entry]]:
    query = (select(Job.id, Job.key, Job.run_at).where(Job.state == JOB_PENDING, Job.run_at >= start,
                                                       Job.run_at < end)
             .order_by(Job.run_at, Job.id).limit(DAY_LIST + 1))
    if after is not None and after.kind == 1:
        query = query.where(or_(Job.run_at > after.at, and_(Job.run_at == after.at, Job.id > after.id)))
    return [(jid, _job_entry(key, run_at, zone)) for jid, key, run_at in s.execute(query)]
