"""Planning occurrences inside a caller's transaction: schedules' next times and jobs' upserts.

Used by the API's service (creating, changing, pausing schedules; jobs by key)
and by the store (planning the next occurrence in the claim transaction,
applying a run's `schedule.at` upserts in its finishing transaction). Inserts
of occurrences are `ON CONFLICT DO NOTHING` on the unique keys, so any number of
processes may plan the same time: one row survives.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache
from typing import Any, Protocol

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy.orm import Session

from almanac.db import insert_ignore, upsert_insert
# Imported with this module, not at the first claim: a worker's first claim pass in a burst spent
# 60-160 ms importing the recurrence engine while it held the locks of the rows it had picked.
from almanac.platform import recurrence
from almanac.platform.store.executemany import Bulk, CopyRows
from almanac.platform.store.models import (
    JOB_CANCELLED, JOB_DONE, JOB_PENDING, PLANNED, QUEUED, Job, Occurrence, Schedule,
)

O = Occurrence.__table__
J = Job.__table__
S = Schedule.__table__
CATCH_UP_CAP = 2000  # occurrences considered by one misfire pass; the next pass takes the rest


class Rules(Protocol):
    """The recurrence operations the scheduler needs (filled by almanac.platform.recurrence)."""

    def next_after(self, rrule: str, input_kind: str, after: datetime) -> datetime | None:
        """The first occurrence strictly after `after`, or None."""

    def times_between(self, rrule: str, input_kind: str, after: datetime, until: datetime, cap: int) -> list[datetime]:
        """Occurrences in (after, until], ascending, at most `cap`."""


class RecurrenceRules:
    """Rules backed by the recurrence package; parsed rules are cached by their canonical text."""

    @staticmethod
    @lru_cache(maxsize=4096)
    def _load(rrule: str, input_kind: str) -> tuple[Any, recurrence.business.Business | None]:
        """The rule and the business calendar its stored text carries (recurrence/business.py)."""
        canonical, business = recurrence.business.detach(rrule)
        return recurrence.load(canonical, input_kind), business

    # Both answers depend only on their arguments, and a burst asks the same question many times
    # (a herd of schedules sharing a rule and a due time, claimed in one pass at one `now`): the
    # expansion, ~1 ms each in Python, is then done once per pass instead of once per schedule.
    @staticmethod
    @lru_cache(maxsize=8192)
    def next_after(rrule: str, input_kind: str, after: datetime) -> datetime | None:
        rule, business = RecurrenceRules._load(rrule, input_kind)
        if business is None:
            when = recurrence.next_after(rule, after)
        else:  # the run's time, moved or not, is the occurrence's key (decision 0181)
            when = recurrence.business.next_run_after(rule, business, after)
        return None if when is None else when.astimezone(timezone.utc)

    def times_between(self, rrule: str, input_kind: str, after: datetime, until: datetime, cap: int) -> list[datetime]:
        return list(self._times_between(rrule, input_kind, after, until, cap))  # a copy: callers may change theirs

    @staticmethod
    @lru_cache(maxsize=8192)
    def _times_between(rrule: str, input_kind: str, after: datetime, until: datetime, cap: int) -> tuple[datetime, ...]:
        # Usually nothing (or one time) was missed: expand in doubling chunks and stop once past
        # `until`, rather than expanding `cap` dates on every claim (that cost ~24 ms a claim).
        rule, business = RecurrenceRules._load(rrule, input_kind)
        if business is not None:
            return RecurrenceRules._runs_between(rule, business, after, until, cap)
        found: list[datetime] = []
        start, chunk = after, 4
        while len(found) < cap:
            # occurrences() is inclusive of `start`; this contract is not.
            times = recurrence.occurrences(rule, after=start, count=chunk + 1)
            fresh = [t for t in times if t > start]
            found.extend(t.astimezone(timezone.utc) for t in fresh if t <= until)
            if len(times) < chunk + 1 or not fresh or fresh[-1] > until:
                break
            start, chunk = fresh[-1], min(chunk * 2, cap + 1)
        return tuple(found[:cap])


    @staticmethod
    def _runs_between(rule: Any, business: recurrence.business.Business, after: datetime, until: datetime,
                      cap: int) -> tuple[datetime, ...]:
        found: list[datetime] = []
        for rolled in recurrence.business.runs(rule, business, after):
            if rolled.when is None or rolled.when <= after:
                continue
            if rolled.when > until or len(found) >= cap:
                break
            found.append(rolled.when.astimezone(timezone.utc))
        return tuple(found)


def occurrence_values(now: datetime, when: datetime, priority: int, trigger: str, **owner: Any) -> dict[str, Any]:
    return dict(
        scheduled_for=when, due_at=when, priority=priority, trigger=trigger, status=PLANNED,
        attempt=0, created_at=now, **owner,
    )


def plan_next(session: Session, schedule: Any, after: datetime, now: datetime, rules: Rules) -> datetime | None:
    """Plan the schedule's first occurrence strictly after `after`; record it as next_run_at."""
    when = rules.next_after(schedule.rrule, schedule.input_kind, after)
    if when is not None:
        insert_ignore(session, O, occurrence_values(
            now, when, schedule.priority, "schedule", schedule_id=schedule.id, schedule_version=schedule.version,
        ))
    session.execute(update(S).where(S.c.id == schedule.id).values(next_run_at=when))
    return when


