"""The plain finished runs of many tenants recorded by ONE statement (PostgreSQL).

A burst spread over many tenants finishes a run or two per tenant at a time. Recorded
tenant by tenant (`RecordMixin._finish_batch`), each tenant cost four statements for
a succeeded run of a schedule: the fenced release of its occurrence, the run's
record, the reset of the schedule's failures in a row, and the release of what was
queued behind it. Each statement cost the worker ~0.1 ms of Python and a round trip,
and PostgreSQL a parse, a plan and an executor start, for a row or two of work: in an
8,000 burst over 1,000 tenants that was about 32,000 statements.

Here the tenants' parts are data-modifying CTEs of one statement, each naming its
tenant's schema, up to `across.TENANTS_PER_STATEMENT` tenants a statement:

    rel_i  the fenced release (`store_record._RELEASE`: the occurrence still holds the
           attempt's token and is running); `id = ANY(...) AND lease_token = ANY(...)` is
           the same as matching pairs, because a token is given to one claim of one
           occurrence only
    run_i  the run's record (`_FINISH_RUN`), row values from `unnest` of arrays
    job_i  a job's occurrence done: the job is done (`_FINISH_JOB`)
    que_i  occurrences queued behind the schedules' runs are due now (`RELEASE_QUEUED`)
    rst_i  the schedules' failures in a row go back to 0 (`failures._RESET`)

and, once for all its tenants, the shared due index's entries of the released and the
requeued occurrences (`across.index_moves`, read beside the count; the tenants' triggers are
off for the statement).

The statement returns how many occurrences it released. Fewer than it was given means
some attempt had lost its lease: the caller raises `_Fenced`, the transaction is
rolled back and the runs are recorded the careful way, as with the per-tenant path.
The CTEs touch disjoint rows (running and queued occurrences differ in status), which
PostgreSQL requires of one statement's writes.

"Plain" is what this statement can record without Python in between: a run that
succeeded with no effects (no kv writes, events or jobs, which need the quota checks
of `effects`), of an occurrence met once in the batch. Failed runs (retries, the
failure events, a schedule pausing itself) keep the per-tenant path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from almanac.platform.across import array_literal, chunks, due_index_by_statement, index_moves, run, schema_quoter
from almanac.platform.models import DONE, JOB_DONE, JOB_PENDING, QUEUED, RUNNING
from almanac.platform.store import Claim
from almanac.sandbox.contract import RunResult


# The runs' columns written, in the order of `store_record._FINISH_RUN`'s values: (column, array type).
_RUN_FIELDS = (
    ("status", "varchar"), ("reason", "varchar"), ("started_at", "timestamptz"), ("finished_at", "timestamptz"),
    ("output", "text"), ("error", "text"), ("error_line", "int"), ("logs", "text"), ("duration_ms", "int"),
    ("event", "text"), ("cpu_ms", "int"), ("http", "text"),
)
_RUN_VALUE_KEYS = ("b_status", "b_reason", "b_started", "b_finished", "b_output", "b_error", "b_error_line",
                   "b_logs", "b_duration", "b_event", "b_cpu", "b_http")


def is_plain(claim: Claim, result: RunResult, retry: datetime | None) -> bool:
    """Whether the one statement can record this attempt (its occurrence must also be met once)."""
    return (claim.occurrence_id is not None and retry is None and result.status == "succeeded"
            and not result.effects)


def _tenant_sql(i: int, schema: str, has_jobs: bool, has_schedules: bool) -> str:
    """The CTEs of one tenant's part; `schema` quoted already."""
    sets = ", ".join(f"{col} = v.{col}" for col, _ in _RUN_FIELDS)
    arrays = ", ".join(f"%(r{i}_{col})s::{kind}[]" for col, kind in _RUN_FIELDS)
    names = ", ".join(col for col, _ in _RUN_FIELDS)
    parts = [
        f"rel{i} AS (UPDATE {schema}.occurrences SET status = %(done)s, due_at = NULL, lease_token = NULL, "
        f"lease_until = NULL WHERE id = ANY(%(o{i})s::int[]) AND lease_token = ANY(%(t{i})s::varchar[]) "
        f"AND status = %(running)s RETURNING id, due_at, priority)",
        f"run{i} AS (UPDATE {schema}.runs AS r SET {sets} "
        f"FROM unnest(%(r{i})s::int[], %(t{i})s::varchar[], {arrays}) AS v(id, token, {names}) "
        f"WHERE r.id = ANY(%(r{i})s::int[]) AND r.id = v.id AND r.lease_token = v.token)",
    ]
    if has_jobs:
        parts.append(
            f"job{i} AS (UPDATE {schema}.jobs AS j SET state = %(job_done)s, updated_at = v.at "
            f"FROM unnest(%(j{i})s::int[], %(ja{i})s::timestamptz[], %(jn{i})s::timestamptz[]) AS v(id, run_at, at) "
            f"WHERE j.id = ANY(%(j{i})s::int[]) AND j.id = v.id AND j.state = %(job_pending)s "
            f"AND j.run_at = v.run_at)")
    if has_schedules:
        parts.append(
            f"que{i} AS (UPDATE {schema}.occurrences SET due_at = %(q{i})s "
            f"WHERE schedule_id = ANY(%(s{i})s::int[]) AND status = %(queued)s RETURNING id, due_at, priority)")
        parts.append(
            f"rst{i} AS (UPDATE {schema}.schedules SET failures_in_row = 0 "
            f"WHERE id = ANY(%(s{i})s::int[]) AND failures_in_row <> 0)")
    return ",\n".join(parts)


