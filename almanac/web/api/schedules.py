"""Schedules (SPEC section 7): editors create and change them; pause, resume, trigger, next dates."""

from __future__ import annotations

from typing import Any

from fastapi import BackgroundTasks, Query, Response
from pydantic import TypeAdapter

from almanac import jsonsafe
from almanac.platform import recurrence
from almanac.platform.service import batch_writes as batch
from almanac.platform.service import calendar_store
from almanac.platform.service import resources as service
from almanac.platform.store.models import Schedule
from almanac.web.api.schemas_batch import ScheduleBatchIn, ScheduleBatchOut
from almanac.web.api.schemas_scheduler import NextOut, calendar_notes, ScheduleIn, ScheduleOut, SchedulePatch
from almanac.web.audit import audit
from almanac.web.deps import CurrentPrincipal, ServicesDep, TenantSession, api_router

_UNREAD: Any = object()  # `_fields` reads the stored payload itself
_ANSWER = TypeAdapter(dict[str, list[dict[str, Any]]])  # a batch's answer: ScheduleBatchOut's JSON

router = api_router(prefix="/schedules", tags=["schedules"], read="viewer", write="editor")


def _describe(sch: Schedule) -> str:
    canonical, business = recurrence.business.detach(sch.rrule)
    return recurrence.business.describe_with(recurrence.load(canonical, sch.input_kind), business)


def _out(sch: Schedule, description: str | None = None) -> ScheduleOut:
    return ScheduleOut(**_fields(sch, description if description is not None else _describe(sch)))


def _fields(sch: Schedule, description: str, payload: Any = _UNREAD) -> dict[str, Any]:
    """A schedule's answer (`ScheduleOut`) as a dict; `payload` if the caller has read the stored one."""
    return dict(
        id=sch.id, name=sch.name, script_id=sch.script_id, rule=sch.rule_text, input_kind=sch.input_kind,
        rrule=recurrence.business.detach(sch.rrule)[0], description=description, timezone=sch.timezone,
        payload=jsonsafe.loads_stored(sch.payload) if payload is _UNREAD else payload, enabled=sch.enabled,
        misfire=sch.misfire, catchup_window_s=sch.catchup_window_s, overlap=sch.overlap,
        expire_after_s=sch.expire_after_s, max_attempts=sch.max_attempts, retry_backoff_s=sch.retry_backoff_s,
        priority=sch.priority, pause_after_failures=sch.pause_after_failures, paused_reason=sch.paused_reason,
        next_run_at=sch.next_run_at, created_at=sch.created_at, updated_at=sch.updated_at,
        calendar=sch.calendar, calendar_policy=sch.calendar_policy,
    )


def _changed(session: TenantSession, sch: Schedule, principal: CurrentPrincipal, services: ServicesDep,
             background: BackgroundTasks) -> ScheduleOut:
    session.flush()
    session.refresh(sch)
    services.wake_at_commit(session, background, principal.tenant_slug)
    return _out(sch)


@router.get("")
def list_schedules(session: TenantSession) -> list[ScheduleOut]:
    return [_out(sch) for sch in service.list_schedules(session)]


@router.post("", status_code=201)
def create_schedule(body: ScheduleIn, session: TenantSession, principal: CurrentPrincipal, services: ServicesDep,
                    background: BackgroundTasks) -> ScheduleOut:
    sch = service.create_schedule(session, services.store.rules, body.model_dump(), now=services.clock.now(),
                                  min_interval_s=principal.min_interval_seconds)
    audit(session, "schedule.create", f"schedule {sch.id}", body.model_dump())
    return _changed(session, sch, principal, services, background)


