"""Run history as people read it: one row per occurrence, its retries folded into it.

An occurrence's row is its newest attempt (so its status is the occurrence's outcome so far);
a manual run has no occurrence and is a row of its own. Keyset paging on the newest attempt's
id, newest first. Read-only, in the caller's tenant session.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, exists, func, or_, select
from sqlalchemy.orm import Session, aliased

from almanac.platform.store.models import Job, Run, Schedule

LIKE_ESCAPE = "\\"


@dataclass
class RunFilter:
    schedule_id: int | None = None
    job_key: str | None = None
    root_key: str | None = None
    status: str | None = None
    statuses: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    text: str | None = None


@dataclass
class OccurrenceRow:
    run: Run  # the newest attempt
    attempts: list[Run] = field(default_factory=list)  # oldest first, the newest included


def _like(text: str) -> str:
    escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _newest_only() -> Any:
    """True for a run no later attempt of the same occurrence follows (manual runs always)."""
    later = aliased(Run)
    return or_(
        Run.occurrence_id.is_(None),
        ~exists().where(and_(later.occurrence_id == Run.occurrence_id, later.id > Run.id)),
    )


def _where(f: RunFilter) -> list[Any]:
    conds: list[Any] = []
    if f.schedule_id is not None:
        conds.append(Run.schedule_id == f.schedule_id)
    if f.job_key:
        conds.append(Run.job_key == f.job_key)
    if f.root_key:
        conds.append(Run.job_key.in_(select(Job.key).where(Job.root_key == f.root_key)))
    if f.status:
        conds.append(Run.status == f.status)
    if f.statuses:
        conds.append(Run.status.in_(f.statuses))
    if f.since is not None:
        conds.append(Run.created_at >= f.since)
    if f.until is not None:
        conds.append(Run.created_at < f.until)
    if f.text:
        pattern = _like(f.text)
        names = select(Schedule.id).where(func.lower(Schedule.name).like(pattern, escape=LIKE_ESCAPE))
        conds.append(or_(
            func.lower(Run.error).like(pattern, escape=LIKE_ESCAPE),
            func.lower(Run.job_key).like(pattern, escape=LIKE_ESCAPE),
            Run.schedule_id.in_(names),
        ))
    return conds


def list_occurrences(s: Session, f: RunFilter, *, limit: int = 50,
                     before_id: int | None = None) -> tuple[list[OccurrenceRow], int | None]:
    """A page of occurrence rows, newest first, and the id to continue before (None: no more)."""
    query = select(Run).where(_newest_only(), *_where(f)).order_by(Run.id.desc()).limit(limit + 1)
    if before_id is not None:
        query = query.where(Run.id < before_id)
    newest = list(s.execute(query).scalars())
    more = len(newest) > limit
    newest = newest[:limit]
    rows = _with_attempts(s, newest)
    return rows, (newest[-1].id if more and newest else None)


def _with_attempts(s: Session, newest: list[Run]) -> list[OccurrenceRow]:
    occurrence_ids = [r.occurrence_id for r in newest if r.occurrence_id is not None and r.attempt > 1]
    by_occ: dict[int, list[Run]] = {}
    if occurrence_ids:
        query = select(Run).where(Run.occurrence_id.in_(occurrence_ids)).order_by(Run.attempt, Run.id)
        for run in s.execute(query).scalars():
            by_occ.setdefault(run.occurrence_id or 0, []).append(run)
    return [OccurrenceRow(run=r, attempts=by_occ.get(r.occurrence_id or 0, [r])) for r in newest]


def occurrence_row(s: Session, run: Run) -> OccurrenceRow:
    """The current row of `run`'s occurrence: its newest attempt, which may be a later retry."""
    if run.occurrence_id is not None:
        query = select(Run).where(Run.occurrence_id == run.occurrence_id).order_by(Run.id.desc()).limit(1)
        run = s.execute(query).scalar_one()
    return _with_attempts(s, [run])[0]
