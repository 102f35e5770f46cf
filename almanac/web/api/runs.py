"""Run history (SPEC section 9): newest first, filters, cursor pagination."""

from __future__ import annotations


from fastapi import Query

from almanac.platform import service
from almanac.platform.models import RUN_STATUSES
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
    return RunPage(items=[run_out(r) for r in rows], next_cursor=next_cursor)


@router.get("/{run_id}")
def get_run(run_id: int, session: TenantSession) -> RunOut:
    return run_out(service.get_run(session, run_id))
