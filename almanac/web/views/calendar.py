"""A calendar of what will run: every enabled schedule's occurrences over the next 1-6 weeks,
on a grid of weeks (Monday first), server-rendered; filter by schedule; in the viewer's zone,
UTC, or a zone the tenant's schedules use; days on which a shown zone changes its UTC offset
(a DST shift) are marked. `build_calendar` is pure: it takes `now`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fastapi import Request
from fastapi.responses import Response

from almanac.errors import AlmanacError
from almanac.platform import service
from almanac.web.views.common import PagePrincipal, ServicesDep, page_router, render, tenant_db, viewer_zone

router = page_router(read="viewer", write="editor")
PER_SCHEDULE = 2000  # occurrences computed per schedule at most (an every-minute rule is capped)
PER_DAY_SHOWN = 4  # entries listed in a month cell before "+N more" (the week view lists all)


@dataclass
class Day:
    day: date
    today: bool
    entries: list[tuple[str, str, int]] = field(default_factory=list)  # (HH:MM, schedule name, id)
    shifts: list[str] = field(default_factory=list)  # "Europe/Berlin: UTC+02:00 → UTC+01:00"


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


def build_calendar(schedules: list[Any], now: datetime, zone: ZoneInfo, weeks: int) -> list[list[Day]]:
    """Weeks (lists of 7 Days, Monday first) from the current week, with each occurrence placed
    on its day in `zone`, and the DST shifts of `zone` and of the schedules' own zones."""
    today = now.astimezone(zone).date()
    first = today - timedelta(days=today.weekday())
    days = {first + timedelta(days=i): Day(first + timedelta(days=i), first + timedelta(days=i) == today)
            for i in range(7 * weeks)}
    end = datetime.combine(first + timedelta(days=7 * weeks), time(0), zone)
    for sch in schedules:
        try:
            times = service.next_times(sch, now, PER_SCHEDULE)
        except AlmanacError:
            continue  # a rule that cannot be evaluated shows nothing rather than breaking the page
        for when in times:
            if when >= end:
                break
            local = when.astimezone(zone)
            if local.date() in days:
                days[local.date()].entries.append((local.strftime("%H:%M"), sch.name, sch.id))
    zones = {str(zone): zone} | {s.timezone: _zone(s.timezone) for s in schedules if _zone(s.timezone)}
    for day in days.values():
        day.entries.sort()
        day.shifts = [f"{name}: {shift}" for name, z in sorted(zones.items())
                      if z is not None and (shift := dst_shift(z, day.day))]
    ordered = [days[d] for d in sorted(days)]
    return [ordered[i:i + 7] for i in range(0, len(ordered), 7)]


def _zone(name: str | None) -> ZoneInfo | None:
    try:
        return ZoneInfo(name) if name else None
    except (ZoneInfoNotFoundError, ValueError):
        return None


@router.get("/calendar")
def calendar_page(request: Request, principal: PagePrincipal, services: ServicesDep, weeks: int = 4,
                  schedule: int | None = None, zone: str = "", view: str = "month") -> Response:
    weeks = 1 if view == "week" else min(max(weeks, 1), 6)
    with tenant_db(services, principal) as session:
        every = service.list_schedules(session)
    zones = sorted({s.timezone for s in every if _zone(s.timezone)} | {"UTC"})
    shown_zone = (_zone(zone) if zone in zones else None) or viewer_zone(request)
    chosen = [s for s in every if s.enabled and (schedule is None or s.id == schedule)]
    grid = build_calendar(chosen, services.clock.now(), shown_zone, weeks)
    return render(request, "calendar.html", grid=grid, weeks=weeks, view=view, schedules=every,
                  schedule=schedule, zones=zones, zone=zone if zone in zones else "",
                  zone_name=str(shown_zone), per_day=PER_DAY_SHOWN if view != "week" else 10_000)
