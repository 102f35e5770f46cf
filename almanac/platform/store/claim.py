"""The claim transaction of `SqlStore`: read what is due, apply the policies row by row, claim in bulk.

One transaction per call: the due rows are read under the write lock (SQLite:
BEGIN IMMEDIATE; PostgreSQL: `FOR UPDATE SKIP LOCKED`), their schedules, jobs
and scripts with one query per table, and each row is decided by the pure
functions of `policies` (recover a lapsed lease, misfire, expiry, overlap,
stale versions). The runnable rows are then claimed together: one executemany
compare-and-set on (status, attempt as read), one executemany INSERT of their
runs (unique on occurrence + attempt, which then finds their ids), one
executemany linking each occurrence to its run, and one bulk plan of the
schedules' next occurrences.

The hot statements are built once at import, with expanding parameters for
their id lists, so SQLAlchemy finds them in its compiled cache instead of
building, coercing and hashing a new statement per call; the per-row ones run
as driver executemany through `bulk.Bulk`.
"""

from __future__ import annotations

import threading

import json
import logging
import secrets
from collections.abc import Iterable, Sequence
from functools import lru_cache
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from sqlalchemy import Table, bindparam, delete, func, insert, select, tuple_, update
from sqlalchemy.orm import Session

from almanac.db import insert_ignore
from almanac.db import Database
from almanac.platform.store import failures
from almanac.platform.store import planning
from almanac.platform.decisions import policies
from almanac.platform.store.executemany import Bulk
from almanac.platform.store.models import (
    DONE, JOB_CANCELLED, JOB_DONE, JOB_PENDING, PLANNED, QUEUED, RUNNING,
    Job, Occurrence, Run, Schedule, Script, ScriptVersion,
)
from almanac.platform.store.contract import Claim, ClaimBatch
from almanac.platform.store.claim_rows import DUE_COLUMNS, SCRIPTS, ClaimRows, Pending, ScriptAtHand
from almanac.platform.store.record import RELEASE_QUEUED
from almanac.sandbox.contract import RunResult

if TYPE_CHECKING:
    pass

log = logging.getLogger("almanac.scheduler")


def new_tag() -> str:
    """A process's tag: 31 random bits in 8 hex digits (`timer.liveness` keys the process's advisory
    lock by it, and that lock's second key is a signed int4)."""
    return f"{secrets.randbits(31):08x}"


def lease_token(tag: str) -> str:
    """A claim's fencing token: the claiming process's tag (8 hex digits, `new_tag`), then 96 random bits.

    The random part is what fences (no two claims share a token). The tag tells which process
    holds a running attempt without a column of its own: the attempts of a process that died
    are found by it (`liveness.reap`), and so can an operator (`SELECT left(lease_token, 8) ...`).
    """
    return f"{tag}{secrets.token_hex(12)}"


O, R, J, S = Occurrence.__table__, Run.__table__, Job.__table__, Schedule.__table__
SC, SV = Script.__table__, ScriptVersion.__table__


def schedule_policy(row: Any) -> policies.Policy:
    return _schedule_policy(row.misfire, row.catchup_window_s, row.overlap, row.expire_after_s, row.max_attempts,
                            row.retry_backoff_s)


def job_policy(row: Any) -> policies.Policy:
    return _job_policy(row.expire_after_s, row.max_attempts)


# Policies are frozen values: rows with the same settings share one, built and checked once.
@lru_cache(maxsize=1024)
def _schedule_policy(misfire: str, catchup_window_s: int, overlap: str, expire_after_s: int | None,
                     max_attempts: int, retry_backoff_s: int) -> policies.Policy:
    return policies.Policy(misfire=misfire, catchup_window_s=catchup_window_s, overlap=overlap,
                           expire_after_s=expire_after_s, max_attempts=max_attempts, retry_backoff_s=retry_backoff_s)


