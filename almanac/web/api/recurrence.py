"""`POST /api/v1/recurrence/preview` (SPEC section 5): what a rule means and when it fires next."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from almanac.platform import recurrence

from almanac.platform.service import calendar_store
from almanac.web.api.schemas_scheduler import CalendarName, CalendarNote, CalendarPolicy, Instant, calendar_notes
from almanac.web.deps import CurrentPrincipal, ServicesDep, TenantSession, api_router

# Preview changes nothing, so a viewer may use it (the rule builder shows it to everyone).
router = api_router(prefix="/recurrence", tags=["recurrence"], read="viewer", write="viewer")


class PreviewIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # no coercion: see schemas_scheduler.Strict
    # The engine measures the 4 KiB limit in bytes and answers invalid_rule; this only stops absurd bodies.
    rule: str = Field(max_length=16_384)
    timezone: str = Field(default="UTC", max_length=64)
    start: Instant | None = None
    count: int = Field(default=10, ge=1, le=50)
    calendar: CalendarName | None = None
    calendar_policy: CalendarPolicy | None = None


class ShiftOut(BaseModel):
    """An occurrence a DST gap moves: the wall time asked for does not exist that day."""

    scheduled: str = Field(description="The wall-clock time the rule asks for (no offset: it does not exist).")
    runs_at: datetime
    note: str


class PreviewOut(BaseModel):
    input_kind: str
    rrule: str
    description: str
    next: list[datetime]
    shifts: list[ShiftOut] = []
    calendar: str | None = Field(default=None, description="The business calendar the dates follow, if any.")
    calendar_notes: list[CalendarNote] = Field(default=[], description=(
        "One entry per date the business calendar skipped or moved on the way to `next`."))


@router.post("/preview")
def preview(body: PreviewIn, principal: CurrentPrincipal, services: ServicesDep,
            session: TenantSession) -> PreviewOut:
    now = services.clock.now()
    result = recurrence.preview(
        body.rule, body.timezone, start=body.start, now=now, count=body.count,
        min_interval_s=principal.min_interval_seconds,
        calendar_for=lambda rec: calendar_store.named(session, rec, body.calendar, body.calendar_policy, now),
    )
    shifts = [ShiftOut(scheduled=s.wall.isoformat(), runs_at=s.runs_at, note=s.note) for s in result.shifts]
    return PreviewOut(input_kind=result.input_kind, rrule=result.rrule, description=result.description,
                      next=result.next, shifts=shifts,
                      calendar=result.business.calendar.name if result.business else None,
                      calendar_notes=calendar_notes(result.notes))
