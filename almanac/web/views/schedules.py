"""Schedules: list with next run and last status, create and edit with the rule builder,
pause / resume, trigger now, delete with confirmation.

Every change goes through `almanac.platform.service.resources` with the same checks as
the API (the request body is validated by the API's own `ScheduleIn`), and the
timer is woken after the unit of work has committed.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from pydantic import ValidationError as PydanticError

from almanac import jsonsafe
from almanac.errors import AlmanacError, Conflict, Forbidden
from almanac.platform import recurrence
from almanac.platform.timer import admission
from almanac.platform.service import resources as service
from almanac.platform.timer import trial
from almanac.platform.runner import broken
from almanac.platform.store.models import Schedule
from almanac.tenants.auth import Principal
from almanac.web.api.schemas_scheduler import RunNowIn, ScheduleIn
from almanac.web import run_now
from almanac.web.audit import audit
from almanac.web.views import calendar, calendar_grid, charts, queries
from almanac.web.views.common import (
    PagePrincipal, ServicesDep, flash, is_htmx, page_router, payload_box, redirect, render, tenant_db, validation_message,
    viewer_zone,
)
from almanac.web.views.rules import RuleForm, builder_context, form_for_rule, recurrence_zone

router = page_router(read="viewer", write="editor")
CALENDAR_WEEKS = 4  # what the schedule's page shows of its calendar unless asked (1-6)
POLICY_DEFAULTS = {"misfire": "run_once", "overlap": "skip", "max_attempts": "3", "retry_backoff_s": "10",
                   "catchup_window_s": "86400", "expire_after_s": "", "priority": "0"}


def describe(sch: Schedule) -> str:
    canonical, business = recurrence.business.detach(sch.rrule)
    return recurrence.business.describe_with(recurrence.load(canonical, sch.input_kind), business)


@router.get("/schedules")
def schedules_page(request: Request, principal: PagePrincipal, services: ServicesDep, q: str = "",
                   show: str = "") -> Response:
    q, show = q.strip()[:200], show if show in SHOW else ""
    with tenant_db(services, principal) as session:
        schedules = service.list_schedules(session)
        last = queries.last_status_by_schedule(session)
        scripts = queries.script_names(session)
        streaks = {f.schedule_id: f for f in charts.failing_schedules(queries.schedule_run_history(session))}
    rows = [(sch, describe(sch)) for sch in schedules if _matches(sch, q, show, streaks)]
    return render(request, "schedules.html", rows=rows, last=last, scripts=scripts, streaks=streaks, q=q, show=show,
                  total=len(schedules))


SHOW = ("active", "paused", "failing")


def _matches(sch: Schedule, q: str, show: str, streaks: dict[int, Any]) -> bool:
    if q and q.lower() not in f"{sch.name}\n{sch.rule_text}\n{sch.pause_note or ''}".lower():
        return False
    return (not show or (show == "active" and sch.enabled) or (show == "paused" and not sch.enabled)
            or (show == "failing" and sch.id in streaks))


def _need_editor(principal: Principal) -> None:
    """A form page is only for those who may send it (the gate refuses their POST anyway)."""
    if not principal.has("editor"):
        raise Forbidden(f"This needs the editor role; you are a {principal.role}.")


def _form_page(request: Request, principal: Principal, services: ServicesDep, *, sch: Schedule | None,
               values: dict[str, Any], rf: RuleForm, status_code: int = 200, error: str | None = None,
               fill_note: str | None = None) -> Response:
    with tenant_db(services, principal) as session:
        scripts = queries.script_names(session)
        context = builder_context(rf, principal, services.clock.now(), viewer_zone(request), fill_note, session)
    return render(request, "schedule_form.html", status_code=status_code, sch=sch, form=values, scripts=scripts,
                  error=error, **context)


@router.get("/schedules/new")
def new_schedule_page(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    _need_editor(principal)
    zone = str(viewer_zone(request))
    values = {"name": "", "script_id": "", "payload": "{}", "enabled": True, **POLICY_DEFAULTS}
    return _form_page(request, principal, services, sch=None, values=values, rf=RuleForm(timezone=zone))


async def _read(request: Request) -> tuple[dict[str, Any], RuleForm]:
    form = await request.form()
    values = {k: str(form.get(k, "")).strip() for k in ("name", "script_id", "payload", *POLICY_DEFAULTS)}
    values["enabled"] = form.get("enabled") == "on"
    return values, RuleForm.from_form(form)


def _validated(values: dict[str, Any], rf: RuleForm) -> dict[str, Any]:
    """The API's own body model checks the form (InvalidRule / ValueError / pydantic errors escape)."""
    try:
        payload = json.loads(values["payload"] or "{}")  # as a script's run: an empty payload is {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"Payload is not JSON: {exc.msg}.") from None
    body = ScheduleIn.model_validate(dict(  # form fields are text: the API's model without its type strictness
        name=values["name"], script_id=values["script_id"] or 0, rule=rf.rule_text(), timezone=rf.timezone,
        start=rf.start_at(), payload=payload, enabled=values["enabled"], misfire=values["misfire"],
        overlap=values["overlap"], max_attempts=values["max_attempts"], retry_backoff_s=values["retry_backoff_s"],
        catchup_window_s=values["catchup_window_s"], expire_after_s=values["expire_after_s"] or None,
        priority=values["priority"] or 0, calendar=rf.calendar or None,
        calendar_policy=rf.calendar_policy if rf.calendar else None,
    ), strict=False)
    return body.model_dump()


