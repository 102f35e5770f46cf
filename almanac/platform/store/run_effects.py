"""A run's effects on the platform's side: what its script reads, and applying what it wrote.

The sandbox buffers a run's writes (kv set/delete, emit, schedule.at) in the run's own
process and hands them back with its one result (`almanac.sandbox.contract.RunResult`,
its `Effects`), already checked and in their stored form. Here:

- `TenantReads` answers the run's remote reads (committed kv, and once per run that
  writes, its `allowance`: the tenant's room as committed, so that a write past a quota
  or a per-run limit rejects inside the script, SPEC sections 3 and 8);
- `refusal` checks the quotas again, exactly, in the transaction that records the run
  (concurrent runs may each have fitted alone): a run over them is recorded `failed`
  with the quota's message, not retried, and applies nothing;
- `apply` writes the effects of a succeeded run in that same transaction.

A run that does not succeed applies nothing (SPEC section 10: events are stored first and
delivered after the run commits; a failed attempt's writes would otherwise be seen, or
delivered, before its retry).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, delete, select
from sqlalchemy.orm import Session

from almanac.db import upsert_insert
from almanac.platform.store import planning
from almanac.platform.decisions import policies
from almanac.platform.store import quotas
from almanac.platform.store.models import JOB_PENDING, KV, Event, Job
from almanac.sandbox.contract import Effects

MAX_EMITS_PER_RUN = 100
KVT, EV, J = (cast(Table, m.__table__) for m in (KV, Event, Job))


class TenantReads:
    """The remote side of one run's capabilities: the tenant's committed data, read by the store."""

    def __init__(self, store: Any, tenant: str, *, now: datetime, job_root: str | None) -> None:
        self.store, self.tenant, self.now, self.job_root = store, tenant, now, job_root

    def kv_get(self, key: str) -> Any:
        return self.store.kv_read(self.tenant, key)

    def kv_list(self, prefix: str) -> list[str]:
        return list(self.store.kv_keys(self.tenant, prefix))

    def allowance(self) -> dict[str, Any]:
        room: dict[str, Any] = {
            "emits": MAX_EMITS_PER_RUN, "plans": policies.MAX_SCHEDULE_AT_PER_RUN,
            "chain_max": policies.MAX_FOLLOW_UPS, "ahead_days": policies.MAX_AHEAD.days,
            "latest": (self.now + policies.MAX_AHEAD).isoformat().replace("+00:00", "Z"),
            # The jobs of the chain its follow-ups join: a run that is not a job's begins its own chain,
            # which holds nothing yet (trials too: they plan nothing, but say what they would).
            "chain": sorted(self.store.chain_keys(self.tenant, self.job_root)) if self.job_root else [],
        }
        quota_state = getattr(self.store, "quota_state", None)  # not part of the Store protocol
        if quota_state is not None:
            limits, keys, size, jobs = quota_state(self.tenant)
            room.update(kv_keys=limits.kv_keys, kv_keys_used=keys, kv_bytes=limits.kv_mb * quotas.MIB,
                        kv_bytes_used=size, pending_jobs=limits.pending_jobs, pending_jobs_used=jobs)
        return room


def refusal(s: Session, effects: Effects, charged: list[int] | None, chain_root: str | None = None) -> str | None:
    """Why these effects may not apply now (a quota, or the length of the chain `chain_root` that the
    follow-ups join, counted exactly in this transaction), or None.

    `charged` carries the batch's running use ([kv keys, kv bytes, pending jobs], read on the
    first call that needs it) so that the runs of one transaction are charged together.
    """
    if not effects.kv and not effects.jobs:
        return None
    if effects.jobs and chain_root is not None:
        # Runs of one chain may run side by side, each checked against what was committed when it ran.
        chain = set(s.execute(select(J.c.key).where(J.c.root_key == chain_root)
                              .limit(policies.MAX_FOLLOW_UPS + 1)).scalars())
        problem = policies.chain_problem(len(chain | set(effects.jobs)))
        if problem:
            return problem
    limits = quotas.of(s)
    if charged is None or not charged:  # the first count of this transaction: the quotas' locks first
        quotas.hold(s, "kv", "pending_jobs")
    if charged is not None and not charged:
        keys, size = quotas.kv_use(s)
        charged.extend([keys, size, quotas.use_pending_jobs(s)])
    use = charged if charged is not None else [*quotas.kv_use(s), quotas.use_pending_jobs(s)]
    keys, size, jobs = use
    if effects.kv:
        old: dict[str, int] = dict(s.execute(select(KVT.c.key, quotas._octets(s, KVT.c.key) + quotas._octets(s, KVT.c.value))
                             .where(KVT.c.key.in_(list(effects.kv)))).all())
        for key, text in effects.kv.items():
            before = old.get(key)
            keys += (text is not None) - (before is not None)
            size += (0 if text is None else len(key.encode()) + len(text.encode())) - (before or 0)
        if keys > limits.kv_keys and keys > use[0]:
            return f"quota_exceeded: The tenant's quota of {limits.kv_keys} kv keys is used up."
        if size > limits.kv_mb * quotas.MIB and size > use[1]:
            return f"quota_exceeded: The tenant's quota of {limits.kv_mb} MiB of kv data is used up."
    if effects.jobs:
        pending = set(s.execute(select(J.c.key).where(J.c.key.in_(list(effects.jobs)), J.c.state == JOB_PENDING))
                      .scalars())
        jobs += len(set(effects.jobs) - pending)
        if jobs > limits.pending_jobs and jobs > use[2]:
            return f"quota_exceeded: the tenant's quota of {limits.pending_jobs} pending jobs is used up"
    use[:] = [keys, size, jobs]
    return None


def apply(s: Session, claim: Any, effects: Effects, now: datetime, *, postgres: bool) -> None:
    """A succeeded run's effects, in its finishing transaction."""
    deletes = [key for key, text in effects.kv.items() if text is None]
    if deletes:
        s.execute(delete(KVT).where(KVT.c.key.in_(deletes)))
    for key, text in effects.kv.items():
        if text is not None:
            stmt = upsert_insert("postgresql" if postgres else "sqlite")(KVT).values(key=key, value=text, updated_at=now)
            s.execute(stmt.on_conflict_do_update(index_elements=[KVT.c.key], set_=dict(value=text, updated_at=now)))
    for topic, data in effects.events:
        s.execute(EV.insert().values(run_id=claim.run_id, topic=topic, data=data, created_at=now, attempts=0))
    depth = 1 if claim.job_depth is None else claim.job_depth + 1
    for key, (run_at, payload) in effects.jobs.items():
        fields = dict(script_id=claim.script_id, run_at=datetime.fromisoformat(run_at.replace("Z", "+00:00")),
                      payload=payload, expire_after_s=None, max_attempts=claim.policy.max_attempts, priority=0)
        planning.upsert_job(s, key, fields, now=now, depth=depth, root_key=claim.chain_root,
                            created_by_run_id=claim.run_id)