@lru_cache(maxsize=1024)
def _job_policy(expire_after_s: int | None, max_attempts: int) -> policies.Policy:
    return policies.Policy(overlap="allow", expire_after_s=expire_after_s, max_attempts=max_attempts)


def _ids(name: str = "b_ids") -> Any:
    return bindparam(name, expanding=True)


# Only the columns the claim reads: every datetime column costs a conversion per row.
_DUE = (select(*DUE_COLUMNS).where(O.c.due_at <= bindparam("b_now"))
        .order_by(O.c.priority.desc(), O.c.due_at, O.c.id).limit(bindparam("b_limit")))
_DUE_LOCKED = _DUE.with_for_update(skip_locked=True)
_ONE = select(*DUE_COLUMNS).where(O.c.id == bindparam("b_id"))
_CLAIM_CAS = Bulk(update(O).where(
    O.c.id == bindparam("b_id"), O.c.status == bindparam("b_status"), O.c.attempt == bindparam("b_attempt"),
).values(status=RUNNING, attempt=bindparam("b_new_attempt"), lease_token=bindparam("b_token"),
         lease_until=bindparam("b_lease"), due_at=bindparam("b_lease"), run_id=bindparam("b_run_id")))
_CLAIM_RUN_ID = Bulk(update(O).where(O.c.id == bindparam("b_id")).values(run_id=bindparam("b_run_id")))
_RUN_COLUMNS = ("occurrence_id", "schedule_id", "job_key", "script_id", "script_version", "trigger", "scheduled_for",
                "created_at", "started_at", "status", "attempt", "lease_token")
_INSERT_RUNS = Bulk(R.insert().values({name: bindparam("b_" + name) for name in _RUN_COLUMNS}))
_INSERT_RUNS_RETURNING = (insert(cast(Table, R)).values({name: bindparam("b_" + name) for name in _RUN_COLUMNS})
                          .returning(R.c.id, sort_by_parameter_order=True))
_RUN_IDS = select(R.c.id, R.c.occurrence_id, R.c.attempt).where(R.c.occurrence_id.in_(_ids()))
NEXT_DUE = select(func.min(O.c.due_at))
BACKLOG = select(func.count()).select_from(O).where(O.c.due_at <= bindparam("b_now"),
                                                      O.c.status.in_((PLANNED, QUEUED)))


class _Ended(NamedTuple):
    """What `failures.record_endings` reads of an attempt that ended without a result (its lease lapsed)."""

    run_id: int | None
    occurrence_id: int
    schedule_id: int | None
    job_key: str | None
    attempt: int
    scheduled_for: datetime