@router.post("/batch", status_code=201, response_model=ScheduleBatchOut)
def create_schedules(body: ScheduleBatchIn, session: TenantSession, principal: CurrentPrincipal,
                     services: ServicesDep, background: BackgroundTasks) -> Response:
    items = body.model_dump()["schedules"]  # one call into pydantic's core, not one per item
    created = batch.create_schedules(session, services.store.rules, items, now=services.clock.now(),
                                     min_interval_s=principal.min_interval_seconds)
    audit(session, "schedule.batch_create", f"{len(created)} schedules",
          {"ids": [created[0].id, created[-1].id] if created else [], "count": len(created)})
    services.wake_at_commit(session, background, principal.tenant_slug)
    # A batch often repeats one rule and one payload: describe and read each once. The answer is our
    # own rows: encoded as they are (`_fields` keeps ScheduleOut's order; a test compares the items
    # with GET's answers), for validating 1,000 ScheduleOut first cost twice the encoding.
    described: dict[str, str] = {}
    payloads: dict[str, Any] = {}
    answer = []
    for sch in created:
        if sch.rrule not in described:
            described[sch.rrule] = _describe(sch)
        if sch.payload not in payloads:
            payloads[sch.payload] = jsonsafe.loads_stored(sch.payload)
        answer.append(_fields(sch, described[sch.rrule], payloads[sch.payload]))
    return Response(_ANSWER.dump_json({"items": answer}), status_code=201, media_type="application/json")


@router.get("/{schedule_id}")
def get_schedule(schedule_id: int, session: TenantSession) -> ScheduleOut:
    return _out(service.get_schedule(session, schedule_id))


@router.patch("/{schedule_id}")
def update_schedule(schedule_id: int, body: SchedulePatch, session: TenantSession, principal: CurrentPrincipal,
                    services: ServicesDep, background: BackgroundTasks) -> ScheduleOut:
    changes = body.model_dump(exclude_unset=True)
    sch = service.update_schedule(session, services.store.rules, schedule_id, changes, now=services.clock.now(),
                                  min_interval_s=principal.min_interval_seconds)
    audit(session, "schedule.update", f"schedule {schedule_id}", changes)
    return _changed(session, sch, principal, services, background)


@router.delete("/{schedule_id}", status_code=204)
def delete_schedule(schedule_id: int, session: TenantSession) -> None:
    service.delete_schedule(session, schedule_id)
    audit(session, "schedule.delete", f"schedule {schedule_id}")


@router.post("/{schedule_id}/pause")
def pause(schedule_id: int, session: TenantSession, principal: CurrentPrincipal, services: ServicesDep,
          background: BackgroundTasks) -> ScheduleOut:
    sch = service.set_enabled(session, services.store.rules, schedule_id, False, services.clock.now())
    audit(session, "schedule.pause", f"schedule {schedule_id}")
    return _changed(session, sch, principal, services, background)


@router.post("/{schedule_id}/resume")
def resume(schedule_id: int, session: TenantSession, principal: CurrentPrincipal, services: ServicesDep,
           background: BackgroundTasks) -> ScheduleOut:
    sch = service.set_enabled(session, services.store.rules, schedule_id, True, services.clock.now())
    audit(session, "schedule.resume", f"schedule {schedule_id}")
    return _changed(session, sch, principal, services, background)


@router.post("/{schedule_id}/trigger", status_code=202)
def trigger(schedule_id: int, session: TenantSession, principal: CurrentPrincipal, services: ServicesDep,
            background: BackgroundTasks) -> ScheduleOut:
    sch = service.trigger_schedule(session, schedule_id, services.clock.now())
    audit(session, "schedule.trigger", f"schedule {schedule_id}")
    return _changed(session, sch, principal, services, background)


@router.get("/{schedule_id}/next")
def next_dates(schedule_id: int, session: TenantSession, services: ServicesDep,
               count: int = Query(default=10, ge=1, le=50)) -> NextOut:
    sch = service.get_schedule(session, schedule_id)
    now = services.clock.now()
    rolled = calendar_store.upcoming(sch, now, count)
    return NextOut(next=[r.when for r in rolled if r.when is not None and r.when >= now],
                   calendar_notes=calendar_notes(rolled))
