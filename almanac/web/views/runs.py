"""Run history, one row per occurrence, with filters, search and live rows; one run's page; run again."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from almanac import jsonsafe
from almanac.errors import Conflict, ValidationError
from almanac.platform.service import resources as service
from almanac.platform.store.models import RUN_STATUSES
from almanac.web.api.schemas_scheduler import run_out
from almanac.web import run_now
from almanac.web.audit import audit
from almanac.web.views import history, queries, run_detail
from almanac.web.views.common import (
    PagePrincipal, ServicesDep, flash, page_router, redirect, render, tenant_db, viewer_zone,
)

router = page_router(read="viewer", write="editor")
PAGE_SIZE = 50
FIELDS = ("q", "schedule_id", "job_key", "root", "status", "since", "until")


def _filters(request: Request) -> dict[str, str]:
    """The filter form's fields as typed (empty ones are no filter)."""
    q = request.query_params
    return {k: q.get(k, "").strip()[:200] for k in FIELDS}


def _as_filter(filters: dict[str, str], request: Request) -> history.RunFilter:
    """The filters as a query; a bad value is a 422 page naming it."""
    out = history.RunFilter(job_key=filters["job_key"] or None, root_key=filters["root"] or None,
                            text=filters["q"] or None)
    if filters["schedule_id"]:
        out.schedule_id = jsonsafe.parse_id(filters["schedule_id"])
        if out.schedule_id is None:
            raise ValidationError("Schedule must be a schedule's number.")
    if filters["status"]:
        if filters["status"] not in RUN_STATUSES:
            raise ValidationError(f"Status must be one of {', '.join(RUN_STATUSES)}.")
        out.status = filters["status"]
    out.since = _instant(filters["since"], "Since", request)
    out.until = _instant(filters["until"], "Until", request)
    return out


def _instant(text: str, label: str, request: Request) -> datetime | None:
    """A wall-clock time in the viewer's zone (as the page shows times), or one with an offset, in UTC."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
        when = when.replace(tzinfo=viewer_zone(request)) if when.tzinfo is None else when
        return when.astimezone(timezone.utc)
    except (ValueError, OverflowError):
        raise ValidationError(f"{label} must be a date and time such as 2026-11-21T09:00.") from None


def _before(cursor: str | None) -> int | None:
    if not cursor:
        return None
    before = service.decode_cursor(cursor)
    if not before:
        raise ValidationError("The cursor is not one this page gave out.")
    return before


@router.get("/runs")
def runs_page(request: Request, principal: PagePrincipal, services: ServicesDep, cursor: str | None = None) -> Response:
    filters = _filters(request)
    query = _as_filter(filters, request)
    with tenant_db(services, principal) as session:
        rows, before = history.list_occurrences(session, query, limit=PAGE_SIZE, before_id=_before(cursor))
        names = queries.schedule_names(session)
    kept = {k: v for k, v in filters.items() if v}
    older = "/runs?" + urlencode({**kept, "cursor": service.encode_cursor(before)}) if before else None
    newest = "/runs?" + urlencode(kept) if cursor else None
    return render(request, "runs.html", rows=rows, names=names, filters=filters, statuses=RUN_STATUSES,
                  older=older, newest=newest)


@router.get("/runs/{run_id}/row")
def run_row(request: Request, run_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    """One occurrence's row, for the list's live update (htmx polls the rows still running)."""
    with tenant_db(services, principal) as session:
        row = history.occurrence_row(session, service.get_run(session, run_id))
        names = queries.schedule_names(session)
    return render(request, "_occurrence_row.html", row=row, names=names)


@router.get("/runs/{run_id}")
def run_page(request: Request, run_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        row = service.get_run(session, run_id)
        ctx = run_detail.run_context(session, row)
        run = run_out(row)
        names = queries.schedule_names(session)
        scripts = queries.script_names(session)
    zone = ctx.schedule.timezone if ctx.schedule is not None else None
    return render(request, "run.html", run=run, row=row, ctx=ctx, names=names, scripts=scripts, rule_zone=zone,
                  event_json=None if ctx.event is None else json.dumps(ctx.event, indent=2, ensure_ascii=False))


@router.post("/runs/{run_id}/again")
async def run_again(request: Request, run_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    """A schedule's run: trigger the schedule now. A job's: run its script now with the job's payload
    (admitted as a run now is: `web.run_now`)."""
    try:
        row, ctx = await run_in_threadpool(_again_target, request, run_id, principal, services)
    except Conflict as paused:  # the schedule was paused after the page was shown
        flash(request, paused.message, "bad")
        return redirect(f"/runs/{run_id}")
    if ctx.schedule is not None:
        services.wake(principal.tenant_slug)
        flash(request, f"Triggered “{ctx.schedule.name}”: a run starts now.")
        return redirect(f"/schedules/{ctx.schedule.id}")
    if ctx.job is None or row.script_id is None:
        raise ValidationError("Only a run of a schedule or of a job can be run again; run the script from its page.")
    ran = await run_now.run_and_wait(
        request, services, principal.tenant_slug, row.script_id, json.loads(ctx.job.payload),
        audit_entry=("script.run", f"script {row.script_id}", {"job": ctx.job.key, "again_of_run": run_id}))
    flash(request, f"Ran the script of job “{ctx.job.key}” again with its payload.")
    return redirect(f"/runs/{ran.run.id}")


def _again_target(request: Request, run_id: int, principal: PagePrincipal, services: ServicesDep) -> Any:
    """The run and what it ran; a schedule's is triggered now (in this unit of work)."""
    with tenant_db(services, principal) as session:
        row = service.get_run(session, run_id)
        ctx = run_detail.run_context(session, row)
        if ctx.schedule is not None:
            service.trigger_schedule(session, ctx.schedule.id, services.clock.now())
            audit(session, "schedule.trigger", f"schedule {ctx.schedule.id}", {"again_of_run": run_id},
                  request=request)
    return row, ctx
