"""`Store` on SQL: the same statements on SQLite (embedded) and PostgreSQL (scale-out).

Safety against several processes comes from the database, never from locks in
memory: SQLite serializes writers (BEGIN IMMEDIATE); on PostgreSQL the due rows
are read `FOR UPDATE SKIP LOCKED`, so two claimers take disjoint rows. Either
way each claim is a compare-and-set on the occurrence (status and attempt as
read) followed by the insert of its run row, unique on (occurrence, attempt).

Both ends work in batches, for throughput: a claim transaction decides row by
row (policies) but claims the runnable rows with one executemany compare-and-set,
one multi-row INSERT of their runs and one bulk plan of next occurrences;
`finish_many` records many attempts in one transaction, each still fenced by its
own lease token and its effects applied only if that fence held.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, func, select, tuple_, update
from sqlalchemy.orm import Session

from almanac.db import Database
from almanac.platform import planning, policies
from almanac.platform.effects import RunEffects
from almanac.platform.models import (
    DONE, JOB_CANCELLED, JOB_DONE, JOB_PENDING, KV, PLANNED, QUEUED, RUNNING,
    Event, Job, Occurrence, Run, Schedule, Script, ScriptVersion,
)
from almanac.platform.store import Claim, ClaimBatch, Outcome

log = logging.getLogger("almanac.scheduler")

Finish = tuple[Claim, Outcome, "RunEffects | None", datetime]  # what finish_many records, per attempt

O, R, J, S = Occurrence.__table__, Run.__table__, Job.__table__, Schedule.__table__
KVT, EV, SC, SV = KV.__table__, Event.__table__, Script.__table__, ScriptVersion.__table__

ENDINGS = {
    "succeeded": "the script returned",
    "failed": "the script threw an error",
    "timed_out": "the script ran over its time limit",
    "memory_exceeded": "the script went over its memory limit",
}


def schedule_policy(row: Any) -> policies.Policy:
    return policies.Policy(
        misfire=row.misfire, catchup_window_s=row.catchup_window_s, overlap=row.overlap,
        expire_after_s=row.expire_after_s, max_attempts=row.max_attempts, retry_backoff_s=row.retry_backoff_s,
    )


def job_policy(row: Any) -> policies.Policy:
    return policies.Policy(overlap="allow", expire_after_s=row.expire_after_s, max_attempts=row.max_attempts)


# The hot path's statements, built once: SQLAlchemy caches their compiled form, and a list of
# parameter sets runs them as one executemany.
_CLAIM_CAS = update(O).where(
    O.c.id == bindparam("b_id"), O.c.status == bindparam("b_status"), O.c.attempt == bindparam("b_attempt"),
).values(status=RUNNING, attempt=bindparam("b_new_attempt"), lease_token=bindparam("b_token"),
         lease_until=bindparam("b_lease"), due_at=bindparam("b_lease"))
_CLAIM_RUN_ID = update(O).where(O.c.id == bindparam("b_id")).values(run_id=bindparam("b_run_id"))
_INSERT_RUNS = R.insert().returning(R.c.id, sort_by_parameter_order=True)
_FINISH_RUN = update(R).where(R.c.id == bindparam("b_id"), R.c.lease_token == bindparam("b_token")).values(
    status=bindparam("b_status"), reason=bindparam("b_reason"), started_at=bindparam("b_started"),
    finished_at=bindparam("b_finished"), output=bindparam("b_output"), error=bindparam("b_error"),
    error_line=bindparam("b_error_line"), logs=bindparam("b_logs"), duration_ms=bindparam("b_duration"),
)
_FINISH_JOB = update(J).where(
    J.c.id == bindparam("b_id"), J.c.state == JOB_PENDING, J.c.run_at == bindparam("b_run_at"),
).values(state=JOB_DONE, updated_at=bindparam("b_now"))


@dataclass(frozen=True)
class _Script:
    id: int
    timeout_ms: int
    memory_mb: int
    version: int
    source: str


@dataclass(frozen=True)
class _Pending:
    """A runnable occurrence of this claim transaction, claimed in bulk at its end."""

    row: Any
    owner: Any
    script: Any
    policy: policies.Policy
    token: str
    lease: datetime


class _Batch:
    """The rows one claim transaction works on, loaded with one query per table."""

    def __init__(self, store: SqlStore, s: Session, tenant: str, rows: list[Any]) -> None:
        sids = {r.schedule_id for r in rows if r.schedule_id is not None}
        jids = {r.job_id for r in rows if r.job_id is not None}
        self.schedules = {r.id: r for r in s.execute(select(S).where(S.c.id.in_(sids)))} if sids else {}
        self.jobs = {r.id: r for r in s.execute(select(J).where(J.c.id.in_(jids)))} if jids else {}
        # Running attempts of these schedules (for overlap), kept current as this batch claims and recovers.
        self.running: dict[int, dict[int, datetime]] = {}
        if sids:
            for r in s.execute(select(O.c.id, O.c.schedule_id, O.c.lease_until).where(
                    O.c.schedule_id.in_(sids), O.c.status == RUNNING)):
                self.running.setdefault(r.schedule_id, {})[r.id] = r.lease_until
        script_ids = {r.script_id for r in [*self.schedules.values(), *self.jobs.values()]}
        self.scripts = store._scripts(s, tenant, script_ids)
        self.pending: list[_Pending] = []
        self.plans: list[tuple[Any, datetime]] = []  # (schedule, after): next occurrences to plan
        self.claims: list[Claim] = []
        self.recorded: dict[str, int] = {}

    def busy_until(self, schedule_id: int, occurrence_id: int) -> datetime | None:
        """The earliest lease end among the schedule's other running attempts, or None."""
        leases = [lease for oid, lease in self.running.get(schedule_id, {}).items() if oid != occurrence_id]
        return min(leases) if leases else None


