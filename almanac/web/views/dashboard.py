"""The dashboard: upcoming runs across the tenant's schedules, recent failures, counts by status."""

from __future__ import annotations

from datetime import timedelta

from fastapi import Request
from fastapi.responses import Response

from almanac.platform import quotas
from almanac.platform.models import RUN_STATUSES
from almanac.web.views import queries
from almanac.web.views.common import PagePrincipal, ServicesDep, page_router, render, tenant_db

router = page_router()
COUNT_WINDOW = timedelta(days=7)


@router.get("/")
def dashboard(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    now = services.clock.now()
    with tenant_db(services, principal) as session:
        upcoming = queries.upcoming(session, now, limit=10)
        failures = queries.recent_failures(session, limit=10)
        counts = queries.counts_by_status(session, since=now - COUNT_WINDOW)
        names = queries.schedule_names(session)
        usage = quotas.report(quotas.of(session), quotas.use(session, now))
    ordered = [(status, counts[status]) for status in RUN_STATUSES if counts.get(status)]
    return render(request, "dashboard.html", upcoming=upcoming, failures=failures, counts=ordered, names=names,
                  total=sum(counts.values()), quotas=[(QUOTA_LABELS[name], q) for name, q in usage.items()])


QUOTA_LABELS = {
    "kv_mb": "Data (MiB)", "kv_keys": "Data keys", "schedules": "Schedules", "pending_jobs": "Pending jobs",
    "runs_per_day": "Runs today", "cpu_seconds_per_day": "CPU-seconds today",
}
