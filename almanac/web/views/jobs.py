"""One-off jobs: list with next run and last status, create or replace by key, cancel."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

from fastapi import Request
from fastapi.responses import Response
from pydantic import ValidationError as PydanticError

from almanac.errors import AlmanacError, Forbidden, NotFound, ValidationError
from almanac.platform.decisions import policies
from almanac.platform.service import resources as service
from almanac.platform.store.models import JOB_PENDING
from almanac.platform.recurrence.zones import get_zone
from almanac.sandbox.capabilities import job_key_problem
from almanac.web.api.schemas_scheduler import JobIn
from almanac.web.audit import audit
from almanac.web.views import queries, run_detail
from almanac.web.views.common import (
    PagePrincipal, ServicesDep, flash, page_router, redirect, render, tenant_db, validation_message, viewer_zone,
)

router = page_router(read="viewer", write="editor")
KEY_MAX = 200


@router.get("/jobs")
def jobs_page(request: Request, principal: PagePrincipal, services: ServicesDep, state: str = "",
              root: str = "") -> Response:
    root = root.strip()[:KEY_MAX]
    with tenant_db(services, principal) as session:
        jobs = queries.list_jobs(session, state=state or None, root_key=root or None)
        rows = [(job, service.job_next_run_at(session, job)) for job in jobs]
        last = queries.last_status_by_job(session)
        scripts = queries.script_names(session)
    return render(request, "jobs.html", rows=rows, last=last, scripts=scripts, state=state, root=root)


@router.get("/jobs/chain/{root}")
def chain_page(request: Request, root: str, principal: PagePrincipal, services: ServicesDep) -> Response:
    """A chain of "check again later" jobs from its root through every follow-up, each with its outcome."""
    with tenant_db(services, principal) as session:
        steps = run_detail.chain(session, root)
        scripts = queries.script_names(session)
    if not steps:
        raise NotFound(f"There is no chain with the root {root!r}.")
    return render(request, "job_chain.html", root=root, steps=steps, scripts=scripts,
                  root_run=policies.run_of_chain(root))


def _form_page(request: Request, principal: PagePrincipal, services: ServicesDep, values: dict[str, Any],
               status_code: int = 200, error: str | None = None) -> Response:
    with tenant_db(services, principal) as session:
        scripts = queries.script_names(session)
    return render(request, "job_form.html", status_code=status_code, form=values, scripts=scripts, error=error)


@router.get("/jobs/new")
def new_job_page(request: Request, principal: PagePrincipal, services: ServicesDep, key: str = "") -> Response:
    if not principal.has("editor"):
        raise Forbidden(f"This needs the editor role; you are a {principal.role}.")
    values = {"key": key[:KEY_MAX], "script_id": "", "run_at": "", "timezone": str(viewer_zone(request)),
              "payload": "null", "max_attempts": "3"}
    if key:
        with tenant_db(services, principal) as session:
            job = service.get_job(session, key)
            zone = ZoneInfo(values["timezone"])
            values.update(script_id=str(job.script_id), payload=job.payload, max_attempts=str(job.max_attempts),
                          run_at=job.run_at.astimezone(zone).strftime("%Y-%m-%dT%H:%M"))
    return _form_page(request, principal, services, values)


def _validated(values: dict[str, Any]) -> JobIn:
    problem = job_key_problem(values["key"])
    if problem:  # the API's grammar: a key every page and route can address
        raise ValidationError(f"Key: {problem}.")
    try:
        run_at = datetime.fromisoformat(values["run_at"])
    except ValueError:
        raise ValidationError("Run at needs a date and time.") from None
    if run_at.tzinfo is None:
        run_at = run_at.replace(tzinfo=get_zone(values["timezone"]))
    try:
        payload = json.loads(values["payload"] or "null")
    except json.JSONDecodeError as exc:
        raise ValidationError(f"Payload is not JSON: {exc.msg}.") from None
    # Form fields are text: the API's model, without its strictness about types
    return JobIn.model_validate(dict(script_id=values["script_id"] or 0, run_at=run_at, payload=payload,
                                     max_attempts=values["max_attempts"] or 3), strict=False)


@router.post("/jobs/new")
async def put_job(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    form = await request.form()
    values = {k: str(form.get(k, "")).strip() for k in ("key", "script_id", "run_at", "timezone", "payload",
                                                        "max_attempts")}
    try:
        body = _validated(values)
        with tenant_db(services, principal) as session:
            _job, created = service.put_job(session, values["key"], body.model_dump(), services.clock.now())
            audit(session, f"job.{'create' if created else 'update'}", f"job {values['key']}", body.model_dump(),
                  request=request)
    except (PydanticError, AlmanacError) as exc:
        reason = validation_message(exc) if isinstance(exc, PydanticError) else exc.message
        status = exc.status if isinstance(exc, AlmanacError) else 422
        return _form_page(request, principal, services, values, status, reason)
    services.wake(principal.tenant_slug)
    flash(request, f"Job “{values['key']}” {'created' if created else 'replaced'}.")
    return redirect(f"/jobs/{quote(values['key'], safe='')}")


@router.get("/jobs/{key}")
def job_page(request: Request, key: str, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        job = service.get_job(session, key)
        next_run = service.job_next_run_at(session, job)
        runs, _ = service.list_runs(session, job_key=key, limit=20)
        script = queries.script_names(session).get(job.script_id, f"#{job.script_id}")
    return render(request, "job.html", job=job, next_run=next_run, runs=runs, script=script,
                  payload=json.loads(job.payload), pending=job.state == JOB_PENDING,
                  root_run=policies.run_of_chain(job.root_key))


@router.post("/jobs/{key}/cancel")
def cancel_job(request: Request, key: str, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        service.cancel_job(session, key, services.clock.now())
        audit(session, "job.cancel", f"job {key}", request=request)
    services.wake(principal.tenant_slug)
    flash(request, f"Job “{key}” cancelled.")
    return redirect(f"/jobs/{quote(key, safe='')}")