class SqlStore:
    def __init__(self, db: Database, rules: planning.Rules | None = None, *, lease_margin_s: float | None = None):
        self.db = db
        self.rules = rules or planning.RecurrenceRules()
        self.lease_margin_s = policies.LEASE_MARGIN_S if lease_margin_s is None else lease_margin_s
        self.is_postgres = not db.is_sqlite
        # Script versions never change once written: their source is read once per process.
        self._sources: dict[tuple[str, int, int], str] = {}
        self._sources_lock = threading.Lock()

    def _scripts(self, s: Session, tenant: str, script_ids: set[int]) -> dict[int, _Script]:
        """The current version of each script, its source from the in-process cache when known."""
        if not script_ids:
            return {}
        rows = s.execute(select(SC.c.id, SC.c.timeout_ms, SC.c.memory_mb, SC.c.current_version)
                         .where(SC.c.id.in_(script_ids))).all()
        with self._sources_lock:
            missing = [(r.id, r.current_version) for r in rows if (tenant, r.id, r.current_version) not in self._sources]
        if missing:
            found = s.execute(select(SV.c.script_id, SV.c.version, SV.c.source).where(
                SV.c.script_id.in_([sid for sid, _ in missing]),
                tuple_(SV.c.script_id, SV.c.version).in_(missing))).all()
            with self._sources_lock:
                if len(self._sources) > 10_000:
                    self._sources.clear()
                self._sources.update({(tenant, r.script_id, r.version): r.source for r in found})
        with self._sources_lock:
            return {r.id: _Script(r.id, r.timeout_ms, r.memory_mb, r.current_version,
                                  self._sources[(tenant, r.id, r.current_version)])
                    for r in rows if (tenant, r.id, r.current_version) in self._sources}

    # -- claiming -------------------------------------------------------------------

    def claim_due(self, tenant: str, now: datetime, limit: int) -> ClaimBatch:
        with self.db.tenant_session(tenant) as s:
            query = (
                select(O).where(O.c.due_at <= now)
                .order_by(O.c.priority.desc(), O.c.due_at, O.c.id).limit(limit)
            )
            if self.is_postgres:
                query = query.with_for_update(skip_locked=True)
            rows = s.execute(query).all()
            batch = _Batch(self, s, tenant, rows)
            for row in rows:
                if row.status == RUNNING:
                    row = self._recover(s, batch, row, now)  # the retry, if any, is claimed right away
                if row is None:
                    continue
                if row.schedule_id is not None:
                    self._schedule_due(s, tenant, batch, row, now)
                else:
                    self._job_due(s, tenant, batch, row, now)
            self._flush(s, tenant, batch, now)
        return ClaimBatch(batch.claims, len(rows), len(rows) >= limit, sorted(batch.recorded.items()))

    def _cas(self, s: Session, row: Any, **values: Any) -> bool:
        """Change an occurrence only if nobody changed it since we read it."""
        cond = (O.c.id == row.id) & (O.c.status == row.status) & (O.c.attempt == row.attempt)
        return s.execute(update(O).where(cond).values(**values)).rowcount == 1

    def _drop(self, s: Session, row: Any) -> None:
        s.execute(delete(O).where(O.c.id == row.id, O.c.status == row.status, O.c.attempt == row.attempt))

    def _record(self, s: Session, batch: _Batch, row: Any, when: datetime, status: str, reason: str,
                now: datetime, *, own: bool) -> None:
        """A history row for an occurrence that did not run (skipped, expired, failed before start)."""
        owner = batch.schedules.get(row.schedule_id) or batch.jobs.get(row.job_id)
        s.execute(R.insert().values(
            occurrence_id=row.id if own else None, schedule_id=row.schedule_id,
            job_key=batch.jobs[row.job_id].key if row.job_id in batch.jobs else None,
            script_id=owner.script_id if owner else None, trigger=row.trigger, scheduled_for=when,
            created_at=now, finished_at=now, status=status, reason=reason[:200],
            attempt=row.attempt + 1 if own else 1,
        ))
        batch.recorded[status] = batch.recorded.get(status, 0) + 1
        log.info("run.%s", status, extra={"event": f"run.{status}", "occurrence_id": row.id,
                                          "schedule_id": row.schedule_id, "scheduled_for": when.isoformat(),
                                          "reason": reason})

    def _finish_occurrence(self, s: Session, batch: _Batch, row: Any, now: datetime) -> None:
        if self._cas(s, row, status=DONE, due_at=None, lease_token=None, lease_until=None):
            if row.job_id is not None:
                s.execute(update(J).where(J.c.id == row.job_id, J.c.state == JOB_PENDING).values(
                    state=JOB_DONE, updated_at=now))

    def _recover(self, s: Session, batch: _Batch, row: Any, now: datetime) -> Any:
        """A running attempt whose lease lapsed: its process died. Fail it, retry if attempts remain."""
        owner = batch.schedules.get(row.schedule_id) if row.schedule_id else batch.jobs.get(row.job_id)
        max_attempts = owner.max_attempts if owner is not None else row.attempt
        retry = row.attempt < max_attempts
        cond = (O.c.id == row.id) & (O.c.status == RUNNING) & (O.c.lease_token == row.lease_token)
        values = dict(status=PLANNED, due_at=now) if retry else dict(status=DONE, due_at=None)
        if s.execute(update(O).where(cond).values(lease_token=None, lease_until=None, **values)).rowcount != 1:
            return None
        batch.running.get(row.schedule_id, {}).pop(row.id, None)
        reason = "its lease lapsed: the process running it stopped" + (", retried" if retry else "")
        s.execute(update(R).where(R.c.occurrence_id == row.id, R.c.attempt == row.attempt,
                                  R.c.status == RUNNING).values(status="failed", reason=reason, finished_at=now))
        if not retry and row.job_id is not None:
            s.execute(update(J).where(J.c.id == row.job_id, J.c.state == JOB_PENDING).values(state=JOB_DONE))
        if row.schedule_id is not None:
            self._release_queued(s, row.schedule_id, now)
        batch.recorded["lease_lapsed"] = batch.recorded.get("lease_lapsed", 0) + 1
        log.warning("run.lease_lapsed", extra={"event": "run.lease_lapsed", "occurrence_id": row.id,
                                                "attempt": row.attempt, "retry": retry})
        return s.execute(select(O).where(O.c.id == row.id)).one() if retry else None

    def _release_queued(self, s: Session, schedule_id: int, now: datetime) -> None:
        s.execute(update(O).where(O.c.schedule_id == schedule_id, O.c.status == QUEUED).values(due_at=now))

    def _schedule_due(self, s: Session, tenant: str, batch: _Batch, row: Any, now: datetime) -> None:
        sch = batch.schedules.get(row.schedule_id)
        if sch is None or not sch.enabled or row.schedule_version != sch.version:
            self._drop(s, row)  # planned under an old rule, or the schedule is gone / paused
            return
        policy = schedule_policy(sch)
        if row.status == PLANNED and row.trigger == "schedule" and row.attempt == 0:
            if not self._expand_misfire(s, batch, row, sch, policy, now):
                return
        if policies.is_expired(policy, row.scheduled_for, now, row.attempt + 1):
            self._record(s, batch, row, row.scheduled_for, "expired", "not started within expire_after_s", now,
                         own=True)
            self._finish_occurrence(s, batch, row, now)
            return
        busy = batch.busy_until(sch.id, row.id)
        decision = policies.decide_overlap(policy, busy is not None, catch_up=row.trigger == "catchup")
        if decision == "skip":
            self._record(s, batch, row, row.scheduled_for, "skipped", "the previous run was still running", now,
                         own=True)
            self._finish_occurrence(s, batch, row, now)
        elif decision == "queue":
            self._cas(s, row, status=QUEUED, due_at=busy)
        else:
            self._claim(s, tenant, batch, row, sch, policy, now)

    def _expand_misfire(self, s: Session, batch: _Batch, row: Any, sch: Any, policy: policies.Policy,
                        now: datetime) -> bool:
        """Apply `misfire` to the schedule's times up to now and plan its next occurrence.

        Returns True when this occurrence itself is to run.
        """
        later = self.rules.times_between(sch.rrule, sch.input_kind, row.scheduled_for, now, planning.CATCH_UP_CAP)
        due = [row.scheduled_for, *later]
        plan = policies.plan_misfire(policy, due, now)
        for status, times, reason in (
            ("expired", plan.expired, "older than catchup_window_s when the platform came back"),
            ("skipped", plan.skipped, f"missed while the platform was down (misfire={policy.misfire})"),
        ):
            for when in times[: policies.MAX_MISSED_RECORDED]:
                self._record(s, batch, row, when, status, reason, now, own=when == row.scheduled_for)
            if len(times) > policies.MAX_MISSED_RECORDED:
                log.warning("run.missed_not_recorded", extra={"event": "run.missed_not_recorded",
                            "schedule_id": sch.id, "status": status, "count": len(times)})
        for when in plan.run:
            if when != row.scheduled_for:
                values = planning.occurrence_values(
                    now, when, sch.priority, "catchup", schedule_id=sch.id, schedule_version=sch.version)
                planning.insert_ignore(s, O, {**values, "due_at": now})  # due at once, oldest first
        batch.plans.append((sch, due[-1]))  # planned with the others' at the end of the transaction
        if row.scheduled_for in plan.run:
            return True
        self._finish_occurrence(s, batch, row, now)
        return False

    def _job_due(self, s: Session, tenant: str, batch: _Batch, row: Any, now: datetime) -> None:
        job = batch.jobs.get(row.job_id)
        if job is None or job.state == JOB_CANCELLED or job.run_at != row.scheduled_for:
            self._drop(s, row)  # replaced by a newer upsert, or cancelled
            return
        policy = job_policy(job)
        if policies.is_expired(policy, row.scheduled_for, now, row.attempt + 1):
            self._record(s, batch, row, row.scheduled_for, "expired", "not started within expire_after_s", now,
                         own=True)
            self._finish_occurrence(s, batch, row, now)
            return
        self._claim(s, tenant, batch, row, job, policy, now)

    def _claim(self, s: Session, tenant: str, batch: _Batch, row: Any, owner: Any, policy: policies.Policy,
               now: datetime) -> None:
        script = batch.scripts.get(owner.script_id)
        if script is None:
            self._record(s, batch, row, row.scheduled_for, "failed", "its script was deleted", now, own=True)
            self._finish_occurrence(s, batch, row, now)
            return
        lease = policies.lease_until(now, script.timeout_ms, self.lease_margin_s)
        batch.pending.append(_Pending(row, owner, script, policy, uuid.uuid4().hex, lease))
        if row.schedule_id is not None:
            batch.running.setdefault(row.schedule_id, {})[row.id] = lease

    def _flush(self, s: Session, tenant: str, batch: _Batch, now: datetime) -> None:
        """Plan the next occurrences and claim the runnable ones, a few statements for the whole batch.

        Each claim is still a compare-and-set on its occurrence (status and attempt as
        read); one whose row changed meanwhile is left out, and only the held ones get a run.
        """
        if batch.plans:
            planning.plan_next_many(s, batch.plans, now, self.rules)
        pending = batch.pending
        if not pending:
            return
        conn = s.connection()
        changed = conn.execute(_CLAIM_CAS, [dict(
            b_id=p.row.id, b_status=p.row.status, b_attempt=p.row.attempt, b_new_attempt=p.row.attempt + 1,
            b_token=p.token, b_lease=p.lease) for p in pending]).rowcount
        if changed != len(pending):
            held = {r.id for r in conn.execute(select(O.c.id).where(
                O.c.id.in_([p.row.id for p in pending]),  # the key lookup (SQLite scans for a row-value IN)
                tuple_(O.c.id, O.c.lease_token).in_([(p.row.id, p.token) for p in pending])))}
            pending = [p for p in pending if p.row.id in held]
            if not pending:
                return
        run_ids = [r.id for r in conn.execute(_INSERT_RUNS, [self._run_values(p, now) for p in pending])]
        conn.execute(_CLAIM_RUN_ID, [dict(b_id=p.row.id, b_run_id=rid) for p, rid in zip(pending, run_ids)])
        batch.claims.extend(self._claim_of(tenant, p, rid, now) for p, rid in zip(pending, run_ids))

    @staticmethod
    def _run_values(p: _Pending, now: datetime) -> dict[str, Any]:
        row = p.row
        return dict(
            occurrence_id=row.id, schedule_id=row.schedule_id,
            job_key=p.owner.key if row.job_id is not None else None,
            script_id=p.script.id, script_version=p.script.version, trigger=row.trigger,
            scheduled_for=row.scheduled_for, created_at=now, started_at=now, status=RUNNING,
            attempt=row.attempt + 1, lease_token=p.token,
        )

    @staticmethod
    def _claim_of(tenant: str, p: _Pending, run_id: int, now: datetime) -> Claim:
        row, owner, script, is_job = p.row, p.owner, p.script, p.row.job_id is not None
        return Claim(
            tenant=tenant, occurrence_id=row.id, run_id=run_id, lease_token=p.token, lease_until=p.lease,
            attempt=row.attempt + 1, trigger=row.trigger, scheduled_for=row.scheduled_for, claimed_at=now,
            schedule_id=row.schedule_id, job_id=row.job_id, job_key=owner.key if is_job else None,
            job_depth=owner.depth if is_job else None, job_root=owner.root_key if is_job else None,
            script_id=script.id, script_version=script.version, source=script.source,
            timeout_ms=script.timeout_ms, memory_mb=script.memory_mb, payload=json.loads(owner.payload),
            policy=p.policy,
        )

    # -- finishing --------------------------------------------------------------------

    def finish(self, claim: Claim, outcome: Outcome, effects: RunEffects | None, now: datetime) -> bool:
        return self.finish_many([(claim, outcome, effects, now)])[0]

    def finish_many(self, items: Sequence[Finish]) -> list[bool]:
        """`finish` for many attempts of one tenant, in one transaction; each fenced by its own token.

        Returns, in order, whether each record applied. If the transaction fails nothing
        is recorded (the caller may then finish the attempts one by one).
        """
        tenants = {claim.tenant for claim, *_ in items}
        if len(tenants) != 1:
            raise ValueError("finish_many records the attempts of one tenant at a time")
        with self.db.tenant_session(tenants.pop()) as s:
            applied = self._finish_batch(s, items)
        for (claim, *_), ok in zip(items, applied):
            if not ok:
                log.warning("run.fenced", extra={"event": "run.fenced", "run_id": claim.run_id})
        return applied

    def _finish_batch(self, s: Session, items: Sequence[Finish]) -> list[bool]:
        conn = s.connection()
        retries = [policies.retry_at(c.policy, o.status, c.attempt, now) for c, o, _, now in items]
        # The common case, an occurrence done for good: one fenced UPDATE for all, which returns
        # the occurrences whose lease token still matched. An occurrence met twice (a lapsed
        # attempt and its retry) is fenced row by row: the ids returned could not tell them apart.
        counts: dict[int, int] = {}
        for claim, *_ in items:
            if claim.occurrence_id is not None:
                counts[claim.occurrence_id] = counts.get(claim.occurrence_id, 0) + 1
        in_bulk = [r is None and counts.get(c.occurrence_id) == 1 for (c, *_), r in zip(items, retries)]
        done = [(c.occurrence_id, c.lease_token) for (c, *_), bulk in zip(items, in_bulk) if bulk]
        held = self._release_held(conn, done) if done else set()
        applied = [
            (c.occurrence_id in held) if bulk else self._fence(s, c, r)
            for (c, *_), r, bulk in zip(items, retries, in_bulk)
        ]
        ok = [(item, r) for item, r, a in zip(items, retries, applied) if a]
        if not ok:
            return applied
        conn.execute(_FINISH_RUN, [self._finish_values(c, o, now, r) for (c, o, _, now), r in ok])
        for (claim, outcome, effects, now), _ in ok:
            if outcome.status == "succeeded" and effects is not None:
                self._apply(s, claim, effects, now)
        latest = max(now for (*_, now), _ in ok)
        schedules = sorted({c.schedule_id for (c, *_), _ in ok if c.schedule_id is not None})
        if schedules:
            conn.execute(update(O).where(O.c.schedule_id.in_(schedules), O.c.status == QUEUED).values(due_at=latest))
        jobs = [dict(b_id=c.job_id, b_run_at=c.scheduled_for, b_now=now)
                for (c, _, _, now), r in ok if c.job_id is not None and r is None]
        if jobs:
            conn.execute(_FINISH_JOB, jobs)
        return applied

    def _release_held(self, conn: Any, done: list[tuple[int, str]]) -> set[int]:
        """Mark done the occurrences that still hold their attempt's token; return their ids.

        The rows are read under lock (SQLite: the write transaction; PostgreSQL: FOR UPDATE)
        and each is compared with its own token, then released in one UPDATE that repeats
        the fence. (A row-value IN would do both in one statement, but SQLite scans its
        list for every row: quadratic in the batch.)
        """
        query = select(O.c.id, O.c.lease_token).where(O.c.id.in_([oid for oid, _ in done]), O.c.status == RUNNING)
        if self.is_postgres:
            query = query.order_by(O.c.id).with_for_update()
        current = dict(conn.execute(query).all())
        held = [(oid, token) for oid, token in done if current.get(oid) == token]
        if held:
            changed = conn.execute(update(O).where(
                O.c.id.in_([oid for oid, _ in held]), O.c.status == RUNNING,
                O.c.lease_token.in_([token for _, token in held]),
            ).values(status=DONE, due_at=None, lease_token=None, lease_until=None)).rowcount
            if changed != len(held):  # cannot happen under the lock; never record on a guess
                raise RuntimeError(f"fenced release changed {changed} occurrences, expected {len(held)}")
        return {oid for oid, _ in held}

    @staticmethod
    def _finish_values(claim: Claim, outcome: Outcome, now: datetime, retry: datetime | None) -> dict[str, Any]:
        reason = outcome.reason or ENDINGS.get(outcome.status, outcome.status)
        if retry is not None:
            reason += f"; retry {claim.attempt + 1} of {claim.policy.max_attempts} at {retry.isoformat()}"
        return dict(
            b_id=claim.run_id, b_token=claim.lease_token, b_status=outcome.status, b_reason=reason[:200],
            b_started=outcome.started_at, b_finished=now,
            b_output=None if outcome.output is None else json.dumps(outcome.output),
            b_error=outcome.error, b_error_line=outcome.error_line, b_logs=json.dumps(outcome.logs),
            b_duration=outcome.duration_ms,
        )

    def _fence(self, s: Session, claim: Claim, retry: datetime | None) -> bool:
        """Release the occurrence (or a manual run) only if it still holds our lease token."""
        if claim.occurrence_id is None:
            cond = (R.c.id == claim.run_id) & (R.c.lease_token == claim.lease_token) & (R.c.status == RUNNING)
            return s.execute(update(R).where(cond).values(lease_token=claim.lease_token)).rowcount == 1
        cond = (O.c.id == claim.occurrence_id) & (O.c.lease_token == claim.lease_token) & (O.c.status == RUNNING)
        values = dict(status=PLANNED, due_at=retry) if retry else dict(status=DONE, due_at=None)
        return s.execute(update(O).where(cond).values(lease_token=None, lease_until=None, **values)).rowcount == 1

    def claim_manual(self, tenant: str, script_id: int, payload: Any, now: datetime) -> Claim:
        """A run of a script right now, outside any schedule (`POST /scripts/{id}/run`): never retried."""
        with self.db.tenant_session(tenant) as s:
            query = (
                select(SC.c.id, SC.c.timeout_ms, SC.c.memory_mb, SV.c.version, SV.c.source)
                .join(SV, (SV.c.script_id == SC.c.id) & (SV.c.version == SC.c.current_version))
                .where(SC.c.id == script_id)
            )
            script = s.execute(query).one()
            token = uuid.uuid4().hex
            run_id = s.execute(R.insert().values(
                script_id=script.id, script_version=script.version, trigger="manual", scheduled_for=now,
                created_at=now, started_at=now, status=RUNNING, attempt=1, lease_token=token,
            )).inserted_primary_key[0]
        return Claim(
            tenant=tenant, occurrence_id=None, run_id=run_id, lease_token=token,
            lease_until=policies.lease_until(now, script.timeout_ms, self.lease_margin_s), attempt=1,
            trigger="manual", scheduled_for=now, claimed_at=now, schedule_id=None, job_id=None, job_key=None,
            job_depth=None, job_root=None, script_id=script.id, script_version=script.version,
            source=script.source, timeout_ms=script.timeout_ms, memory_mb=script.memory_mb, payload=payload,
            policy=policies.Policy(max_attempts=1),
        )

    def _apply(self, s: Session, claim: Claim, effects: RunEffects, now: datetime) -> None:
        """The run's buffered effects, in its finishing transaction."""
        writes, deletes = effects.kv_changes()
        if deletes:
            s.execute(delete(KVT).where(KVT.c.key.in_(deletes)))
        for key, value in writes.items():
            self._kv_upsert(s, key, value, now)
        for topic, data in effects.events:
            s.execute(EV.insert().values(run_id=claim.run_id, topic=topic, data=data, created_at=now, attempts=0))
        depth = 1 if claim.job_depth is None else claim.job_depth + 1
        for job in effects.jobs.values():
            fields = dict(script_id=claim.script_id, run_at=job.run_at, payload=job.payload_json,
                          expire_after_s=None, max_attempts=claim.policy.max_attempts, priority=0)
            planning.upsert_job(s, job.key, fields, now=now, depth=depth,
                                root_key=claim.job_root or job.key, created_by_run_id=claim.run_id)

    def _kv_upsert(self, s: Session, key: str, value: str, now: datetime) -> None:
        if self.is_postgres:
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        stmt = insert(KVT).values(key=key, value=value, updated_at=now)
        s.execute(stmt.on_conflict_do_update(index_elements=[KVT.c.key], set_=dict(value=value, updated_at=now)))

    # -- reading ----------------------------------------------------------------------

    def next_due_at(self, tenant: str) -> datetime | None:
        with self.db.tenant_session(tenant) as s:
            return s.execute(select(func.min(O.c.due_at))).scalar()

    def backlog(self, tenant: str, now: datetime) -> int:
        with self.db.tenant_session(tenant) as s:
            return s.execute(select(func.count()).select_from(O).where(
                O.c.due_at <= now, O.c.status.in_((PLANNED, QUEUED)))).scalar_one()

    def kv_read(self, tenant: str, key: str) -> Any:
        with self.db.tenant_session(tenant) as s:
            value = s.execute(select(KVT.c.value).where(KVT.c.key == key)).scalar()
        return None if value is None else json.loads(value)

    def kv_keys(self, tenant: str, prefix: str) -> list[str]:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        with self.db.tenant_session(tenant) as s:
            rows = s.execute(select(KVT.c.key).where(KVT.c.key.like(escaped + "%", escape="\\")).order_by(KVT.c.key))
            return [r[0] for r in rows]