class TenantClaims:
    """One tenant's claim transaction (`claim_due`), and the per-row decisions that a pass across
    tenants (`due_index.claim.DueIndex`) reuses for each tenant it picked (`claim_rows`)."""

    def __init__(self, db: Database, rules: planning.Rules, lease_margin_s: float, owner_tag: str) -> None:
        self.db = db
        self.rules = rules
        self.lease_margin_s = lease_margin_s
        self.is_postgres = not db.is_sqlite
        self.owner_tag = owner_tag  # this process's tag, the first 8 characters of its lease tokens
        # Script versions never change once written: their source is read once per process.
        self._sources: dict[tuple[str, int, int], str] = {}
        self._sources_lock = threading.Lock()

    def _scripts(self, s: Session, tenant: str, script_ids: set[int]) -> dict[int, ScriptAtHand]:
        """The current version of each script, its source from the in-process cache when known."""
        if not script_ids:
            return {}
        return self._with_sources(s, tenant, s.execute(SCRIPTS, {"b_ids": sorted(script_ids)}).all())

    def _with_sources(self, s: Session, tenant: str, rows: Any,
                      read: dict[tuple[int, int], str] | None = None) -> dict[int, ScriptAtHand]:
        """These scripts' rows (id, timeout_ms, memory_mb, current_version) with their current source.

        `read`: sources read already, by (script id, version), for the cache.
        """
        if read:
            self._remember_sources(tenant, read.items())
        with self._sources_lock:
            missing = [(r.id, r.current_version) for r in rows if (tenant, r.id, r.current_version) not in self._sources]
        if missing:
            found = s.execute(select(SV.c.script_id, SV.c.version, SV.c.source).where(
                SV.c.script_id.in_([sid for sid, _ in missing]),
                tuple_(SV.c.script_id, SV.c.version).in_(missing))).all()
            self._remember_sources(tenant, (((r.script_id, r.version), r.source) for r in found))
        with self._sources_lock:
            return {r.id: ScriptAtHand(r.id, r.timeout_ms, r.memory_mb, r.current_version,
                                  self._sources[(tenant, r.id, r.current_version)])
                    for r in rows if (tenant, r.id, r.current_version) in self._sources}

    def source_known(self, tenant: str, script_id: int, version: int) -> bool:
        """Whether the cache holds this version's source (a pass across tenants reads only the others)."""
        with self._sources_lock:
            return (tenant, script_id, version) in self._sources

    def _remember_sources(self, tenant: str, found: Iterable[tuple[tuple[int, int], str]]) -> None:
        """Keep these ((script id, version), source) of the tenant; the cache is bounded (a string per version)."""
        with self._sources_lock:
            if len(self._sources) > 10_000:
                self._sources.clear()
            self._sources.update({(tenant, sid, version): source for (sid, version), source in found})

    def claim_due(self, tenant: str, now: datetime, limit: int) -> ClaimBatch:
        with self.db.tenant_session(tenant) as s:
            rows = s.execute(_DUE_LOCKED if self.is_postgres else _DUE, {"b_now": now, "b_limit": limit}).all()
            batch = self.claim_rows(s, tenant, rows, now)
            full = len(rows) >= limit
            # Not full: everything due was looked at, so say now when to look again (and what is left),
            # in this transaction rather than in two more.
            backlog = None if full else s.execute(BACKLOG, {"b_now": now}).scalar_one()
            next_due = None if full else s.execute(NEXT_DUE).scalar()
        return ClaimBatch(batch.claims, len(rows), full, sorted(batch.recorded.items()),
                          backlog=backlog, next_due_at=next_due)

    def claim_rows(self, s: Session, tenant: str, rows: Sequence[Any], now: datetime,
                    lease_from: datetime | None = None, *, defer: bool = False, reads: Any = None) -> ClaimRows:
        """Decide and claim these due rows of one tenant (read and locked by the caller), in `s`'s transaction.

        `lease_from`: when the claimed leases start, if later than `now` (a long pass across tenants).
        `defer`: leave the batch's plans and claims (`plans`, `pending`) to the caller, who writes
        those of many tenants at once (`due_index.writes`); `claims` then stays empty.
        `reads`: what deciding the rows needs, read for many tenants at once (`due_index.reads`).
        """
        batch = ClaimRows(self, s, tenant, rows, lease_from or now, reads)
        batch.deferred = defer
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
        return batch

    def _cas(self, s: Session, row: Any, **values: Any) -> bool:
        """Change an occurrence only if nobody changed it since we read it."""
        cond = (O.c.id == row.id) & (O.c.status == row.status) & (O.c.attempt == row.attempt)
        return s.execute(update(O).where(cond).values(**values)).rowcount == 1

    def _drop(self, s: Session, row: Any) -> None:
        s.execute(delete(O).where(O.c.id == row.id, O.c.status == row.status, O.c.attempt == row.attempt))

    def _record(self, s: Session, batch: ClaimRows, row: Any, when: datetime, status: str, reason: str,
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

    def _finish_occurrence(self, s: Session, batch: ClaimRows, row: Any, now: datetime) -> None:
        if self._cas(s, row, status=DONE, due_at=None, lease_token=None, lease_until=None):
            if row.job_id is not None:
                s.execute(update(J).where(J.c.id == row.job_id, J.c.state == JOB_PENDING).values(
                    state=JOB_DONE, updated_at=now))

    def _recover(self, s: Session, batch: ClaimRows, row: Any, now: datetime) -> Any:
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
        run_id = s.execute(update(R).where(R.c.occurrence_id == row.id, R.c.attempt == row.attempt,
                                           R.c.status == RUNNING).values(
            status="failed", reason=reason, finished_at=now).returning(R.c.id)).scalar()
        if not retry:
            if row.job_id is not None:
                s.execute(update(J).where(J.c.id == row.job_id, J.c.state == JOB_PENDING).values(state=JOB_DONE))
            # A process that died mid-run failed the run as surely as a throw (SPEC section 7).
            job = batch.jobs.get(row.job_id)
            failures.record_endings(s, [(_Ended(
                run_id, row.id, row.schedule_id, job.key if job else None, row.attempt, row.scheduled_for),
                RunResult("failed", error=reason))], now)
        if row.schedule_id is not None:
            s.execute(RELEASE_QUEUED, {"b_ids": [row.schedule_id], "b_now": now})
        batch.recorded["lease_lapsed"] = batch.recorded.get("lease_lapsed", 0) + 1
        log.warning("run.lease_lapsed", extra={"event": "run.lease_lapsed", "occurrence_id": row.id,
                                                "attempt": row.attempt, "retry": retry})
        return s.execute(_ONE, {"b_id": row.id}).one() if retry else None

    def _schedule_due(self, s: Session, tenant: str, batch: ClaimRows, row: Any, now: datetime) -> None:
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

    def _expand_misfire(self, s: Session, batch: ClaimRows, row: Any, sch: Any, policy: policies.Policy,
                        now: datetime) -> bool:
        """Apply `misfire` to the schedule's times up to now and plan its next occurrence.

        Returns True when this occurrence itself is to run.
        """
        later = self.rules.times_between(sch.rrule, sch.input_kind, row.scheduled_for, now, planning.CATCH_UP_CAP)
        due = [row.scheduled_for, *later]
        plan = policies.plan_misfire(policy, due, now)
        for status, times, reason in (
            ("expired", plan.expired, "older than catchup_window_s when the platform came back"),
            ("skipped", plan.skipped, "missed: it could not start before its next occurrence fell due "
                                      f"or within {policies.MISFIRE_GRACE_S} s (misfire={policy.misfire})"),
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
                insert_ignore(s, O, {**values, "due_at": now})  # due at once, oldest first
        batch.plans.append((sch, due[-1]))  # planned with the others' at the end of the transaction
        if row.scheduled_for in plan.run:
            return True
        self._finish_occurrence(s, batch, row, now)
        return False

    def _job_due(self, s: Session, tenant: str, batch: ClaimRows, row: Any, now: datetime) -> None:
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

    def _claim(self, s: Session, tenant: str, batch: ClaimRows, row: Any, owner: Any, policy: policies.Policy,
               now: datetime) -> None:
        script = batch.scripts.get(owner.script_id)
        problem = "its script was deleted" if script is None else batch.over_budget(s, now)
        if problem is not None:
            status = "failed" if script is None else "skipped"
            self._record(s, batch, row, row.scheduled_for, status, problem, now, own=True)
            self._finish_occurrence(s, batch, row, now)
            return
        assert script is not None  # a deleted script is a problem, handled above
        lease = batch.leases.get(script.timeout_ms)
        if lease is None:  # one per timeout in a batch: the same value for every claim that shares it
            lease = batch.leases[script.timeout_ms] = policies.lease_until(batch.lease_from, script.timeout_ms,
                                                                           self.lease_margin_s)
        batch.pending.append(Pending(row, owner, script, policy, lease_token(self.owner_tag), lease))
        if row.schedule_id is not None:
            batch.running.setdefault(row.schedule_id, {})[row.id] = lease

    def _flush(self, s: Session, tenant: str, batch: ClaimRows, now: datetime) -> None:
        """Plan the next occurrences and claim the runnable ones, a few statements for the whole batch.

        Each claim is still a compare-and-set on its occurrence (status and attempt as
        read); one whose row changed meanwhile is left out, and only the held ones get a run.
        """
        if batch.deferred:
            return
        if batch.plans:
            planning.plan_next_many(s, batch.plans, now, self.rules)
        pending = batch.pending
        if not pending:
            return
        conn = s.connection()
        if self.is_postgres:
            run_ids = self._claim_locked(conn, pending, now)
        else:
            pending, run_ids = self._claim_cas(conn, pending, now)
        batch.claims.extend(self.claim_of(tenant, p, rid, now) for p, rid in zip(pending, run_ids))

    def _claim_cas(self, conn: Any, pending: list[Pending], now: datetime) -> tuple[list[Pending], list[int]]:
        """(SQLite) Claim each occurrence by compare-and-set, then insert the held ones' runs; (held, run ids)."""
        changed = _CLAIM_CAS.executemany(conn, [dict(
            b_id=p.row.id, b_status=p.row.status, b_attempt=p.row.attempt, b_new_attempt=p.row.attempt + 1,
            b_token=p.token, b_lease=p.lease, b_run_id=None) for p in pending])
        if changed != len(pending):
            held = {r.id for r in conn.execute(select(O.c.id).where(
                O.c.id.in_([p.row.id for p in pending]),  # the key lookup (SQLite scans for a row-value IN)
                tuple_(O.c.id, O.c.lease_token).in_([(p.row.id, p.token) for p in pending])))}
            pending = [p for p in pending if p.row.id in held]
            if not pending:
                return [], []
        # The runs' ids by their unique key (occurrence, attempt): an executemany returns no rows.
        _INSERT_RUNS.executemany(conn, [self.run_values(p, now) for p in pending])
        ids = {(r.occurrence_id, r.attempt): r.id
               for r in conn.execute(_RUN_IDS, {"b_ids": sorted(p.row.id for p in pending)})}
        run_ids = [ids[(p.row.id, p.row.attempt + 1)] for p in pending]
        _CLAIM_RUN_ID.executemany(conn, [dict(b_id=p.row.id, b_run_id=rid) for p, rid in zip(pending, run_ids)])
        return pending, run_ids

    def _claim_locked(self, conn: Any, pending: list[Pending], now: datetime) -> list[int]:
        """(PostgreSQL) The rows are locked FOR UPDATE by this transaction: insert the runs, then claim.

        Two statements instead of four: the runs' ids come back from their multi-row INSERT, and
        the compare-and-set writes each occurrence's run id with its lease. Under the lock the
        compare-and-set cannot miss; if it ever did, nothing is claimed on a guess (rolled back).
        """
        run_ids = list(conn.execute(_INSERT_RUNS_RETURNING, [self.run_values(p, now) for p in pending]).scalars())
        changed = _CLAIM_CAS.executemany(conn, [dict(
            b_id=p.row.id, b_status=p.row.status, b_attempt=p.row.attempt, b_new_attempt=p.row.attempt + 1,
            b_token=p.token, b_lease=p.lease, b_run_id=rid) for p, rid in zip(pending, run_ids)])
        if changed != len(pending):
            raise RuntimeError(f"claim changed {changed} locked occurrences, expected {len(pending)}")
        return run_ids

    @staticmethod
    def run_values(p: Pending, now: datetime) -> dict[str, Any]:
        row = p.row
        return dict(
            b_occurrence_id=row.id, b_schedule_id=row.schedule_id,
            b_job_key=p.owner.key if row.job_id is not None else None,
            b_script_id=p.script.id, b_script_version=p.script.version, b_trigger=row.trigger,
            b_scheduled_for=row.scheduled_for, b_created_at=now, b_started_at=now, b_status=RUNNING,
            b_attempt=row.attempt + 1, b_lease_token=p.token,
        )

    @staticmethod
    def claim_of(tenant: str, p: Pending, run_id: int, now: datetime) -> Claim:
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
