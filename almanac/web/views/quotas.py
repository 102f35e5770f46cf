"""The tenant's quotas page (admin): each limit, today's use of it, and what happens when it is reached.

Read-only: quotas are the operator's to set (`almanac tenant quota`, SPEC section 3), so the
page says how, rather than offering a form a tenant admin could not use.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from almanac.platform.store import quotas
from almanac.web.views.common import PagePrincipal, ServicesDep, page_router, render, tenant_db

router = page_router(read="admin", write="admin")

# (label, what reaching it does), in the order of SPEC section 3.
QUOTAS = {
    "kv_mb": ("Data (MiB)", "a write that would go past it is refused (kv.set rejects with quota_exceeded)"),
    "kv_keys": ("Data keys", "a new key past it is refused (kv.set rejects with quota_exceeded)"),
    "schedules": ("Schedules", "creating one more schedule answers quota_exceeded"),
    "pending_jobs": ("Pending jobs", "planning one more job (API or schedule.at) answers quota_exceeded"),
    "runs_per_day": ("Runs today", "further runs today are recorded skipped, with the reason"),
    "cpu_seconds_per_day": ("CPU-seconds today", "further runs today are recorded skipped, with the reason "
                            "(counted from the runs' durations)"),
}


def rows(report: dict[str, dict[str, int]]) -> list[dict[str, object]]:
    """The report as table rows, with each quota's share used in whole percent (capped at 100 for the meter)."""
    out = []
    for name, (label, effect) in QUOTAS.items():
        q = report[name]
        percent = 100 * q["used"] // q["limit"] if q["limit"] else 100
        out.append({"name": name, "label": label, "effect": effect, "used": q["used"], "limit": q["limit"],
                    "percent": percent, "meter": min(percent, 100), "bytes": q.get("used_bytes")})
    return out


@router.get("/quotas")
def quotas_page(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    with tenant_db(services, principal) as session:
        report = quotas.report(quotas.of(session), quotas.use(session, services.clock.now()))
    return render(request, "quotas.html", rows=rows(report), slug=principal.tenant_slug)