def _reason(exc: Exception) -> str:
    if isinstance(exc, PydanticError):
        return validation_message(exc)
    if isinstance(exc, AlmanacError):
        return exc.message
    return str(exc)


@router.post("/schedules/new")
async def create_schedule(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    values, rf = await _read(request)
    try:
        fields = _validated(values, rf)
        with tenant_db(services, principal) as session:
            sch = service.create_schedule(session, services.store.rules, fields, now=services.clock.now(),
                                          min_interval_s=principal.min_interval_seconds)
            session.flush()
            schedule_id = sch.id
            audit(session, "schedule.create", f"schedule {sch.id}", fields, request=request)
    except (PydanticError, AlmanacError, ValueError) as exc:
        status = exc.status if isinstance(exc, AlmanacError) else 422
        return _form_page(request, principal, services, sch=None, values=values, rf=rf, status_code=status,
                          error=_reason(exc))
    services.wake(principal.tenant_slug)  # after the commit, so the timer sees the new plan
    flash(request, f"Schedule “{fields['name']}” saved.")
    return redirect(f"/schedules/{schedule_id}")


@router.get("/schedules/{schedule_id}")
def schedule_page(request: Request, schedule_id: int, principal: PagePrincipal, services: ServicesDep,
                  weeks: int = CALENDAR_WEEKS) -> Response:
    return _schedule_view(request, schedule_id, principal, services, weeks)


def _schedule_view(request: Request, schedule_id: int, principal: Principal, services: ServicesDep,
                   weeks: int = CALENDAR_WEEKS, status_code: int = 200, **extra: Any) -> Response:
    now = services.clock.now()
    with tenant_db(services, principal) as session:
        sch = service.get_schedule(session, schedule_id)
        runs, _ = service.list_runs(session, schedule_id=schedule_id, limit=10)
        script = queries.script_names(session).get(sch.script_id, f"#{sch.script_id}")
        upcoming = service.next_times(sch, now, 10) if sch.enabled else []
    # Its own calendar, in its own zone (that zone's DST days marked), with the calendar page's grid.
    weeks = min(max(weeks, 1), 6)
    zone = recurrence_zone(sch.timezone)
    dates = calendar.grid_dates(now, zone, weeks)
    grid = calendar_grid.build_grid([sch] if sch.enabled else [], [], now, zone, dates,
                                    keep=calendar.PER_DAY_SHOWN, cap=calendar.GRID_CAP)
    return render(request, "schedule.html", status_code, sch=sch, description=describe(sch), runs=runs,
                  script=script, upcoming=upcoming, zone=sch.timezone, payload=json.loads(sch.payload), grid=grid.weeks,
                  left_out=grid.left_out, weeks=weeks, per_day=calendar.PER_DAY_SHOWN,
                  day_href=calendar.day_href(sch.timezone, sch.id), **extra)


@router.post("/schedules/{schedule_id}/try")
async def try_schedule(request: Request, schedule_id: int, principal: PagePrincipal,
                       services: ServicesDep) -> Response:
    """Try with payload: the schedule's script on the (edited) payload, admitted as any run (recorded with
    trigger `trial`, counted against the daily budgets) and waited for without a thread; what it would
    change is shown and never applied (no kv change, no event, no job: `platform.trial`). Audited."""
    text = str((await request.form()).get("payload", "")).strip()
    try:
        payload = RunNowIn(payload=payload_box(text)).payload
    except (ValueError, PydanticError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else _reason(exc)
        return await run_in_threadpool(_trial_answer, request, principal, services, schedule_id, text,
                                       error=f"Payload is not JSON: {reason}")
    script_id = await run_in_threadpool(_schedule_script, services, principal, schedule_id)
    ran = await run_now.run_and_wait(
        request, services, principal.tenant_slug, script_id, payload, trigger=admission.TRIAL,
        event_extra={"scheduleId": schedule_id},
        audit_entry=("schedule.try", f"schedule {schedule_id}", {"payload": payload}))
    outcome = trial.trial_of(ran.admitted.result or broken(RuntimeError("the run was given up")))
    return await run_in_threadpool(_trial_answer, request, principal, services, schedule_id, text, trial=outcome)


def _schedule_script(services: ServicesDep, principal: PagePrincipal, schedule_id: int) -> int:
    with tenant_db(services, principal) as session:
        return service.get_schedule(session, schedule_id).script_id


def _trial_answer(request: Request, principal: Principal, services: ServicesDep, schedule_id: int, payload: str,
                  **result: Any) -> Response:
    status = 422 if "error" in result else 200
    if is_htmx(request):
        return render(request, "_trial_result.html", status, **result)
    return _schedule_view(request, schedule_id, principal, services, status_code=status, trial_payload=payload,
                          trial_result=result)


@router.get("/schedules/{schedule_id}/edit")
def edit_schedule_page(request: Request, schedule_id: int, principal: PagePrincipal,
                       services: ServicesDep) -> Response:
    _need_editor(principal)
    with tenant_db(services, principal) as session:
        sch = service.get_schedule(session, schedule_id)
    values = {"name": sch.name, "script_id": str(sch.script_id), "payload": sch.payload, "enabled": sch.enabled,
              **{k: "" if getattr(sch, k) is None else str(getattr(sch, k)) for k in POLICY_DEFAULTS}}
    rf, note = form_for_rule(sch.rule_text, sch.rrule, sch.input_kind, sch.timezone)
    rf.calendar, rf.calendar_policy = sch.calendar or "", sch.calendar_policy
    return _form_page(request, principal, services, sch=sch, values=values, rf=rf, fill_note=note)


@router.post("/schedules/{schedule_id}/edit")
async def update_schedule(request: Request, schedule_id: int, principal: PagePrincipal,
                          services: ServicesDep) -> Response:
    values, rf = await _read(request)
    try:
        fields = _validated(values, rf)
        with tenant_db(services, principal) as session:
            sch = service.get_schedule(session, schedule_id)
            changes = _changes(sch, fields)
            service.update_schedule(session, services.store.rules, schedule_id, changes,
                                    now=services.clock.now(), min_interval_s=principal.min_interval_seconds)
            audit(session, "schedule.update", f"schedule {schedule_id}", changes, request=request)
    except (PydanticError, AlmanacError, ValueError) as exc:
        if isinstance(exc, AlmanacError) and exc.status == 404:
            raise
        status = exc.status if isinstance(exc, AlmanacError) else 422
        with tenant_db(services, principal) as session:
            sch = service.get_schedule(session, schedule_id)
        return _form_page(request, principal, services, sch=sch, values=values, rf=rf, status_code=status,
                          error=_reason(exc))
    services.wake(principal.tenant_slug)
    flash(request, "Schedule saved.")
    return redirect(f"/schedules/{schedule_id}")


def _changes(sch: Schedule, fields: dict[str, Any]) -> dict[str, Any]:
    """Only what differs: an unchanged rule must not replace what is planned."""
    current = {"name": sch.name, "script_id": sch.script_id, "rule": sch.rule_text, "timezone": sch.timezone,
               "payload": json.loads(sch.payload), "enabled": sch.enabled,
               **{k: getattr(sch, k) for k in POLICY_DEFAULTS},
               "calendar": sch.calendar, "calendar_policy": sch.calendar_policy if sch.calendar else None}
    changes = {k: v for k, v in fields.items() if k != "start" and current.get(k) != v}
    # The edit form shows the rule's own start: sent back unchanged with the same rule, it changes
    # nothing (no replan); with a changed rule it is the start the preview showed, so it is kept.
    start = fields.get("start")
    if start is not None and (start != _start_wall(sch) or "rule" in changes or "timezone" in changes):
        changes["start"] = fields["start"]
    return changes


def _start_wall(sch: Schedule) -> Any:
    try:
        return recurrence.load(sch.rrule, sch.input_kind).start_wall.replace(second=0)
    except AlmanacError:
        return None


def _act(request: Request, principal: Principal, services: ServicesDep, schedule_id: int, action: Any,
         done: str, changes: Any = None) -> Response:
    with tenant_db(services, principal) as session:
        action(session)
        audit(session, "schedule." + request.url.path.rsplit("/", 1)[1], f"schedule {schedule_id}", changes,
              request=request)
    services.wake(principal.tenant_slug)
    flash(request, done)
    return redirect(f"/schedules/{schedule_id}")


async def _note(request: Request, principal: Principal, verb: str) -> str | None:
    """"Paused by ann@example.com: disk full" from the form's optional note; None when it is empty."""
    form = await request.form()
    why = " ".join(str(form.get("note", "")).split())[:400]
    return f"{verb} by {principal.email}: {why}" if why else None


@router.post("/schedules/{schedule_id}/pause")
async def pause(request: Request, schedule_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    note = await _note(request, principal, "Paused")
    return _act(request, principal, services, schedule_id, lambda s: service.set_enabled(
        s, services.store.rules, schedule_id, False, services.clock.now(), note=note),
        "Paused: nothing runs until resumed.", {"note": note} if note else None)


@router.post("/schedules/{schedule_id}/resume")
async def resume(request: Request, schedule_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    note = await _note(request, principal, "Resumed")
    return _act(request, principal, services, schedule_id, lambda s: service.set_enabled(
        s, services.store.rules, schedule_id, True, services.clock.now(), note=note), "Resumed from now on.",
        {"note": note} if note else None)


BULK_MAX = 500


@router.post("/schedules/bulk")
async def bulk(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    """Pause, resume or delete the selected schedules in one unit of work (delete asks first)."""
    form = await request.form()
    action = str(form.get("action", ""))
    ids = [i for i in map(jsonsafe.parse_id, map(str, form.getlist("ids"))) if i is not None][:BULK_MAX]
    if action not in ("pause", "resume", "delete") or not ids:
        flash(request, "Select one or more schedules, then an action.", "bad")
        return redirect("/schedules")
    if action == "delete" and form.get("confirmed") != "yes":
        with tenant_db(services, principal) as session:
            chosen = [service.get_schedule(session, i) for i in ids]
        return render(request, "schedules_bulk_delete.html", chosen=chosen)
    verb = {"pause": "Paused", "resume": "Resumed"}.get(action, "")
    note = await _note(request, principal, verb) if verb else None
    now = services.clock.now()
    with tenant_db(services, principal) as session:
        for schedule_id in ids:  # an id of another tenant is not found: nothing of the batch is kept
            if action == "delete":
                service.delete_schedule(session, schedule_id)
            else:
                service.set_enabled(session, services.store.rules, schedule_id, action == "resume", now, note=note)
            audit(session, f"schedule.{action}", f"schedule {schedule_id}", {"note": note} if note else None,
                  request=request)
    services.wake(principal.tenant_slug)
    done = {"pause": "Paused", "resume": "Resumed", "delete": "Deleted"}[action]
    flash(request, f"{done} {len(ids)} schedule{'s' if len(ids) != 1 else ''}.")
    return redirect("/schedules")


@router.post("/schedules/{schedule_id}/trigger")
def trigger(request: Request, schedule_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    try:
        return _act(request, principal, services, schedule_id, lambda s: service.trigger_schedule(
            s, schedule_id, services.clock.now()), "Triggered: a run starts now; see it under Recent runs.")
    except Conflict as paused:  # a page left open from before the pause: say so where it was asked
        flash(request, paused.message, "bad")
        return redirect(f"/schedules/{schedule_id}")


@router.get("/schedules/{schedule_id}/delete")
def confirm_delete(request: Request, schedule_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    _need_editor(principal)
    with tenant_db(services, principal) as session:
        sch = service.get_schedule(session, schedule_id)
    return render(request, "confirm.html", title=f"Delete schedule “{sch.name}”?",
                  body="Its planned runs are dropped; past runs stay in the history.",
                  action=f"/schedules/{schedule_id}/delete", back=f"/schedules/{schedule_id}",
                  button="Delete schedule")


@router.post("/schedules/{schedule_id}/delete")
def delete(request: Request, schedule_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        service.delete_schedule(session, schedule_id)
        audit(session, "schedule.delete", f"schedule {schedule_id}", request=request)
    services.wake(principal.tenant_slug)
    flash(request, "Schedule deleted.")
    return redirect("/schedules")
