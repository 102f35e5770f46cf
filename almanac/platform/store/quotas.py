"""Per-tenant quotas (SPEC section 3): defaults, operator overrides, use, and the checks.

Overrides live in the shared schema (`tenant_quotas`, one row per tenant that has any; a NULL
column means the default). Use is counted in the tenant's own schema when it is needed:

- kv: keys, and bytes as UTF-8 bytes of key + stored JSON value;
- schedules; pending jobs (state `pending`): on PostgreSQL the sum of `pending_job_counts`, kept by
  a trigger on `jobs` (migration t0017), so that a PUT does not count a delay queue's jobs;
- runs and run time today (UTC day): runs that started (every status but skipped/expired) and
  the sum of their `duration_ms`, the sandbox's measure of a run (our "CPU-seconds").

Counting and then writing is made atomic per tenant and quota: `hold` waits, on PostgreSQL, for a
transaction-scoped advisory lock of the tenant's quota before its use is counted, so that of two
concurrent writers the second counts what the first committed (the `check_*` functions take it
themselves). On SQLite every write transaction begins IMMEDIATE, which serialises writers already.

Passing a quota raises `QuotaExceeded` (429 `quota_exceeded`); a script's `kv.set` or
`schedule.at` rejects with that message; an occurrence due while the daily budget is used up
is recorded `skipped` with the reason (see `store.claim`).
"""

from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, time, timezone
from typing import Any