def _tenant_params(i: int, items: Sequence[Any], values: list[dict[str, Any]]) -> dict[str, Any]:
    """The parameters of one tenant's part: `items` its plain attempts, `values` their runs' values."""
    params: dict[str, Any] = {
        f"o{i}": array_literal([c.occurrence_id for c, *_ in items], "int"),
        f"t{i}": array_literal([c.lease_token for c, *_ in items], "varchar"),
        f"r{i}": array_literal([c.run_id for c, *_ in items], "int"),
    }
    for (col, kind), key in zip(_RUN_FIELDS, _RUN_VALUE_KEYS):
        params[f"r{i}_{col}"] = array_literal([v[key] for v in values], kind)
    jobs = [(c.job_id, c.scheduled_for, now) for c, _, _, now in items if c.job_id is not None]
    if jobs:
        ids, run_at, at = zip(*jobs)
        params[f"j{i}"] = array_literal(ids, "int")
        params[f"ja{i}"], params[f"jn{i}"] = array_literal(run_at, "timestamptz"), array_literal(at, "timestamptz")
    schedules = sorted({c.schedule_id for c, *_ in items if c.schedule_id is not None})
    if schedules:
        params[f"s{i}"] = array_literal(schedules, "int")
        params[f"q{i}"] = max(now for *_, now in items)
    return params


def statement(parts: Sequence[tuple[str, Sequence[Any]]], schema: Callable[[str], str],
              values: Callable[[Any], dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The SQL and parameters recording `parts`: (tenant slug, its plain attempts as `Finish` tuples).

    `schema(slug)` gives a tenant's schema as SQL (`across.schema_quoter`); `values(item)` gives an
    attempt's run values (`_finish_values`).
    """
    params: dict[str, Any] = {"done": DONE, "running": RUNNING, "queued": QUEUED,
                              "job_done": JOB_DONE, "job_pending": JOB_PENDING}
    ctes, moved = [], []
    for i, (slug, items) in enumerate(parts):
        tenant = _tenant_params(i, items, [values(item) for item in items])
        params.update(tenant)
        params[f"slug{i}"] = slug
        ctes.append(_tenant_sql(i, schema(slug), f"j{i}" in tenant, f"s{i}" in tenant))
        moved.append(f"SELECT %(slug{i})s::varchar, id, due_at, priority FROM rel{i}")
        if f"s{i}" in tenant:
            moved.append(f"SELECT %(slug{i})s::varchar, id, due_at, priority FROM que{i}")
    ctes.append(index_moves(moved))
    released = " UNION ALL ".join(f"SELECT 1 FROM rel{i}" for i in range(len(parts)))
    return (f"WITH {','.join(ctes)}\nSELECT (SELECT count(*) FROM ({released}) AS released), "
            "(SELECT written FROM ixm)"), params


def record_plain(conn: Any, by_tenant: Sequence[tuple[str, Sequence[Any]]],
                 values: Callable[[Any], dict[str, Any]]) -> bool:
    """Record these plain attempts (by tenant, tenants in a stable order) in `conn`'s transaction.

    False when some occurrence did not hold its attempt's token any more: the caller must
    roll the transaction back (part of the batch may have been written).
    """
    schema = schema_quoter(conn)
    with due_index_by_statement(conn):
        for chunk in chunks(by_tenant):
            sql, params = statement(chunk, schema, values)
            ((released, _),) = run(conn, sql, params)
            if released != sum(len(items) for _, items in chunk):
                return False
    return True