def plan_next_many(session: Session, plans: list[tuple[Any, datetime]], now: datetime,
                   rules: Rules) -> list[datetime | None]:
    """`plan_next` for many schedules: one INSERT ... ON CONFLICT DO NOTHING and one UPDATE, each an executemany.

    Applied in order, so a schedule planned twice ends with the last one's next_run_at. Answers each
    plan's next time, in order.
    """
    rows, nexts = next_occurrences(plans, now, rules)
    conn = session.connection()
    if rows:
        _insert_ignore_many(conn.dialect.name).executemany(conn, rows)
    _SET_NEXT_RUN.executemany(conn, nexts)
    return [row["b_next"] for row in nexts]


def next_occurrences(plans: list[tuple[Any, datetime]], now: datetime,
                     rules: Rules) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What `plan_next_many` writes: the occurrences' values and each schedule's next_run_at ("b_" keys)."""
    rows, nexts = [], []
    for schedule, after in plans:
        when = rules.next_after(schedule.rrule, schedule.input_kind, after)
        if when is not None:
            values = occurrence_values(now, when, schedule.priority, "schedule",
                                       schedule_id=schedule.id, schedule_version=schedule.version)
            rows.append({"b_" + name: value for name, value in values.items()})
        nexts.append({"b_id": schedule.id, "b_next": when})
    return rows, nexts


_SET_NEXT_RUN = Bulk(update(S).where(S.c.id == bindparam("b_id")).values(next_run_at=bindparam("b_next")))
_OCCURRENCE_COLUMNS = ("scheduled_for", "due_at", "priority", "trigger", "status", "attempt", "created_at",
                       "schedule_id", "schedule_version")


def plan_created(session: Session, schedules: list[Any], now: datetime) -> None:
    """`plan_next_many` for schedules inserted in this transaction with their `next_run_at` already
    set (the batch route: `rules.next_after(rrule, input_kind, now)`, known before the INSERT): their
    occurrences only. New schedules have nothing planned to clash with, so on PostgreSQL it is one
    COPY (no ON CONFLICT there); SQLite takes the same INSERT as `plan_next_many`."""
    rows = ((sch.next_run_at, sch.next_run_at, sch.priority, "schedule", PLANNED, 0, now, sch.id, sch.version)
            for sch in schedules if sch.next_run_at is not None)
    conn = session.connection()
    if conn.dialect.name == "postgresql":
        _COPY_OCCURRENCES.write(conn, rows)
    else:
        _insert_ignore_many(conn.dialect.name).executemany(  # no rows: nothing runs
            conn, [{"b_" + name: value for name, value in zip(_OCCURRENCE_COLUMNS, row)} for row in rows])


_COPY_OCCURRENCES = CopyRows(O, _OCCURRENCE_COLUMNS)


@lru_cache(maxsize=2)
def _insert_ignore_many(dialect: str) -> Bulk:
    """INSERT ... ON CONFLICT DO NOTHING of schedules' occurrences (each row's keys prefixed "b_")."""
    values = {name: bindparam("b_" + name) for name in _OCCURRENCE_COLUMNS}
    return Bulk(upsert_insert(dialect)(O).values(values).on_conflict_do_nothing())


def unplan_schedule(session: Session, schedule_id: int) -> None:
    """Drop what is planned or queued for a schedule; a running attempt finishes on its own."""
    session.execute(delete(O).where(O.c.schedule_id == schedule_id, O.c.status.in_((PLANNED, QUEUED))))
    session.execute(update(S).where(S.c.id == schedule_id).values(next_run_at=None))


def replan_schedule(session: Session, schedule: Schedule, now: datetime, rules: Rules) -> datetime | None:
    """After a change of rule or timing (the caller bumped `version`): replace what is planned."""
    session.flush()
    unplan_schedule(session, schedule.id)
    if not schedule.enabled:
        return None
    return plan_next(session, schedule, now, now, rules)


def trigger_now(session: Session, schedule: Schedule, now: datetime) -> None:
    """Plan an extra occurrence of the schedule at `now` (run now)."""
    insert_ignore(session, O, occurrence_values(
        now, now, schedule.priority, "trigger", schedule_id=schedule.id, schedule_version=schedule.version,
    ))


class LookUp:
    """`upsert_job(existing=LookUp)` (the default): look the job up by key, locked."""


def upsert_job(
    session: Session, key: str, fields: dict[str, Any], *, now: datetime,
    depth: int = 0, root_key: str | None = None, created_by_run_id: int | None = None,
    existing: Job | None | type[LookUp] = LookUp,
) -> Job:
    """Create or replace the job with this key (SPEC section 8).

    `fields` holds script_id, run_at, payload (JSON text), expire_after_s,
    max_attempts, priority. A new run_at replaces the planned occurrence; the
    same run_at after the job ran plans nothing (the unique key on (job,
    time) keeps a job from running twice for one time). A caller that already holds the job's row
    (locked FOR UPDATE, or None for no such job) passes it as `existing`.
    """
    if existing is LookUp:
        existing = session.execute(select(Job).where(Job.key == key).with_for_update()).scalar_one_or_none()
    job = existing if isinstance(existing, Job) else None
    fresh = job is None
    if job is None:
        job = Job(key=key, state=JOB_PENDING, created_at=now, **fields)
        session.add(job)
        changed = True
    else:
        changed = job.run_at != fields["run_at"] or job.state == JOB_CANCELLED
        for name, value in fields.items():
            setattr(job, name, value)
    job.root_key = root_key or key
    job.depth, job.created_by_run_id, job.updated_at = depth, created_by_run_id, now
    session.flush()
    if changed:
        if not fresh:  # a new job has nothing planned to drop
            session.execute(delete(O).where(O.c.job_id == job.id, O.c.status.in_((PLANNED, QUEUED))))
        added = insert_ignore(session, O, occurrence_values(now, job.run_at, job.priority, "job", job_id=job.id))
        job.state = JOB_PENDING if added else JOB_DONE
    else:
        session.execute(update(O).where(O.c.job_id == job.id, O.c.status == PLANNED).values(priority=job.priority))
    return job


def plan_jobs(session: Session, jobs: list[Any], now: datetime, *, fresh: bool = False) -> set[int]:
    """`upsert_job`'s planning for many jobs with a new `run_at` (the batch API): drop what was planned,
    plan the new time; a job that already ran at that time (the unique key) is done. One DELETE and one
    INSERT ... ON CONFLICT DO NOTHING for all of them; `fresh`: new jobs, nothing to drop. The ids of
    the jobs planned; each object's `state` is set to match."""
    if not jobs:
        return set()
    ids = [job.id for job in jobs]
    rows = [occurrence_values(now, job.run_at, job.priority, "job", job_id=job.id) for job in jobs]
    conn = session.connection()
    if fresh:  # new jobs: nothing to drop, nothing to clash with; one pipelined executemany
        _insert_job_occurrences(conn.dialect.name).executemany(
            conn, [{"b_" + name: value for name, value in row.items()} for row in rows])
        added = set(ids)
    else:
        session.execute(delete(Occurrence).where(Occurrence.job_id.in_(ids),
                                                 Occurrence.status.in_((PLANNED, QUEUED))))
        insert = upsert_insert(conn.dialect.name)
        added = set(session.execute(insert(O).values(rows).on_conflict_do_nothing()
                                    .returning(O.c.job_id)).scalars())
    for job in jobs:
        job.state = JOB_PENDING if job.id in added else JOB_DONE
    return added


@lru_cache(maxsize=2)
def _insert_job_occurrences(dialect: str) -> Bulk:
    names = ("scheduled_for", "due_at", "priority", "trigger", "status", "attempt", "created_at", "job_id")
    return Bulk(upsert_insert(dialect)(O).values({name: bindparam("b_" + name) for name in names})
                .on_conflict_do_nothing())


def reprioritise_jobs(session: Session, jobs: list[Any]) -> None:
    """`upsert_job` without a new time, for many jobs: the planned occurrence takes the job's priority."""
    if jobs:
        conn = session.connection()
        _SET_JOB_PRIORITY.executemany(conn, [{"b_job": job.id, "b_priority": job.priority} for job in jobs])


_SET_JOB_PRIORITY = Bulk(update(Occurrence).where(Occurrence.job_id == bindparam("b_job"),
                                                  Occurrence.status == PLANNED)
                         .values(priority=bindparam("b_priority")))


def cancel_job(session: Session, job: Job, now: datetime) -> None:
    session.execute(delete(O).where(O.c.job_id == job.id, O.c.status.in_((PLANNED, QUEUED))))
    job.state, job.updated_at = JOB_CANCELLED, now

