"""Run history with filters (schedule, job, status, time), and one run's page."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import Response

from almanac.errors import ValidationError
from almanac.platform import service
from almanac.platform.models import RUN_STATUSES
from almanac.web.api.schemas_scheduler import run_out
from almanac.web.views import queries
from almanac.web.views.common import PagePrincipal, ServicesDep, page_router, render, tenant_db, viewer_zone

router = page_router(read="viewer", write="editor")
PAGE_SIZE = 50


def _filters(request: Request) -> dict[str, str]:
    """The filter form's fields as typed (empty ones are no filter)."""
    q = request.query_params
    return {k: q.get(k, "").strip() for k in ("schedule_id", "job_key", "status", "since")}


def _as_query(filters: dict[str, str], request: Request) -> dict[str, Any]:
    """The filters as service.list_runs arguments; a bad value is a 422 page naming it."""
    out: dict[str, Any] = {}
    if filters["schedule_id"]:
        if not filters["schedule_id"].isdigit():
            raise ValidationError("Schedule must be a schedule's number.")
        out["schedule_id"] = int(filters["schedule_id"])
    if filters["job_key"]:
        out["job_key"] = filters["job_key"][:200]
    if filters["status"]:
        if filters["status"] not in RUN_STATUSES:
            raise ValidationError(f"Status must be one of {', '.join(RUN_STATUSES)}.")
        out["status"] = filters["status"]
    if filters["since"]:
        try:
            since = datetime.fromisoformat(filters["since"])
        except ValueError:
            raise ValidationError("Since must be a date and time such as 2026-11-21T09:00.") from None
        # The field is a wall-clock time in the viewer's zone, as the page shows times.
        out["since"] = since.replace(tzinfo=viewer_zone(request)) if since.tzinfo is None else since
        out["since"] = out["since"].astimezone(timezone.utc)
    return out


@router.get("/runs")
def runs_page(request: Request, principal: PagePrincipal, services: ServicesDep, cursor: str | None = None) -> Response:
    filters = _filters(request)
    query = _as_query(filters, request)
    with tenant_db(services, principal) as session:
        runs, next_cursor = service.list_runs(session, limit=PAGE_SIZE, cursor=cursor, **query)
        names = queries.schedule_names(session)
    older = None
    if next_cursor:
        older = "/runs?" + urlencode({**{k: v for k, v in filters.items() if v}, "cursor": next_cursor})
    return render(request, "runs.html", runs=runs, names=names, filters=filters, statuses=RUN_STATUSES,
                  older=older)


@router.get("/runs/{run_id}")
def run_page(request: Request, run_id: int, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        run = run_out(service.get_run(session, run_id))
        names = queries.schedule_names(session)
        scripts = queries.script_names(session)
    return render(request, "run.html", run=run, names=names, scripts=scripts)
