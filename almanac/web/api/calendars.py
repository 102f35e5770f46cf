"""Business calendars (SPEC section 5): any member reads them, admins store and delete them.

A name the tenant has not stored that is a place the holiday library knows ("DE", "DE-BY",
"US-NY") reads as that place's built-in calendar (`builtin: true`); see platform/service/calendar_store.py.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from fastapi import BackgroundTasks, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from almanac.platform.service import calendar_store
from almanac.platform.store.models import Calendar
from almanac.platform.recurrence.calendars import MAX_CLOSED, MAX_LABEL, WEEKDAY_NAMES, BusinessCalendar
from almanac.web.api.schemas_scheduler import Strict
from almanac.web.audit import audit
from almanac.web.deps import CurrentPrincipal, ServicesDep, TenantSession, api_router

router = api_router(prefix="/calendars", tags=["calendars"], read="viewer", write="admin")
Name = Path(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
            description="1 to 64 letters, digits, '.', '_' or '-'; a place code such as DE-BY names a built-in "
                        "calendar unless the tenant stored one of that name")
_EXAMPLE: dict[str, Any] = {"country": "DE", "subdivision": "BY", "weekend": ["saturday", "sunday"],
            "closed": [{"first": "2026-12-24", "last": "2026-12-31", "label": "Winter shutdown"}]}


class ClosedIn(Strict):
    first: str = Field(max_length=10, description="the first closed day, YYYY-MM-DD")
    last: str | None = Field(default=None, max_length=10, description="the last closed day (default: first)")
    label: str | None = Field(default=None, max_length=MAX_LABEL, description="why it is closed (shown in previews)")


class CalendarIn(Strict):
    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"example": _EXAMPLE})
    country: str | None = Field(default=None, max_length=8, description="ISO 3166 code the holiday library knows")
    subdivision: str | None = Field(default=None, max_length=16, description="a subdivision of the country, e.g. BY")
    closed: list[ClosedIn] = Field(default=[], max_length=MAX_CLOSED, description="the tenant's own closed days")
    weekend: list[str] = Field(default=["saturday", "sunday"], max_length=7, description="weekday names")


class ClosedOut(BaseModel):
    first: date
    last: date
    label: str


class CalendarOut(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"name": "office", **_EXAMPLE, "builtin": False,
                                                             "updated_at": "2026-11-23T09:00:00Z",
                                                             "updated_by": "ann@example.com"}})
    name: str
    country: str | None
    subdivision: str | None
    closed: list[ClosedOut]
    weekend: list[str]
    builtin: bool = Field(description="a place's public holidays, not stored by the tenant")
    updated_at: datetime | None = None
    updated_by: str | None = None


class CalendarList(BaseModel):
    items: list[CalendarOut] = Field(description="the tenant's stored calendars by name (built-in ones are not listed)")


def calendar_out(cal: BusinessCalendar, row: Calendar | None) -> CalendarOut:
    return CalendarOut(
        name=cal.name, country=cal.country, subdivision=cal.subdivision,
        closed=[ClosedOut(first=c.first, last=c.last, label=c.label) for c in cal.closed],
        weekend=[WEEKDAY_NAMES[d] for d in sorted(cal.weekend)], builtin=row is None,
        updated_at=row.updated_at if row else None, updated_by=row.updated_by if row else None)


def _row_out(row: Calendar) -> CalendarOut:
    cal, _ = calendar_store.find_row(row)
    return calendar_out(cal, row)


@router.get("")
def list_calendars(session: TenantSession) -> CalendarList:
    return CalendarList(items=[_row_out(row) for row in calendar_store.listing(session)])


@router.get("/{name}")
def get_calendar(session: TenantSession, name: str = Name) -> CalendarOut:
    cal, row = calendar_store.find(session, name)
    return calendar_out(cal, row)


@router.put("/{name}", responses={201: {"description": "Created", "model": CalendarOut}})
def put_calendar(body: CalendarIn, session: TenantSession, services: ServicesDep, principal: CurrentPrincipal,
                 response: Response, background: BackgroundTasks, name: str = Name) -> CalendarOut:
    data: dict[str, Any] = body.model_dump(exclude_none=True)
    cal = calendar_store.parse_body(name, data)
    row, created, replanned = calendar_store.put(session, services.store.rules, cal, now=services.clock.now(),
                                                 by=principal.actor[1])
    audit(session, "calendar.put", f"calendar {name}", {**cal.to_json(), "created": created,
                                                         "schedules_replanned": replanned})
    if replanned:
        services.wake_at_commit(session, background, principal.tenant_slug)
    response.status_code = 201 if created else 200
    return calendar_out(cal, row)


@router.delete("/{name}", status_code=204)
def delete_calendar(session: TenantSession, name: str = Name) -> None:
    calendar_store.remove(session, name)
    audit(session, "calendar.delete", f"calendar {name}")
