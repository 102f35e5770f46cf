"""The reads of a claim pass across tenants (PostgreSQL): every tenant's reads by one statement.

A claim pass (`due_index.claim`) decides the due rows of each tenant it picked. Read tenant by
tenant (`store.claim_rows.ClaimRows`), a schedule's claim cost its tenant five statements: its due
occurrences locked, their schedules, the schedules' running attempts (for overlap), the
scripts, and the runs started today (the daily quotas). In a burst over many tenants
each read found a row or two, and cost ~0.1 ms of the worker's Python, a round trip, and
PostgreSQL a parse and a plan (each tenant's statement text names its own schema).

Here they are one statement for up to `tenant_parts.TENANTS_PER_STATEMENT` tenants: a UNION ALL of
one call per tenant of its schema's `almanac_claim_reads_v2()` (`sql/tenant/`), tagged
with the tenant's place in the list. The function locks the occurrences as before (`FOR
UPDATE SKIP LOCKED`) and makes the other reads from what it locked, as static SQL that a
backend plans once per tenant: as five statements across tenants, whose text named the
pass's tenants, each was parsed and planned afresh at every pass (docs/decisions/0007-per-tenant-functions.md).
The scripts' sources a process has not met yet are one more statement.
The same columns are read as the per-tenant statements of `store.claim` (the row types
below; `tests/unit/platform/test_claim_reads_columns.py` holds them to both and to the
function's declared columns), and times
come back in UTC as `UTCDateTime` gives them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any, NamedTuple

from almanac.platform.store.due_index.tenant_parts import array_literal, chunks, run, schema_quoter
from almanac.platform.store.models import RUNNING
from almanac.platform.store.quotas import day_start
from almanac.platform.store.sql.functions import CLAIM_READS

class DueRow(NamedTuple):
    """A due occurrence as the claim reads it (`store.claim_rows.DUE_COLUMNS`, in that order)."""

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


class ClaimReads:
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


# A row is (part, `almanac_claim_reads_v2`'s columns in their declared order): a row type's field `f`
# is the column `<prefix>_f`, found by name in the declaration, which a test holds to the installed
# function. `r.*`, not the 42 names: PostgreSQL parses this text anew at every pass, once a tenant.
_ORDER = " ORDER BY part, kind, o_priority DESC, o_due_at, o_id"  # each tenant's due rows in the order it decides them


def _places(prefix: str, row_type: Any) -> list[int]:
    """Where each field of `row_type` is in a row of (part, the function's columns...)."""
    return [CLAIM_READS.position(f"{prefix}_{field}", offset=1) for field in row_type._fields]


_KIND = CLAIM_READS.position("kind", offset=1)
_DUE_AT, _SCHEDULE_AT, _JOB_AT, _SCRIPT_AT = (_places(p, t) for p, t in (
    ("o", DueRow), ("s", ScheduleRow), ("j", JobRow), ("c", ScriptRow)))
_RUNNING_AT = [CLAIM_READS.position(c, offset=1) for c in ("o_id", "o_schedule_id", "o_scheduled_for")]
_DAY_AT = [CLAIM_READS.position(c, offset=1) for c in ("d_runs", "d_ms")]
_UTC_DUE = DueRow._fields.index("scheduled_for")
_UTC_JOB = JobRow._fields.index("run_at")


def _read(i: int, schema: str) -> str:
    values = {"a_ids": f"%(ids{i})s::int[]", "a_now": "%(now)s", "a_day": "%(day)s", "a_running": "%(running)s"}
    return f"SELECT {i} AS part, r.* FROM {CLAIM_READS.call(schema, values)} AS r"


_SOURCES = ("SELECT {i}, script_id, version, source FROM {schema}.script_versions "
            "WHERE script_id = ANY(%(src{i})s::int[]) AND (script_id, version) IN "
            "(SELECT * FROM unnest(%(src{i})s::int[], %(ver{i})s::int[]))")


def _union(template: str, schemas: Sequence[tuple[int, str]]) -> str:
    return " UNION ALL ".join(template.format(i=i, schema=schema) for i, schema in schemas)


def _take(r: ClaimReads, row: Sequence[Any]) -> None:
    """One row of (part, `almanac_claim_reads_v2`'s columns) into its tenant's reads."""
    kind = row[_KIND]
    if kind == 1:  # a running attempt: occurrence id, schedule id, lease end
        occurrence, schedule, lease = (row[k] for k in _RUNNING_AT)
        r.running.setdefault(schedule, {})[occurrence] = _utc(lease)
        return
    if kind == 2:
        r.day = (int(row[_DAY_AT[0]]), int(row[_DAY_AT[1]]))
        return
    due = [row[k] for k in _DUE_AT]
    due[_UTC_DUE] = _utc(due[_UTC_DUE])
    r.rows.append(DueRow(*due))
    if row[_SCHEDULE_AT[0]] is not None:
        schedule_row = ScheduleRow(*(row[k] for k in _SCHEDULE_AT))
        r.schedules[schedule_row.id] = schedule_row
    if row[_JOB_AT[0]] is not None:
        job = [row[k] for k in _JOB_AT]
        job[_UTC_JOB] = _utc(job[_UTC_JOB])
        r.jobs[job[0]] = JobRow(*job)
    script_id = row[_SCRIPT_AT[0]]
    if script_id is not None and all(s.id != script_id for s in r.scripts):
        r.scripts.append(ScriptRow(*(row[k] for k in _SCRIPT_AT)))


def _read_sources(conn: Any, schemas: list[tuple[int, str]], params: dict[str, Any], reads: list[ClaimReads],
                  slugs: list[str], known: Callable[[str, int, int], bool]) -> None:
    """The sources of the scripts read that are not `known` already (one statement, when any)."""
    for i, _ in schemas:
        wanted = [(r.id, r.current_version) for r in reads[i].scripts if not known(slugs[i], r.id, r.current_version)]
        params[f"src{i}"] = array_literal([sid for sid, _ in wanted], "int") if wanted else None
        params[f"ver{i}"] = array_literal([v for _, v in wanted], "int")
    with_sources = [(i, sch) for i, sch in schemas if params[f"src{i}"]]
    if with_sources:
        for part, sid, version, source in run(conn, _union(_SOURCES, with_sources), params):
            reads[part].sources[(sid, version)] = source


def read_tenants(conn: Any, parts: Sequence[tuple[str, list[int]]], now: datetime,
                 known: Callable[[str, int, int], bool]) -> dict[str, ClaimReads]:
    """Lock and read the due occurrences `ids` of each (tenant, ids), and what deciding them needs.

    `known(tenant, script id, version)`: whether that source is at hand already (not read again).
    """
    schema = schema_quoter(conn)
    out: dict[str, ClaimReads] = {}
    for chunk in chunks(parts):
        schemas = [(i, schema(slug)) for i, (slug, _) in enumerate(chunk)]
        reads = [ClaimReads() for _ in chunk]
        params: dict[str, Any] = {"now": now, "day": day_start(now), "running": RUNNING}
        params.update({f"ids{i}": array_literal(ids, "int") for i, (_, ids) in enumerate(chunk)})
        text = " UNION ALL ".join(_read(i, sch) for i, sch in schemas) + _ORDER
        for row in run(conn, text, params):
            _take(reads[row[0]], row)
        _read_sources(conn, schemas, params, reads, [slug for slug, _ in chunk], known)
        out.update((slug, r) for (slug, _), r in zip(chunk, reads))
    return out
