"""The dashboard: charts of the last 30 days, what is failing or paused, upcoming runs, recent failures.

A tenant with no run yet sees its first steps instead of empty charts (docs/decisions/0190).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from fastapi import Request
from fastapi.responses import Response
from sqlalchemy import select

from almanac.delivery.models import Delivery, Target
from almanac.platform.store import quotas
from almanac.platform.store.models import Job, Run, Schedule, Script
from almanac.tenants.auth import list_tokens
from almanac.web.views import charts, history, queries
from almanac.web.views.common import PagePrincipal, ServicesDep, page_router, render, tenant_db, viewer_zone

router = page_router()
WINDOW = timedelta(days=30)
ROW_CAP = 50_000  # the charts read at most this many of the newest runs (the page says when it did)


@router.get("/")
def dashboard(request: Request, principal: PagePrincipal, services: ServicesDep) -> Response:
    now, zone = services.clock.now(), viewer_zone(request)
    with tenant_db(services, principal) as session:
        rows = session.execute(
            select(Run.created_at, Run.status, Run.duration_ms, Run.id, Run.occurrence_id, Run.schedule_id, Run.error)
            .where(Run.created_at >= now - WINDOW).order_by(Run.id.desc()).limit(ROW_CAP)
        ).all()
        upcoming = queries.upcoming(session, now, limit=10)
        failures, _ = history.list_occurrences(session, history.RunFilter(statuses=charts.FAILED), limit=10)
        names = queries.schedule_names(session)
        paused = list(session.execute(select(Schedule).where(Schedule.enabled.is_(False)).order_by(Schedule.name)
                                      .limit(50)).scalars())
        deliveries = _delivery_failures(session) if principal.has("admin") else []
        usage = quotas.report(quotas.of(session), quotas.use(session, now))
        ever_ran = bool(rows) or session.execute(select(Run.id).limit(1)).first() is not None
    if not ever_ran:  # nothing to chart yet: the first steps take the charts' place
        return render(request, "dashboard.html", steps=first_steps(services, principal), upcoming=upcoming,
                      rows=failures, names=names, paused=paused, deliveries=deliveries, failing=[],
                      quotas=[(QUOTA_LABELS[name], q) for name, q in usage.items()])
    days = charts.per_day(((r[0], r[1], r[2]) for r in rows), now, zone)
    failing = charts.failing_schedules((r[3], r[4], r[5], r[1], r[6]) for r in rows if r[5] is not None)
    return render(request, "dashboard.html", steps=None, upcoming=upcoming, rows=failures, names=names, days=days,
                  bars=charts.bar_chart(days), lines=charts.line_chart(days), groups=[g for g, _ in charts.GROUPS],
                  capped=len(rows) >= ROW_CAP, failing=failing[:10], paused=paused, deliveries=deliveries,
                  total=sum(d.total for d in days),
                  quotas=[(QUOTA_LABELS[name], q) for name, q in usage.items()])


QUOTA_LABELS = {
    "kv_mb": "Data (MiB)", "kv_keys": "Data keys", "schedules": "Schedules", "pending_jobs": "Pending jobs",
    "runs_per_day": "Runs today", "cpu_seconds_per_day": "CPU-seconds today",
}


def _delivery_failures(session: object) -> list[tuple[Delivery, str]]:
    query = (select(Delivery, Target.name).join(Target, Target.id == Delivery.target_id)
             .where(Delivery.status.in_(("dead", "failed"))).order_by(Delivery.id.desc()).limit(10))
    return [(d, name) for d, name in session.execute(query).all()]  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Step:
    """One first step on a new tenant's dashboard: where to do it, who may, and whether it is done."""

    title: str
    href: str
    role: str
    done: bool
    hint: str


def first_steps(services: ServicesDep, principal: PagePrincipal) -> list[Step]:
    """Write a script from a template, give it a rule, see it run, create a token: each marked done
    from the tenant's own rows, so the list reads as progress rather than as a fixed tour."""
    with tenant_db(services, principal) as session:
        has = {m.__name__: session.execute(select(m.id).limit(1)).first() is not None
               for m in (Script, Schedule, Job, Run)}
    with services.db.shared_session() as shared:
        tokens = bool(list_tokens(shared, principal.tenant_id))
    return [
        Step("Write a script from a template", "/scripts/new?template=abandoned-cart", "admin", has["Script"],
             "A starter comes with a sample payload, so its first run works as it is."),
        Step("Give it a rule", "/schedules/new", "editor", has["Schedule"] or has["Job"],
             "Type it in plain English, such as \"every weekday at 9am\"; the next dates show as you type."),
        Step("See it run", "/runs", "viewer", has["Run"],
             "Every run lists what it was given, its output, logs and how late it started."),
        Step("Create a token for the API", "/tokens", "admin", tokens,
             "For scripts of your own systems that plan jobs or read runs (see /docs)."),
    ]
