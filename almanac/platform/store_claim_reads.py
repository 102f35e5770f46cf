"""The reads of a claim pass across tenants (PostgreSQL): each kind of row read for every tenant by one statement.

A claim pass (`store_due`) decides the due rows of each tenant it picked. Read tenant by
tenant (`store_claim_batch.Batch`), a schedule's claim cost its tenant five statements: its due
occurrences locked, their schedules, the schedules' running attempts (for overlap), the
scripts, and the runs started today (the daily quotas). In a burst over many tenants
each read found a row or two, and cost ~0.1 ms of the worker's Python, a round trip, and
PostgreSQL a parse and a plan (each tenant's statement text names its own schema).

Here each read is one statement for up to `across.TENANTS_PER_STATEMENT` tenants: a UNION ALL
of the same SELECT in each tenant's schema, tagged with the tenant's place in the list.
The occurrences are locked as before (`FOR UPDATE SKIP LOCKED`, in a CTE per tenant); the
other reads follow from what they found. The same columns are read, in the same order,
as the per-tenant statements of `store_claim`, and times come back in UTC as
`UTCDateTime` gives them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, NamedTuple

from almanac.platform.across import array_literal, chunks, run, schema_quoter
from almanac.platform.models import RUNNING
from almanac.platform.quotas import day_start
from almanac.platform.store_claim_batch import DUE_COLUMNS, JOBS, RUNNING_OF, SCHEDULES, SCRIPTS

class DueRow(NamedTuple):
    """A due occurrence as the claim reads it (`store_claim_batch.DUE_COLUMNS`, in that order)."""

    id: int
    schedule_id: int | None
    job_id: int | None
    schedule_version: int | None
    scheduled_for: datetime
    trigger: str
    status: str
    attempt: int
    lease_token: str | None


class ScheduleRow(NamedTuple):
    id: int
    script_id: int
    input_kind: str
    rrule: str
    payload: str
    enabled: bool
    misfire: str
    catchup_window_s: int
    overlap: str
    expire_after_s: int | None
    max_attempts: int
    retry_backoff_s: int
    priority: int
    version: int


class JobRow(NamedTuple):
    id: int
    key: str
    script_id: int
    run_at: datetime
    payload: str
    expire_after_s: int | None
    max_attempts: int
    state: str
    root_key: str | None
    depth: int


class ScriptRow(NamedTuple):
    id: int
    timeout_ms: int
    memory_mb: int
    current_version: int


class TenantReads:
    """What a tenant's part of the pass needs, read already."""

    __slots__ = ("rows", "schedules", "jobs", "running", "scripts", "sources", "day")

    def __init__(self) -> None:
        self.rows: list[DueRow] = []
        self.schedules: dict[int, ScheduleRow] = {}
        self.jobs: dict[int, JobRow] = {}
        self.running: dict[int, dict[int, datetime]] = {}  # schedule id -> {occurrence id: lease end}
        self.scripts: list[ScriptRow] = []
        self.sources: dict[tuple[int, int], str] = {}  # (script id, version): source, where not known already
        self.day: tuple[int, int] = (0, 0)  # runs started today, their milliseconds


def _utc(value: datetime | None) -> Any:
    return None if value is None else value.astimezone(timezone.utc)


def _columns(columns: Iterable[Any]) -> str:
    """Core columns as a select list: the per-tenant reads' columns (`store_claim_batch`), read alike here."""
    return ", ".join(column.name for column in columns)


_LOCKED = ("SELECT " + _columns(DUE_COLUMNS) + ", priority, due_at FROM {schema}.occurrences "
           "WHERE id = ANY(%(ids{i})s::int[]) AND due_at <= %(now)s ORDER BY priority DESC, due_at, id "
           "FOR UPDATE SKIP LOCKED")
_SCHEDULES = ("SELECT {i}, " + _columns(SCHEDULES.selected_columns) + " FROM {schema}.schedules "
              "WHERE id = ANY(%(sch{i})s::int[])")
_JOBS = "SELECT {i}, " + _columns(JOBS.selected_columns) + " FROM {schema}.jobs WHERE id = ANY(%(job{i})s::int[])"
_RUNNING = ("SELECT {i}, " + _columns(RUNNING_OF.selected_columns) + " FROM {schema}.occurrences "
            "WHERE schedule_id = ANY(%(sch{i})s::int[]) AND status = %(running)s")
_SCRIPTS = ("SELECT {i}, " + _columns(SCRIPTS.selected_columns) + " FROM {schema}.scripts "
            "WHERE id = ANY(%(scr{i})s::int[])")
_SOURCES = ("SELECT {i}, script_id, version, source FROM {schema}.script_versions "
            "WHERE script_id = ANY(%(src{i})s::int[]) AND (script_id, version) IN "
            "(SELECT * FROM unnest(%(src{i})s::int[], %(ver{i})s::int[]))")
