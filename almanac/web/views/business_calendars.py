"""Business calendars as pages: any member sees them and the next 12 months they exclude; admins
create, edit and delete them (SPEC sections 5 and 12). The API's rules apply: the store checks."""

from __future__ import annotations

import calendar as month_grid
from dataclasses import dataclass
from datetime import date
from typing import Any

from fastapi import Request
from fastapi.responses import Response

from almanac.errors import AlmanacError, Forbidden
from almanac.platform.service import calendar_store
from almanac.platform.recurrence.calendars import WEEKDAY_NAMES, BusinessCalendar
from almanac.platform.recurrence.business import why_closed
from almanac.web.audit import audit
from almanac.web.views.common import PagePrincipal, ServicesDep, flash, page_router, redirect, render, tenant_db

router = page_router(read="viewer", write="admin")
CLOSED_TEXT_MAX = 60_000
MONTHS = 12


@dataclass
class Month:
    title: str
    weeks: list[list[tuple[int, str | None] | None]]  # (day, why excluded) a cell; None outside the month
    excluded: list[tuple[date, str]]  # the excluded days that are not plain weekend days


def months_ahead(cal: BusinessCalendar, today: date) -> list[Month]:
    """The next `MONTHS` months from `today`'s, each day marked with why it is not a business day."""
    out, year, month = [], today.year, today.month
    for _ in range(MONTHS):
        weeks, excluded = [], []
        for week in month_grid.Calendar().monthdatescalendar(year, month):
            row: list[tuple[int, str | None] | None] = []
            for day in week:
                if day.month != month:
                    row.append(None)
                    continue
                why = why_closed(cal, day)
                row.append((day.day, why))
                if why is not None and why != "weekend":
                    excluded.append((day, why))
            weeks.append(row)
        out.append(Month(f"{date(year, month, 1):%B %Y}", weeks, excluded))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


def closed_lines(cal: BusinessCalendar) -> str:
    """The closed entries as the form's text: "2026-12-24..2026-12-31 Winter shutdown", one a line."""
    return "\n".join(f"{c.first}{'..' + str(c.last) if c.last != c.first else ''} {c.label}" for c in cal.closed)


def parse_closed(text: str) -> list[dict[str, str]]:
    """The form's closed days as the API's entries (the store checks each)."""
    entries = []
    for line in text.splitlines():
        if not line.strip():
            continue
        span, _, label = line.strip().partition(" ")
        first, _, last = span.partition("..")
        entry = {"first": first, "last": last or first}
        if label.strip():
            entry["label"] = label.strip()
        entries.append(entry)
    return entries


def _form_values(cal: BusinessCalendar | None) -> dict[str, Any]:
    if cal is None:
        return {"name": "", "country": "", "subdivision": "", "closed": "", "weekend": ["saturday", "sunday"]}
    return {"name": cal.name, "country": cal.country or "", "subdivision": cal.subdivision or "",
            "closed": closed_lines(cal), "weekend": [WEEKDAY_NAMES[d] for d in sorted(cal.weekend)]}


def _page(request: Request, services: ServicesDep, *, cal: BusinessCalendar | None, stored: bool,
          values: dict[str, Any], status_code: int = 200, error: str | None = None) -> Response:
    today = services.clock.now().date()
    return render(request, "business_calendar.html", status_code=status_code, cal=cal, stored=stored,
                  form=values, error=error, places=calendar_store.places(),
                  subdivisions=calendar_store.subdivisions(values["country"]) if values["country"] else (),
                  weekdays=WEEKDAY_NAMES, months=months_ahead(cal, today) if cal else [])


@router.get("/calendars")
def calendars_page(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        rows = [calendar_store.find_row(row) for row in calendar_store.listing(session)]
    return render(request, "business_calendars.html", rows=rows)


@router.get("/calendars/subdivisions")
def subdivision_options(request: Request, principal: PagePrincipal, country: str = "") -> Response:
    """The subdivision select's options for a country (htmx swaps them in when the country changes)."""
    return render(request, "_subdivision_options.html", subdivisions=calendar_store.subdivisions(country[:8]),
                  chosen="")


@router.get("/calendars/new")
def new_calendar_page(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    _need_admin(principal)
    return _page(request, services, cal=None, stored=False, values=_form_values(None))


@router.get("/calendars/{name}")
def calendar_page(request: Request, name: str, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        cal, row = calendar_store.find(session, name)
    return _page(request, services, cal=cal, stored=row is not None, values=_form_values(cal))


@router.post("/calendars")
async def save_calendar(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    form = await request.form()
    values: dict[str, Any] = {"name": str(form.get("name", "")).strip()[:64], "country": str(form.get("country", ""))[:8],
              "subdivision": str(form.get("subdivision", ""))[:16],
              "closed": str(form.get("closed", ""))[:CLOSED_TEXT_MAX],
              "weekend": [str(d) for d in form.getlist("weekend")][:7]}
    body = {"country": values["country"] or None, "subdivision": values["subdivision"] or None,
            "closed": parse_closed(values["closed"]), "weekend": values["weekend"]}
    try:
        with tenant_db(services, principal) as session:
            cal = calendar_store.parse_body(values["name"], body)
            _row, created, replanned = calendar_store.put(session, services.store.rules, cal,
                                                          now=services.clock.now(), by=principal.actor[1])
            audit(session, "calendar.put", f"calendar {cal.name}",
                  {**cal.to_json(), "created": created, "schedules_replanned": replanned}, request=request)
    except AlmanacError as refused:
        return _page(request, services, cal=None, stored=False, values=values, status_code=refused.status,
                     error=refused.message)
    if replanned:
        services.wake(principal.tenant_slug)
    flash(request, f"Calendar {cal.name} saved" + (f"; {len(replanned)} schedule(s) replanned." if replanned else "."))
    return redirect(f"/calendars/{cal.name}", request)


@router.get("/calendars/{name}/delete")
def confirm_delete(request: Request, name: str, principal: PagePrincipal, services: ServicesDep) -> Response:
    _need_admin(principal)
    with tenant_db(services, principal) as session:
        _cal, row = calendar_store.find(session, name)
    return render(request, "confirm.html", title=f"Delete calendar “{name}”?",
                  body="Schedules cannot name it afterwards; a calendar a schedule names cannot be deleted.",
                  action=f"/calendars/{name}/delete", back=f"/calendars/{name}", button="Delete calendar")


@router.post("/calendars/{name}/delete")
def delete_calendar(request: Request, name: str, principal: PagePrincipal, services: ServicesDep) -> Response:
    try:
        with tenant_db(services, principal) as session:
            calendar_store.remove(session, name)
            audit(session, "calendar.delete", f"calendar {name}", request=request)
    except AlmanacError as refused:
        if refused.status == 404:
            raise
        with tenant_db(services, principal) as session:
            cal, row = calendar_store.find(session, name)
        return _page(request, services, cal=cal, stored=row is not None, values=_form_values(cal),
                     status_code=refused.status, error=refused.message)
    flash(request, f"Calendar {name} deleted.")
    return redirect("/calendars", request)


def _need_admin(principal: Any) -> None:
    if not principal.has("admin"):
        raise Forbidden(f"This needs the admin role; you are a {principal.role}.")

