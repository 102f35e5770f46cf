"""The calendar: what will run over the next 1-6 weeks on a grid of weeks (Monday first), and one
day's full list. Filter by schedule; times in the viewer's zone, UTC, or a zone the tenant's schedules
use; days on which a shown zone changes its UTC offset (a DST shift) are marked. What a page costs
does not grow with the tenant: it shows one page of schedules and bounded work per day (see
`calendar_grid`), says what it left out, and links to it.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from typing import Callable
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from fastapi import Request
from fastapi.responses import Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from almanac.errors import NotFound
from almanac.platform.store.models import Schedule
from almanac.web.views import calendar_grid as cg
from almanac.web.views.common import PagePrincipal, ServicesDep, page_router, render, tenant_db, viewer_zone

router = page_router(read="viewer", write="editor")
PER_DAY_SHOWN = 4  # lines in a cell of the weeks grid before "+N more"
WEEK_SHOWN = 48  # lines a day in the one-week grid
GRID_CAP = 40  # a cell counts a rule that is not fixed-step one by one this far past its shown times
SELECT_MAX = 500  # schedules offered by the filter (any other is reached from its own page)
MAX_PAGE = 10_000  # pages of schedules past the quota's reach are clamped before they reach the database
DAY_RANGE = (timedelta(days=-7), timedelta(days=400))  # which days the day view answers for


def grid_dates(now: datetime, zone: ZoneInfo, weeks: int) -> list[date]:
    today = now.astimezone(zone).date()
    first = today - timedelta(days=today.weekday())
    return [first + timedelta(days=i) for i in range(7 * weeks)]


def day_href(zone: str = "", schedule: int | None = None, page: int = 0) -> Callable[..., str]:
    """The day view's address for a day, keeping the page's zone, filter and page of schedules."""
    def href(day: date, only: int | None = None, **more: str) -> str:
        params = {"zone": zone, "schedule": only if only is not None else schedule,
                  "page": page if only is None and page else None, **more}
        query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
        return f"/calendar/day/{day.isoformat()}" + (f"?{query}" if query else "")
    return href


def _page_href(path: str, page: int, **params: object) -> str:
    query = urlencode({k: v for k, v in ({**params, "page": page or None}).items() if v not in (None, "")})
    return path + (f"?{query}" if query else "")


def _choices(session: Session, schedule: int | None) -> tuple[list[Schedule], list[str]]:
    """The schedules the filter offers (the chosen one always among them) and the zones in use."""
    offered = list(session.execute(select(Schedule).order_by(Schedule.name, Schedule.id).limit(SELECT_MAX))
                   .scalars())
    if schedule is not None and all(s.id != schedule for s in offered):
        offered += list(session.execute(select(Schedule).where(Schedule.id == schedule)).scalars())
    zones = session.execute(select(Schedule.timezone).distinct()).scalars()
    return offered, sorted({z for z in zones if cg.zone_named(z)} | {"UTC"})


def _zone_of(request: Request, zone: str, zones: list[str]) -> ZoneInfo:
    return (cg.zone_named(zone) if zone in zones else None) or viewer_zone(request)


@router.get("/calendar")
def calendar_page(request: Request, principal: PagePrincipal, services: ServicesDep, weeks: int = 4,
                  schedule: str = "", zone: str = "", view: str = "month", page: int = 0) -> Response:
    only = _schedule_id(schedule)
    weeks = 1 if view == "week" else min(max(weeks, 1), 6)
    page = min(max(page, 0), MAX_PAGE)
    now = services.clock.now()
    per_day = WEEK_SHOWN if view == "week" else PER_DAY_SHOWN
    with tenant_db(services, principal) as session:
        offered, zones = _choices(session, only)
        shown = _zone_of(request, zone, zones)
        dates = grid_dates(now, shown, weeks)
        chosen, total = cg.schedule_page(session, page, only)
        jobs = cg.jobs_by_day(session, cg.edges(dates, shown, now), per_day, shown) if only is None else []
    grid = cg.build_grid(chosen, jobs, now, shown, dates, keep=per_day, cap=GRID_CAP)
    zone = zone if zone in zones else ""
    nav = {"weeks": weeks if view != "week" else None, "schedule": only, "zone": zone,
           "view": view if view == "week" else None}
    return render(request, "calendar.html", grid=grid.weeks, left_out=grid.left_out, weeks=weeks, view=view,
                  schedules=offered, schedule=only, zones=zones, zone=zone, zone_name=str(shown),
                  per_day=per_day, day_href=day_href(zone, only, page), page=page, total=total,
                  first=page * cg.SCHEDULES_PER_PAGE, shown_count=len(chosen),
                  prev_href=_page_href("/calendar", page - 1, **nav) if page else None,
                  next_href=_page_href("/calendar", page + 1, **nav)
                  if (page + 1) * cg.SCHEDULES_PER_PAGE < total else None)


@router.get("/calendar/day/{day}")
def calendar_day(request: Request, day: date, principal: PagePrincipal, services: ServicesDep,
                 schedule: str = "", zone: str = "", page: int = 0,
                 after: datetime | None = None, after_key: str = "") -> Response:
    """One day: each schedule's count that day, then every time and pending job, `DAY_LIST` a page."""
    only = _schedule_id(schedule)
    page = min(max(page, 0), MAX_PAGE)
    now = services.clock.now()
    with tenant_db(services, principal) as session:
        offered, zones = _choices(session, only)
        shown = _zone_of(request, zone, zones)
        today = now.astimezone(shown).date()
        if not today + DAY_RANGE[0] <= day <= today + DAY_RANGE[1]:
            raise NotFound("The calendar shows days from a week ago to about a year ahead.")
        bounds = cg.edges([day], shown, now)
        chosen, total = cg.schedule_page(session, page, only)
        counts = cg.day_counts(chosen, (bounds[0], bounds[1]))
        jobs = cg.jobs_by_day(session, bounds, 0, shown)[0][1] if only is None else 0
        listed, cursor = cg.day_list(chosen, session if only is None else None, (bounds[0], bounds[1]),
                                     _cursor(after, after_key), shown)
    zone = zone if zone in zones else ""
    href = day_href(zone, only, page)
    later = href(day, **{"after": cursor.at.isoformat(), "after_key": cursor.text()}) if cursor else None
    nav = {"schedule": only, "zone": zone}
    return render(request, "calendar_day.html", day=day, today=today, zone_name=str(shown), listed_zone=shown,
                  counts=counts,
                  jobs=jobs, listed=listed, later=later, from_start=href(day) if after else None,
                  prev_day=href(day - timedelta(days=1)), next_day=href(day + timedelta(days=1)),
                  shifts=cg.shifts_of({str(shown): shown} | cg.zones_of(chosen), day), total=total,
                  first=page * cg.SCHEDULES_PER_PAGE, shown_count=len(chosen), schedule=only,
                  schedules=offered, calendar_href=_page_href("/calendar", page, **nav),
                  prev_href=_page_href(f"/calendar/day/{day}", page - 1, **nav) if page else None,
                  next_href=_page_href(f"/calendar/day/{day}", page + 1, **nav)
                  if (page + 1) * cg.SCHEDULES_PER_PAGE < total else None)


def _schedule_id(text: str) -> int | None:
    """The filter's schedule: "" (the form's "All schedules") is none; an id that is no id matches nothing."""
    if not text:
        return None
    return int(text) if text.isdigit() and len(text) < 19 else -1


def _cursor(after: datetime | None, key: str) -> cg.Cursor | None:
    """Where the listed page starts; an unreadable cursor starts at the beginning of the day."""
    if after is None or len(key) < 2 or key[0] not in "sj" or not key[1:].isdigit() or len(key) > 20:
        return None
    try:
        at = (after if after.tzinfo else after.replace(tzinfo=timezone.utc)).astimezone(timezone.utc)
    except (OverflowError, ValueError):
        return None
    return cg.Cursor(at, "sj".index(key[0]), int(key[1:]))
