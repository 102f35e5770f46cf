"""Run history (SPEC section 9): newest first, filters, cursor pagination."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import Query
from sqlalchemy import select
from sqlalchemy.orm import Session

from almanac.platform.service import resources as service
from almanac.platform.store.models import RUN_STATUSES, Event, Job, Run
from almanac.web.api.schemas_scheduler import ID_MAX, Instant, RunOut, RunPage, run_out
from almanac.web.deps import TenantSession, api_router

router = api_router(prefix="/runs", tags=["runs"], read="viewer", write="admin")


@router.get("")
def list_runs(
    session: TenantSession,
    schedule_id: int | None = Query(default=None, ge=0, le=ID_MAX),
    job_key: str | None = Query(default=None, max_length=200),
    status: str | None = Query(default=None, pattern="^(" + "|".join(RUN_STATUSES) + ")$"),
    since: Instant | None = None,
    limit: int = Query(default=50, ge=1, le=service.MAX_PAGE),
    cursor: str | None = Query(default=None, max_length=100),
) -> RunPage:
    rows, next_cursor = service.list_runs(session, schedule_id=schedule_id, job_key=job_key, status=status,
                                          since=since, limit=limit, cursor=cursor)
    return RunPage(items=with_links(session, rows), next_cursor=next_cursor)


@router.get("/{run_id}")
def get_run(run_id: int, session: TenantSession) -> RunOut:
    return with_links(session, [service.get_run(session, run_id)])[0]


def with_links(session: Session, rows: Sequence[Run]) -> list[RunOut]:
    """Runs as answered, each with the ids of the events it emitted and its job's chain root
    (SPEC section 9): two queries for the whole page, not two per run."""
    ids = [r.id for r in rows]
    events: dict[int, list[int]] = {}
    if ids:
        for run_id, event_id in session.execute(
                select(Event.run_id, Event.id).where(Event.run_id.in_(ids)).order_by(Event.id)):
            if run_id is not None:  # always, given the filter; the column is nullable
                events.setdefault(run_id, []).append(event_id)
    keys = sorted({r.job_key for r in rows if r.job_key is not None})
    roots = dict(session.execute(select(Job.key, Job.root_key).where(Job.key.in_(keys))).all()) if keys else {}
    return [run_out(r, events.get(r.id), roots.get(r.job_key or "")) for r in rows]
