"""Read-only queries the pages need and `almanac.platform.service.resources` does not offer (yet).

Each runs in the caller's tenant session, so it sees that tenant only. They
could move into the service layer; they are kept here, read-only, so the
views never write around it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from almanac.platform.store.models import ACTIVE_STATES, Job, Occurrence, Run, Schedule, Script

FAILED_STATUSES = ("failed", "timed_out", "memory_exceeded")


def script_names(s: Session) -> dict[int, str]:
    return dict(s.execute(select(Script.id, Script.name).order_by(Script.name)).all())


def last_status_by_schedule(s: Session) -> dict[int, tuple[str, datetime | None]]:
    """The newest run's status (and end) of each schedule that has run."""
    newest = select(func.max(Run.id)).where(Run.schedule_id.is_not(None)).group_by(Run.schedule_id)
    rows = s.execute(select(Run.schedule_id, Run.status, Run.finished_at).where(Run.id.in_(newest)))
    return {schedule_id: (status, finished) for schedule_id, status, finished in rows}


def last_status_by_job(s: Session) -> dict[str, str]:
    newest = select(func.max(Run.id)).where(Run.job_key.is_not(None)).group_by(Run.job_key)
    return dict(s.execute(select(Run.job_key, Run.status).where(Run.id.in_(newest))).all())


def list_jobs(s: Session, *, state: str | None = None, root_key: str | None = None, limit: int = 200) -> list[Job]:
    query = select(Job).order_by(Job.run_at.desc(), Job.id.desc()).limit(limit)
    if state:
        query = query.where(Job.state == state)
    if root_key:
        query = query.where(Job.root_key == root_key)
    return list(s.execute(query).scalars())


def upcoming(s: Session, now: datetime, limit: int = 10) -> list[dict[str, Any]]:
    """The next planned occurrences across the tenant's schedules and jobs, soonest first."""
    query = (
        select(Occurrence.scheduled_for, Occurrence.schedule_id, Occurrence.job_id, Occurrence.status,
               Schedule.name, Job.key)
        .outerjoin(Schedule, Schedule.id == Occurrence.schedule_id)
        .outerjoin(Job, Job.id == Occurrence.job_id)
        .where(Occurrence.status.in_(ACTIVE_STATES))
        .order_by(Occurrence.scheduled_for, Occurrence.id)
        .limit(limit)
    )
    return [
        {"when": when, "schedule_id": sid, "job_key": key, "name": name or key, "state": state}
        for when, sid, _job_id, state, name, key in s.execute(query)
    ]


def recent_failures(s: Session, limit: int = 10) -> list[Run]:
    query = select(Run).where(Run.status.in_(FAILED_STATUSES)).order_by(Run.id.desc()).limit(limit)
    return list(s.execute(query).scalars())


def counts_by_status(s: Session, since: datetime | None = None) -> dict[str, int]:
    query = select(Run.status, func.count()).group_by(Run.status)
    if since is not None:
        query = query.where(Run.created_at >= since)
    return dict(s.execute(query).all())


def schedule_names(s: Session) -> dict[int, str]:
    return dict(s.execute(select(Schedule.id, Schedule.name).order_by(Schedule.name)).all())


def schedule_run_history(s: Session, limit: int = 5000) -> list[tuple[int, int | None, int, str, str | None]]:
    """The newest runs of schedules as (run id, occurrence id, schedule id, status, error), newest first."""
    query = (select(Run.id, Run.occurrence_id, Run.schedule_id, Run.status, Run.error)
             .where(Run.schedule_id.is_not(None)).order_by(Run.id.desc()).limit(limit))
    return [tuple(row) for row in s.execute(query).all()]  # type: ignore[misc]
