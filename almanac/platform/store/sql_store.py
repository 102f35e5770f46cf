"""`Store` on SQL: the same statements on SQLite (embedded) and PostgreSQL (scale-out).

Safety against several processes comes from the database, never from locks in
memory: SQLite serializes writers (BEGIN IMMEDIATE); on PostgreSQL the due rows
are read `FOR UPDATE SKIP LOCKED`, so two claimers take disjoint rows. Either
way each claim is a compare-and-set on the occurrence (status and attempt as
read) followed by the insert of its run row, unique on (occurrence, attempt).

Both ends work in batches, for throughput, and live in their own modules:
`due_index.claim` (PostgreSQL: one claim across every tenant with due work, through the
shared due index), `store.claim` (the claim transaction: policies row by row, then one
compare-and-set executemany, one multi-row INSERT of runs and one bulk plan of
next occurrences) and `store.record` (`finish_many`: many attempts in one
transaction, each fenced by its own lease token, effects applied only where
that fence held). This module puts them together with manual runs and reads.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import bindparam, select, text

from almanac.sandbox.contract import RunResult

from almanac.db import Database
from almanac.errors import NotFound, QuotaExceeded
from almanac.platform.store import planning
from almanac.platform.decisions import policies
from almanac.platform.store import quotas
from almanac.platform.store.connection_lanes import Lanes
from almanac.platform.store.models import KV, RUNNING, Job, Run, Script, ScriptVersion
from almanac.platform.store.contract import Claim, ClaimBatch
from almanac.platform.store.due_index.claim import DueIndex
from almanac.platform.store.claim import BACKLOG, NEXT_DUE, TenantClaims, new_tag
from almanac.platform.store.record import ENDINGS, Finish, Records

__all__ = ["ENDINGS", "Finish", "SqlStore"]

R, KVT, SC, SV, J = Run.__table__, KV.__table__, Script.__table__, ScriptVersion.__table__, Job.__table__

# PostgreSQL: a transaction-scoped lock per tenant around an admission's budget check and its insert.
_BUDGET_LOCK = text("SELECT pg_advisory_xact_lock(hashtext(:b_key))")

_KV_READ = select(KVT.c.value).where(KVT.c.key == bindparam("b_key"))


class SqlStore:
    """`Store` on SQLite and PostgreSQL: one tenant's claim (`TenantClaims`) and records (`Records`),
    manual runs and the reads a run makes. On PostgreSQL it also holds the due index (`due_index`),
    the claim across tenants that `timer.claim_paths.AcrossTenants` drives; None on SQLite."""

    def __init__(self, db: Database, rules: planning.Rules | None = None, *, lease_margin_s: float | None = None,
                 owner_tag: str | None = None):
        self.db = db
        self.owner_tag = owner_tag or new_tag()  # its claims' tokens begin with it (`timer.liveness`)
        self.rules = rules or planning.RecurrenceRules()
        self.lease_margin_s = policies.LEASE_MARGIN_S if lease_margin_s is None else lease_margin_s
        self.is_postgres = not db.is_sqlite
        self.claims = TenantClaims(db, self.rules, self.lease_margin_s, self.owner_tag)
        self.records = Records(db, self.lease_margin_s)
        # Each tenant's claims and records on one connection of the process (PostgreSQL, `connection_lanes`).
        self.lanes = Lanes(db) if db.lanes else None
        self.due_index: DueIndex | None = DueIndex(db, self.claims, self.records, self.lanes) if self.is_postgres else None

    # -- the contract's claim and record: one tenant's -----------------------------------

    def claim_due(self, tenant: str, now: datetime, limit: int) -> ClaimBatch:
        return self.claims.claim_due(tenant, now, limit)

    def finish(self, claim: Claim, result: RunResult, started: datetime, now: datetime) -> bool:
        return self.finish_many([(claim, result, started, now)])[0]

    def finish_many(self, items: Sequence[Finish]) -> list[bool]:
        return self.records.finish_many(items)

    def renew_leases(self, tenant: str, claims: Sequence[Claim], now: datetime) -> set[int]:
        return self.records.renew_leases(tenant, claims, now)

    def finish_unrecordable(self, claim: Claim, result: RunResult, started: datetime, problem: Exception,
                            now: datetime) -> bool:
        return self.records.finish_unrecordable(claim, result, started, problem, now)

    def claim_manual(self, tenant: str, script_id: int, payload: Any, now: datetime, trigger: str = "manual") -> Claim:
        """A run of a script right now, outside any schedule (run now, run again, a trial): never retried.

        Checked and counted against the tenant's daily budgets in the same transaction (the run row
        counts from its insert); past them `QuotaExceeded` and nothing is written. NotFound for no
        such script.
        """
        with self.db.tenant_session(tenant) as s:
            if self.is_postgres:  # one admission at a time per tenant, so two cannot both take the last run
                s.execute(_BUDGET_LOCK, {"b_key": f"almanac.day-budget.{tenant}"})
            query = (
                select(SC.c.id, SC.c.timeout_ms, SC.c.memory_mb, SV.c.version, SV.c.source)
                .join(SV, (SV.c.script_id == SC.c.id) & (SV.c.version == SC.c.current_version))
                .where(SC.c.id == script_id)
            )
            script = s.execute(query).one_or_none()
            if script is None:
                raise NotFound(f"There is no script {script_id}.")
            limits = quotas.of(s)
            over = quotas.over_day_budget(limits, *quotas.day_use(s, now))
            if over is not None:
                why = over.removeprefix("quota_exceeded: ")
                raise QuotaExceeded(why[0].upper() + why[1:] + ".",
                                    details={"quota": "runs_per_day" if "runs a day" in over else "cpu_seconds_per_day"})
            token = uuid.uuid4().hex
            run_id = cast(Any, s.execute(R.insert().values(
                script_id=script.id, script_version=script.version, trigger=trigger, scheduled_for=now,
                created_at=now, started_at=now, status=RUNNING, attempt=1, lease_token=token,
            ))).inserted_primary_key[0]
        return Claim(
            tenant=tenant, occurrence_id=None, run_id=run_id, lease_token=token,
            lease_until=policies.lease_until(now, script.timeout_ms, self.lease_margin_s), attempt=1,
            trigger=trigger, scheduled_for=now, claimed_at=now, schedule_id=None, job_id=None, job_key=None,
            job_depth=None, job_root=None, script_id=script.id, script_version=script.version,
            source=script.source, timeout_ms=script.timeout_ms, memory_mb=script.memory_mb, payload=payload,
            policy=policies.Policy(max_attempts=1),
        )

    # -- reading ----------------------------------------------------------------------

    def next_due_at(self, tenant: str) -> datetime | None:
        with self.db.tenant_session(tenant) as s:
            return s.execute(NEXT_DUE).scalar()

    def backlog(self, tenant: str, now: datetime) -> int:
        with self.db.tenant_session(tenant) as s:
            return s.execute(BACKLOG, {"b_now": now}).scalar_one()

    def kv_read(self, tenant: str, key: str) -> Any:
        with self.db.tenant_session(tenant) as s:
            value = s.execute(_KV_READ, {"b_key": key}).scalar()
        return None if value is None else json.loads(value)

    def chain_keys(self, tenant: str, root: str) -> set[str]:
        with self.db.tenant_session(tenant) as s:
            rows = s.execute(select(J.c.key).where(J.c.root_key == root).limit(policies.MAX_FOLLOW_UPS + 1))
            return {r[0] for r in rows}

    def kv_keys(self, tenant: str, prefix: str) -> list[str]:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        with self.db.tenant_session(tenant) as s:
            rows = s.execute(select(KVT.c.key).where(KVT.c.key.like(escaped + "%", escape="\\")).order_by(KVT.c.key))
            return [r[0] for r in rows]

    def quota_state(self, tenant: str) -> tuple[quotas.Quotas, int, int, int]:
        """(quotas, kv keys, kv bytes, pending jobs) as committed: what a run's kv.set and schedule.at charge."""
        with self.db.tenant_session(tenant) as s:
            keys, size = quotas.kv_use(s)
            return quotas.of(s), keys, size, quotas.use_pending_jobs(s)