_DAY = ("SELECT {i}, count(*), coalesce(sum(duration_ms), 0) FROM {schema}.runs "
        "WHERE created_at >= %(day)s AND status NOT IN ('skipped', 'expired')")


def _ids(values: Iterable[int]) -> str | None:
    """Ids as an array parameter (`across.array_literal`), or None when there are none."""
    ordered = sorted(values)
    return array_literal(ordered, "int") if ordered else None


def _union(template: str, schemas: Sequence[tuple[int, str]]) -> str:
    return " UNION ALL ".join(template.format(i=i, schema=schema) for i, schema in schemas)


def _lock_rows(conn: Any, schemas: list[tuple[int, str]], params: dict[str, Any], reads: list[TenantReads]) -> None:
    ctes = ", ".join(f"l{i} AS ({_LOCKED.format(i=i, schema=schema)})" for i, schema in schemas)
    rows = " UNION ALL ".join(f"SELECT {i} AS part, * FROM l{i}" for i, _ in schemas)
    sql = f"WITH {ctes} SELECT * FROM ({rows}) AS due ORDER BY part, priority DESC, due_at, id"
    for part, *row, _priority, _due in run(conn, sql, params):
        row[4] = _utc(row[4])
        reads[part].rows.append(DueRow(*row))


def _read_owners(conn: Any, schemas: list[tuple[int, str]], params: dict[str, Any], reads: list[TenantReads]) -> None:
    """Schedules, jobs and running attempts of the rows read (one statement each, for the tenants that have some)."""
    with_schedules = [(i, sch) for i, sch in schemas if params[f"sch{i}"]]
    with_jobs = [(i, sch) for i, sch in schemas if params[f"job{i}"]]
    if with_schedules:
        for part, *row in run(conn, _union(_SCHEDULES, with_schedules), params):
            reads[part].schedules[row[0]] = ScheduleRow(*row)
        for part, oid, sid, lease in run(conn, _union(_RUNNING, with_schedules), params):
            reads[part].running.setdefault(sid, {})[oid] = _utc(lease)
    if with_jobs:
        for part, *row in run(conn, _union(_JOBS, with_jobs), params):
            row[3] = _utc(row[3])
            reads[part].jobs[row[0]] = JobRow(*row)


def _read_scripts_and_day(conn: Any, schemas: list[tuple[int, str]], params: dict[str, Any],
                          reads: list[TenantReads], slugs: list[str], known: Callable[[str, int, int], bool]) -> None:
    """The scripts, their sources not `known` already, and the day's use (a statement each)."""
    for i, _ in schemas:
        owners: list[Any] = [*reads[i].schedules.values(), *reads[i].jobs.values()]
        params[f"scr{i}"] = _ids({o.script_id for o in owners})
    with_scripts = [(i, sch) for i, sch in schemas if params[f"scr{i}"]]
    if with_scripts:
        for part, *row in run(conn, _union(_SCRIPTS, with_scripts), params):
            reads[part].scripts.append(ScriptRow(*row))
    for i, _ in schemas:
        wanted = [(r.id, r.current_version) for r in reads[i].scripts if not known(slugs[i], r.id, r.current_version)]
        params[f"src{i}"] = array_literal([sid for sid, _ in wanted], "int") if wanted else None
        params[f"ver{i}"] = array_literal([v for _, v in wanted], "int")
    with_sources = [(i, sch) for i, sch in schemas if params[f"src{i}"]]
    if with_sources:
        for part, sid, version, source in run(conn, _union(_SOURCES, with_sources), params):
            reads[part].sources[(sid, version)] = source
    for part, runs, ms in run(conn, _union(_DAY, schemas), params):
        reads[part].day = (int(runs), int(ms))


def read_tenants(conn: Any, parts: Sequence[tuple[str, list[int]]], now: datetime,
                 known: Callable[[str, int, int], bool]) -> dict[str, TenantReads]:
    """Lock and read the due occurrences `ids` of each (tenant, ids), and what deciding them needs.

    `known(tenant, script id, version)`: whether that source is at hand already (not read again).
    """
    schema = schema_quoter(conn)
    out: dict[str, TenantReads] = {}
    for chunk in chunks(parts):
        schemas = [(i, schema(slug)) for i, (slug, _) in enumerate(chunk)]
        reads = [TenantReads() for _ in chunk]
        params: dict[str, Any] = {"now": now, "day": day_start(now), "running": RUNNING}
        params.update({f"ids{i}": array_literal(ids, "int") for i, (_, ids) in enumerate(chunk)})
        _lock_rows(conn, schemas, params, reads)
        for i, r in enumerate(reads):
            params[f"sch{i}"] = _ids({row.schedule_id for row in r.rows if row.schedule_id is not None})
            params[f"job{i}"] = _ids({row.job_id for row in r.rows if row.job_id is not None})
        _read_owners(conn, schemas, params, reads)
        _read_scripts_and_day(conn, schemas, params, reads, [slug for slug, _ in chunk], known)
        out.update((slug, r) for (slug, _), r in zip(chunk, reads))
    return out
