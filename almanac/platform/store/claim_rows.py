"""The rows one claim transaction of one tenant works on (`ClaimRows`): read with one query per table.

The claim's per-row decisions (`TenantClaims.claim_rows`) read a batch's schedules, jobs,
running attempts and scripts from here, and add to it what they decide: the runnable
occurrences (`pending`, claimed together at the end), the schedules to plan next, what
was recorded without running, and the tenant's daily budget as it is spent. A pass
across tenants hands in what it read for many tenants at once (`due_index.reads`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from almanac.platform.decisions import policies

from almanac.platform.store import quotas
from almanac.platform.store.models import RUNNING, Job, Occurrence, Schedule, Script
from almanac.platform.store.contract import Claim

if TYPE_CHECKING:  # the claim transaction that reads these rows (it imports this module)
    from almanac.platform.store.claim import TenantClaims

O, J, S, SC = Occurrence.__table__, Job.__table__, Schedule.__table__, Script.__table__


def _ids(name: str = "b_ids") -> Any:
    return bindparam(name, expanding=True)


# What the claim reads of a due occurrence, tenant by tenant (`store.claim`) and across tenants (`due_index.reads`).
DUE_COLUMNS = (O.c.id, O.c.schedule_id, O.c.job_id, O.c.schedule_version, O.c.scheduled_for, O.c.trigger,
               O.c.status, O.c.attempt, O.c.lease_token)
SCHEDULES = select(
    S.c.id, S.c.script_id, S.c.input_kind, S.c.rrule, S.c.payload, S.c.enabled, S.c.misfire, S.c.catchup_window_s,
    S.c.overlap, S.c.expire_after_s, S.c.max_attempts, S.c.retry_backoff_s, S.c.priority, S.c.version,
).where(S.c.id.in_(_ids()))
JOBS = select(
    J.c.id, J.c.key, J.c.script_id, J.c.run_at, J.c.payload, J.c.expire_after_s, J.c.max_attempts, J.c.state,
    J.c.root_key, J.c.depth,
).where(J.c.id.in_(_ids()))
RUNNING_OF = select(O.c.id, O.c.schedule_id, O.c.lease_until).where(O.c.schedule_id.in_(_ids()), O.c.status == RUNNING)
SCRIPTS = select(SC.c.id, SC.c.timeout_ms, SC.c.memory_mb, SC.c.current_version).where(SC.c.id.in_(_ids()))

@dataclass(frozen=True)
class ScriptAtHand:
    id: int
    timeout_ms: int
    memory_mb: int
    version: int
    source: str


class Pending(NamedTuple):
    """A runnable occurrence of this claim transaction, claimed in bulk at its end."""

    row: Any
    owner: Any
    script: Any
    policy: policies.Policy
    token: str
    lease: datetime


class ClaimRows:
    """The rows one claim transaction works on, loaded with one query per table."""

    def __init__(self, store: TenantClaims, s: Session, tenant: str, rows: Sequence[Any], lease_from: datetime,
                 reads: Any = None) -> None:
        """`reads`: the owners, running attempts, scripts and day's use read already (`due_index.reads`)."""
        self.day: tuple[int, int] | None = None if reads is None else reads.day
        self.running: dict[int, dict[int, datetime]]  # schedule id -> {occurrence id: lease end}
        if reads is not None:
            self.schedules, self.jobs, self.running = reads.schedules, reads.jobs, reads.running
            self.scripts = store._with_sources(s, tenant, reads.scripts, reads.sources)
        else:
            self._read(store, s, tenant, rows)
        self.pending: list[Pending] = []
        self.leases: dict[int, datetime] = {}  # lease end by script timeout
        self.lease_from = lease_from  # when they start
        self.plans: list[tuple[Any, datetime]] = []  # (schedule, after): next occurrences to plan
        self.claims: list[Claim] = []
        self.recorded: dict[str, int] = {}
        self.budget: list[Any] | None = None  # [quotas, runs today, ms today], read on the first claim
        self.deferred = False  # plans and pending left to the caller (`_claim_rows(..., defer=True)`)

    def _read(self, store: TenantClaims, s: Session, tenant: str, rows: Sequence[Any]) -> None:
        sids = sorted({r.schedule_id for r in rows if r.schedule_id is not None})
        jids = sorted({r.job_id for r in rows if r.job_id is not None})
        self.schedules = {r.id: r for r in s.execute(SCHEDULES, {"b_ids": sids})} if sids else {}
        self.jobs = {r.id: r for r in s.execute(JOBS, {"b_ids": jids})} if jids else {}
        # Running attempts of these schedules (for overlap), kept current as this batch claims and recovers.
        self.running = {}
        if sids:
            for r in s.execute(RUNNING_OF, {"b_ids": sids}):
                self.running.setdefault(r.schedule_id, {})[r.id] = r.lease_until
        script_ids = {r.script_id for r in [*self.schedules.values(), *self.jobs.values()]}
        self.scripts = store._scripts(s, tenant, script_ids)

    def over_budget(self, s: Session, now: datetime) -> str | None:
        """Why the tenant may start no more runs today (its daily quotas), or None (and count this one)."""
        if self.budget is None and self.day is not None:
            # Read at the start of the pass: add the runs this batch has recorded `failed` since
            # (a deleted script's), which a read now would count (skipped and expired ones never count).
            runs, ms = self.day
            self.budget = [quotas.of(s), runs + self.recorded.get("failed", 0), ms]
        if self.budget is None:
            self.budget = [quotas.of(s), *quotas.day_use(s, now)]
        problem = quotas.over_day_budget(*self.budget)
        if problem is None:
            self.budget[1] += 1
        return problem

    def busy_until(self, schedule_id: int, occurrence_id: int) -> datetime | None:
        """The earliest lease end among the schedule's other running attempts, or None."""
        leases = [lease for oid, lease in self.running.get(schedule_id, {}).items() if oid != occurrence_id]
        return min(leases) if leases else None
