"""A new job in one statement on PostgreSQL: the single PUT's common case (500 PUTs a second).

`service.put_job` is a transaction of six round trips: BEGIN, a read (the job locked, its script,
the quota), the job, its occurrence, the caller's audit entry, COMMIT. For a key that does not exist
yet (what a delay queue's PUT almost always is), all of it fits one statement run in autocommit:

    WITH ok  AS (SELECT 1 WHERE <no job has the key> AND <the script exists> AND <the quota has room,
                 counted under the tenant's lock of that quota, held until the commit>),
         job AS (INSERT INTO jobs ... SELECT ... FROM ok ON CONFLICT (key) DO NOTHING RETURNING id),
         occ AS (INSERT INTO occurrences ... SELECT ... FROM job),
         row AS (INSERT INTO <each companion table> ... SELECT ... FROM job)
    SELECT job.id, pg_notify(...) if asked FROM job

It is atomic like any statement, and writes nothing unless every part holds. When it creates no job
(the key exists, the script does not, the quota is used up, or another request took the key
meanwhile) it answers None and the caller runs `put_job`, whose transaction says which and answers as
always. The companion rows (the audit entry) are the caller's: the platform knows their table, not
what they mean. The NOTIFY, when asked, goes with the statement's commit, as `notify_in` sends it
with a transaction's.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Boolean, Integer, Table, bindparam, case, exists, func, literal, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError

from almanac.db import Database
from almanac.platform.store import planning
from almanac.platform.store import quotas
from almanac.platform.store.models import JOB_PENDING, Job, Occurrence, Script
from almanac.platform.notify import CHANNEL
from almanac.platform.service.resources import JOB_FIELDS, PutJob

_J = cast(Table, Job.__table__)
_O = cast(Table, Occurrence.__table__)
_JOB_COLUMNS = ("key", "script_id", "run_at", "payload", "expire_after_s", "max_attempts", "priority", "state",
                "root_key", "depth", "created_by_run_id", "created_at", "updated_at")
_OCCURRENCE_COLUMNS = ("scheduled_for", "due_at", "priority", "trigger", "status", "attempt", "created_at")


def _params(table: Table, names: tuple[str, ...], prefix: str) -> list[Any]:
    return [bindparam(f"{prefix}{name}", type_=table.c[name].type) for name in names]


@lru_cache(maxsize=8)
def _statement(companions: tuple[tuple[Table, tuple[str, ...]], ...]) -> Any:
    # Counted under the tenant's pending-jobs lock (`quotas.pending_jobs_held`), kept to the commit:
    # a concurrent PUT waits for this one's job and then counts it.
    used = quotas.pending_jobs_held()
    override = select(quotas.TenantQuota.pending_jobs).where(
        quotas.TenantQuota.tenant_slug == bindparam("tenant")).scalar_subquery()
    ok = select(literal(1).label("ok")).where(
        # The key's existence is asked first: an INSERT that meets the key takes an id from the sequence
        # for nothing (each replacing PUT would). ON CONFLICT is then only for a race with another request.
        ~exists().where(_J.c.key == bindparam("j_key")),
        exists().where(Script.id == bindparam("j_script_id")),
        used + 1 <= func.coalesce(override, bindparam("default_limit", type_=Integer))).cte("ok")
    job = (pg_insert(_J).from_select(list(_JOB_COLUMNS), select(*_params(_J, _JOB_COLUMNS, "j_")).select_from(ok))
           .on_conflict_do_nothing(index_elements=["key"]).returning(_J.c.id).cte("job"))
    occurrence = insert_from(_O, ["job_id", *_OCCURRENCE_COLUMNS],
                             select(job.c.id, *_params(_O, _OCCURRENCE_COLUMNS, "o_"))).cte("occ")
    parts = [occurrence]
    for i, (table, names) in enumerate(companions):
        parts.append(insert_from(table, list(names), select(*_params(table, names, f"c{i}_")).select_from(job))
                     .cte(f"row{i}"))
    woken = case((bindparam("notify", type_=Boolean), func.pg_notify(CHANNEL, bindparam("tenant"))), else_=None)
    return select(job.c.id, woken.label("woken")).add_cte(*parts)


def insert_from(table: Table, names: list[str], rows: Any) -> Any:
    return pg_insert(table).from_select(names, rows)


def create_job(db: Database, tenant: str, key: str, fields: dict[str, Any], now: datetime, *,
               companions: tuple[tuple[Table, dict[str, Any]], ...] = (), notify: bool = False) -> Any | None:
    """A new pending job `key` (with `fields` as `put_job` takes them, payload as JSON text), its
    occurrence at `run_at`, and each companion row, committed; the job's `service.PutJob`. None, with
    nothing written, when the job could not simply be created: the caller then runs `put_job`.
    PostgreSQL only. `notify`: wake every process's timer (NOTIFY) with the commit."""
    values: dict[str, Any] = {name: fields.get(name) for name in JOB_FIELDS}
    values.update(key=key, state=JOB_PENDING, root_key=key, depth=0, created_by_run_id=None, created_at=now,
                  updated_at=now)
    params: dict[str, Any] = {f"j_{name}": values[name] for name in _JOB_COLUMNS}
    occurrence = planning.occurrence_values(now, values["run_at"], values["priority"], "job")
    params.update({f"o_{name}": occurrence[name] for name in _OCCURRENCE_COLUMNS})
    shape = []
    for i, (table, row) in enumerate(companions):
        names = tuple(row)
        shape.append((table, names))
        params.update({f"c{i}_{name}": row[name] for name in names})
    params.update(tenant=tenant, tenant_key=quotas.lock_key(tenant), default_limit=quotas.DEFAULTS.pending_jobs, notify=notify)
    try:
        with db.tenant_connection(tenant) as conn:
            made = conn.execution_options(isolation_level="AUTOCOMMIT").execute(
                _statement(tuple(shape)), params).first()
    except IntegrityError:  # a race the checks did not see (a row a companion refers to, gone): nothing written
        return None
    if made is None:
        return None
    return PutJob(id=made.id, **values)