from sqlalchemy import (
    BigInteger, Column, Integer, LargeBinary, MetaData, String, Table, bindparam, cast, func, literal, select, text,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import Mapped, Session, mapped_column
from sqlalchemy.sql.functions import FunctionElement

from almanac.db import TENANT_SCHEMA, SharedBase, UTCDateTime
from almanac.errors import QuotaExceeded
from almanac.platform.store.models import JOB_PENDING, KV, Job, Run, Schedule
from almanac.platform.store.sql.functions import PENDING_JOBS_HELD

MIB = 1024 * 1024
# PostgreSQL only (t0017): one row per statement that changed the number of pending jobs, folded now and then.
# Not a model of TenantBase: SQLite tenants have no such table.
PENDING_JOB_COUNTS = Table("pending_job_counts", MetaData(schema=TENANT_SCHEMA),
                           Column("id", BigInteger, primary_key=True), Column("n", Integer, nullable=False))


@dataclass(frozen=True)
class Quotas:
    kv_mb: int = 100
    kv_keys: int = 100_000
    schedules: int = 10_000
    pending_jobs: int = 100_000
    runs_per_day: int = 100_000
    cpu_seconds_per_day: int = 3_600


NAMES = tuple(f.name for f in fields(Quotas))
DEFAULTS = Quotas()


class TenantQuota(SharedBase):
    """An operator's overrides for one tenant (NULL: the default)."""

    __tablename__ = "tenant_quotas"

    tenant_slug: Mapped[str] = mapped_column(String(40), primary_key=True)
    kv_mb: Mapped[int | None] = mapped_column(Integer, nullable=True)
    kv_keys: Mapped[int | None] = mapped_column(Integer, nullable=True)
    schedules: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pending_jobs: Mapped[int | None] = mapped_column(Integer, nullable=True)
    runs_per_day: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cpu_seconds_per_day: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # History retention in days (NULL: Settings.retention_days); almanac.retention reads and sets it.
    retention_days: Mapped[int | None] = mapped_column(Integer, nullable=True)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


def quotas_for(shared: Session, slug: str) -> Quotas:
    row = shared.get(TenantQuota, slug)
    if row is None:
        return DEFAULTS
    return replace(DEFAULTS, **{n: getattr(row, n) for n in NAMES if getattr(row, n) is not None})


def of(s: Session) -> Quotas:
    """The quotas of the tenant whose session this is (`Database.tenant_session`), in its transaction.

    A claim across tenants reads them all at once (`quotas_of_many`) and leaves each
    tenant's in its session's `info["quotas"]`: the same transaction, one statement.
    """
    known = s.info.get("quotas")
    return known if known is not None else quotas_for(s, s.info["tenant"])


def quotas_of_many(conn: Any, slugs: list[str]) -> dict[str, Quotas]:
    """Every named tenant's quotas (the defaults where it has no overrides), in one statement."""
    rows = {r.tenant_slug: r for r in conn.execute(select(TenantQuota).where(TenantQuota.tenant_slug.in_(slugs)))}
    return {slug: DEFAULTS if slug not in rows else
            replace(DEFAULTS, **{n: getattr(rows[slug], n) for n in NAMES if getattr(rows[slug], n) is not None})
            for slug in slugs}


def set_quotas(shared: Session, slug: str, changes: dict[str, int], now: datetime) -> Quotas:
    """Operator overrides (`almanac tenant quota`); values must be >= 0."""
    for name, value in changes.items():
        if name not in NAMES or not isinstance(value, int) or not 0 <= value <= 2**31 - 1:
            raise ValueError(f"{name} must be a whole number from 0")
    row = shared.get(TenantQuota, slug)
    if row is None:
        row = TenantQuota(tenant_slug=slug, updated_at=now)
        shared.add(row)
    for name, value in changes.items():
        setattr(row, name, value)
    row.updated_at = now
    shared.flush()
    return quotas_for(shared, slug)


# The second half of a quota's advisory lock key (the first is the tenant's). kv keys and kv bytes are
# one lock: one write changes both. Locks are taken in this order when a transaction takes several.
LOCKS = {"kv": 1, "schedules": 2, "pending_jobs": 3}
_HOLD = text("SELECT pg_advisory_xact_lock(:tenant_key, :quota_key)")


def lock_key(tenant: str) -> int:
    """The tenant's half of its quotas' lock keys: a stable signed 32-bit hash of the slug (a clash
    between two tenants only makes them wait for each other, it never lets a count through)."""
    return zlib.crc32(tenant.encode()) - 2**31


def hold(s: Session, *names: str) -> None:
    """Wait for this tenant's lock of each named quota (`LOCKS`), held until the transaction ends.

    `s`: the tenant session whose transaction counts and then writes; a count made after this sees
    every committed write of the quota. PostgreSQL only: on SQLite a write transaction is already
    the only one.
    """
    conn = s.connection()
    if conn.dialect.name != "postgresql":
        return
    for name in sorted(set(names), key=LOCKS.__getitem__):
        conn.execute(_HOLD, {"tenant_key": lock_key(s.info["tenant"]), "quota_key": LOCKS[name]})


def day_start(now: datetime) -> datetime:
    return datetime.combine(now.astimezone(timezone.utc).date(), time(), tzinfo=timezone.utc)


def _octets(s: Session, column: Any) -> Any:
    if s.get_bind().dialect.name == "postgresql":
        return func.octet_length(column)
    return func.length(cast(column, LargeBinary))


def kv_use(s: Session) -> tuple[int, int]:
    """(keys, bytes) of the tenant's kv."""
    keys, size = s.execute(select(func.count(), func.coalesce(func.sum(_octets(s, KV.key) + _octets(s, KV.value)), 0))
                           .select_from(KV)).one()
    return int(keys), int(size)


def day_use(s: Session, now: datetime) -> tuple[int, int]:
    """(runs started today, their milliseconds) in the tenant, UTC day."""
    runs, ms = s.execute(select(func.count(), func.coalesce(func.sum(Run.duration_ms), 0)).where(
        Run.created_at >= day_start(now), Run.status.not_in(("skipped", "expired")))).one()
    assert ms is not None  # coalesce(..., 0)
    return int(runs), int(ms)


def use(s: Session, now: datetime) -> dict[str, int]:
    """Every quota's use, by quota name (kv in bytes, run time in seconds)."""
    keys, size = kv_use(s)
    runs, ms = day_use(s, now)
    return {
        "kv_mb": size, "kv_keys": keys,
        "schedules": s.execute(select(func.count()).select_from(Schedule)).scalar_one(),
        "pending_jobs": use_pending_jobs(s),
        "runs_per_day": runs, "cpu_seconds_per_day": ms // 1000,
    }


def report(quotas: Quotas, used: dict[str, int]) -> dict[str, dict[str, int]]:
    """{name: {limit, used}}; kv is reported in bytes (`kv_bytes`) beside its limit in MiB."""
    out = {name: {"limit": limit, "used": used[name]} for name, limit in asdict(quotas).items()}
    out["kv_mb"] = {"limit": quotas.kv_mb, "used": used["kv_mb"] // MIB, "used_bytes": used["kv_mb"]}
    return out


def ensure_room(what: str, used: int, adding: int, limit: int) -> None:
    if used + adding > limit:
        raise QuotaExceeded(f"The tenant's quota of {limit} {what} is used up ({used} used).",
                            details={"quota": what, "limit": limit, "used": used})


def check_schedules(s: Session, quotas: Quotas, adding: int = 1) -> None:
    hold(s, "schedules")
    ensure_room("schedules", s.execute(select(func.count()).select_from(Schedule)).scalar_one(), adding,
                quotas.schedules)


def pending_jobs_used(dialect: str) -> Any:
    """The tenant's pending jobs as a scalar subquery: their kept count on PostgreSQL, a count on SQLite."""
    if dialect == "postgresql":
        return select(func.coalesce(func.sum(PENDING_JOB_COUNTS.c.n), 0)).scalar_subquery()

    return select(func.count()).select_from(Job).where(Job.state == JOB_PENDING).scalar_subquery()


class _PendingJobsHeld(FunctionElement[int]):
    """The tenant schema's `almanac_pending_jobs_held_v1(tenant key, quota key)` (PostgreSQL, `sql/tenant/`)."""

    type = BigInteger()
    inherit_cache = True


@compiles(_PendingJobsHeld, "postgresql")
def _held_sql(element: _PendingJobsHeld, compiler: Any, **kw: Any) -> str:
    # The function lives in the tenant's schema: named through the same schema placeholder as the
    # tenant's tables, which the connection's schema_translate_map turns into the tenant's schema.
    schema = compiler.preparer.quote_schema(compiler.preparer.schema_for_object(PENDING_JOB_COUNTS))
    given = [compiler.process(clause, **kw) for clause in element.clauses]
    return PENDING_JOBS_HELD.call(schema, dict(zip(PENDING_JOBS_HELD.argument_names, given, strict=True)))


def pending_jobs_held() -> Any:
    """PostgreSQL: the tenant's pending jobs, counted once its pending-jobs lock is held (to the end
    of the transaction), so that a single statement may count them and insert exactly. The caller
    binds `tenant_key` (`lock_key` of the tenant)."""
    return _PendingJobsHeld(bindparam("tenant_key", type_=Integer), literal(LOCKS["pending_jobs"], Integer))


def use_pending_jobs(s: Session) -> int:
    return int(s.execute(select(pending_jobs_used(s.get_bind().dialect.name))).scalar_one())


def check_pending_jobs(s: Session, quotas: Quotas, adding: int = 1) -> None:
    hold(s, "pending_jobs")
    ensure_room("pending jobs", use_pending_jobs(s), adding, quotas.pending_jobs)


def check_pending_jobs_read(used: int, override: int | None, adding: int = 1) -> None:
    """`check_pending_jobs` with what a caller read of `pending_jobs_used` and the tenant's override."""
    ensure_room("pending jobs", used, adding, DEFAULTS.pending_jobs if override is None else override)


def check_kv(quotas: Quotas, keys: int, size: int) -> None:
    """`keys` and `size` (bytes) as they would be after the write."""
    if keys > quotas.kv_keys:
        raise QuotaExceeded(f"The tenant's quota of {quotas.kv_keys} kv keys is used up.",
                            details={"quota": "kv_keys", "limit": quotas.kv_keys})
    if size > quotas.kv_mb * MIB:
        raise QuotaExceeded(f"The tenant's quota of {quotas.kv_mb} MiB of kv data is used up.",
                            details={"quota": "kv_mb", "limit": quotas.kv_mb})


def over_day_budget(quotas: Quotas, runs: int, ms: int) -> str | None:
    """Why a run may not start today, or None."""
    if runs >= quotas.runs_per_day:
        return f"quota_exceeded: the tenant's {quotas.runs_per_day} runs a day are used up"
    if ms >= quotas.cpu_seconds_per_day * 1000:
        return f"quota_exceeded: the tenant's {quotas.cpu_seconds_per_day} CPU-seconds a day are used up"
    return None
