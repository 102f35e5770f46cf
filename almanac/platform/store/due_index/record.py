"""The plain finished runs of many tenants recorded by ONE statement (PostgreSQL).

A burst spread over many tenants finishes a run or two per tenant at a time. Recorded
tenant by tenant (`Records.finish_batch`), each tenant cost four statements for
a succeeded run of a schedule: the fenced release of its occurrence, the run's
record, the reset of the schedule's failures in a row, and the release of what was
queued behind it. Each statement cost the worker ~0.1 ms of Python and a round trip,
and PostgreSQL a parse, a plan and an executor start, for a row or two of work: in an
8,000 burst over 1,000 tenants that was about 32,000 statements.

Here the tenants' parts make one statement, up to `tenant_parts.TENANTS_PER_STATEMENT` tenants,
each part one call of its schema's `almanac_record_plain_v2()` (`sql/tenant/`), whose
data-modifying CTEs are:

    rel  the fenced release (`store.record._RELEASE`: the occurrence still holds the
         attempt's token and is running); `id = ANY(...) AND lease_token = ANY(...)` is
         the same as matching pairs, because a token is given to one claim of one
         occurrence only
    run  the run's record (`_FINISH_RUN`), row values from `unnest` of arrays
    job  a job's occurrence done: the job is done (`_FINISH_JOB`)
    que  occurrences queued behind the schedules' runs are due now (`RELEASE_QUEUED`)
    rst  the schedules' failures in a row go back to 0 (`failures._RESET`)

and, once for all its tenants, the shared due index's entries of the released and the
requeued occurrences (`tenant_parts.index_moves` over the calls' rows, read beside the count;
the tenants' triggers are off for the statement). The writes are in a function for the
reason `due_index.writes` gives: static SQL that a backend plans once per tenant, where a
statement naming the tenants was new text, planned afresh, at every call.

The statement returns how many occurrences it released. Fewer than it was given means
some attempt had lost its lease: the caller raises `_Fenced`, the transaction is
rolled back and the runs are recorded the careful way, as with the per-tenant path.
The CTEs touch disjoint rows (running and queued occurrences differ in status), which
PostgreSQL requires of one statement's writes.

The leases of the claims a process holds are renewed the same way (`renew_leases`): one
statement per chunk of tenants, each tenant's part one call of `almanac_renew_leases_v1()`, the
due index moved once for all of them. Renewed row by row, they were a statement per claim held
and a due-index trigger per row, and on a loaded machine many claims wait long enough to be
renewed (docs/decisions/0250-renew-leases-by-one-statement.md).

"Plain" is what this statement can record without Python in between: a run that
succeeded with no effects (no kv writes, events or jobs, which need the quota checks
of `effects`), of an occurrence met once in the batch. Failed runs (retries, the
failure events, a schedule pausing itself) keep the per-tenant path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from almanac.platform.store.due_index.tenant_parts import array_literal, chunks, due_index_by_statement, per_tenant_calls, run, schema_quoter
from almanac.platform.store.models import DONE, JOB_DONE, JOB_PENDING, QUEUED, RUNNING
from almanac.platform.store.sql.functions import RECORD_PLAIN, RENEW_LEASES
from almanac.platform.store.contract import Claim
from almanac.sandbox.contract import RunResult


# The runs' columns a record writes (`a_<column>` arguments of `almanac_record_plain_v2`), each with
# the key of its value in `store.record._finish_values`.
_RUN_VALUE_KEYS = {"status": "b_status", "reason": "b_reason", "started_at": "b_started", "finished_at": "b_finished",
                   "output": "b_output", "error": "b_error", "error_line": "b_error_line", "logs": "b_logs",
                   "duration_ms": "b_duration", "event": "b_event", "cpu_ms": "b_cpu", "http": "b_http"}
_KINDS = {name: kind.removesuffix("[]") for name, kind in RECORD_PLAIN.arguments}
# The arguments every part gives the same value, as a parameter of that name.
_SHARED = {"a_done": DONE, "a_running": RUNNING, "a_queued": QUEUED, "a_job_done": JOB_DONE,
           "a_job_pending": JOB_PENDING}


def is_plain(claim: Claim, result: RunResult, retry: datetime | None) -> bool:
    """Whether the one statement can record this attempt (its occurrence must also be met once)."""
    return (claim.occurrence_id is not None and retry is None and result.status == "succeeded"
            and not result.effects)


def _tenant_params(i: int, items: Sequence[Any], values: list[dict[str, Any]]) -> dict[str, Any]:
    """The parameters of one tenant's part, named `<argument>_<i>`: `items` its plain attempts,
    `values` their runs' values."""
    params: dict[str, Any] = {
        f"a_occurrence_ids_{i}": array_literal([c.occurrence_id for c, *_ in items], "int"),
        f"a_tokens_{i}": array_literal([c.lease_token for c, *_ in items], "varchar"),
        f"a_run_ids_{i}": array_literal([c.run_id for c, *_ in items], "int"),
    }
    for col, key in _RUN_VALUE_KEYS.items():
        params[f"a_{col}_{i}"] = array_literal([v[key] for v in values], _KINDS[f"a_{col}"])
    jobs = [(c.job_id, c.scheduled_for, now) for c, _, _, now in items if c.job_id is not None]
    ids, run_at, at = zip(*jobs) if jobs else ((), (), ())
    params[f"a_job_ids_{i}"] = array_literal(ids, "int")
    params[f"a_job_run_at_{i}"] = array_literal(run_at, "timestamptz")
    params[f"a_job_at_{i}"] = array_literal(at, "timestamptz")
    schedules = sorted({c.schedule_id for c, *_ in items if c.schedule_id is not None})
    params[f"a_schedule_ids_{i}"] = array_literal(schedules, "int")
    params[f"a_queued_due_{i}"] = max(now for *_, now in items) if schedules else None
    return params


def _call(i: int, schema: str) -> str:
    """Part `i`'s call of `almanac_record_plain_v2`, its arguments by name."""
    values = {name: f"%({name})s" if name in _SHARED else f"%({name}_{i})s" for name in RECORD_PLAIN.argument_names}
    return RECORD_PLAIN.call(schema, values)


def statement(parts: Sequence[tuple[str, Sequence[Any]]], schema: Callable[[str], str],
              values: Callable[[Any], dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The SQL and parameters recording `parts`: (tenant slug, its plain attempts as `Finish` tuples).

    `schema(slug)` gives a tenant's schema as SQL (`tenant_parts.schema_quoter`); `values(item)` gives an
    attempt's run values (`_finish_values`).
    """
    params: dict[str, Any] = dict(_SHARED)
    calls = []
    for i, (slug, items) in enumerate(parts):
        params.update(_tenant_params(i, items, [values(item) for item in items]))
        params[f"slug{i}"] = slug
        calls.append(f"SELECT %(slug{i})s::varchar AS slug, w.* FROM {_call(i, schema(slug))} AS w")
    return (f"WITH {per_tenant_calls(calls, 'slug, w_id, w_due_at, w_priority')}\n"
            "SELECT (SELECT count(*) FROM w WHERE w_kind = 0), (SELECT written FROM ixm)"), params


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


Lease = tuple[int, str, datetime]  # (occurrence id, the attempt's token, the new lease end)


def _renew_call(i: int, schema: str) -> str:
    """Part `i`'s call of `almanac_renew_leases_v1`, its arguments by name (`a_running` shared by all)."""
    values = {"a_ids": f"%(ids{i})s", "a_tokens": f"%(tokens{i})s", "a_leases": f"%(leases{i})s",
              "a_running": "%(running)s"}
    return RENEW_LEASES.call(schema, values)


def renew_statement(parts: Sequence[tuple[str, Sequence[Lease]]],
                    schema: Callable[[str], str]) -> tuple[str, dict[str, Any]]:
    """The SQL and parameters renewing `parts` (tenant slug, its leases); it returns (part, occurrence id)
    of every lease renewed, after one row (part -1) that makes the due index follow."""
    params: dict[str, Any] = {"running": RUNNING}
    calls = []
    for i, (slug, leases) in enumerate(parts):
        params[f"ids{i}"] = array_literal([oid for oid, _, _ in leases], "int")
        params[f"tokens{i}"] = array_literal([token for _, token, _ in leases], "varchar")
        params[f"leases{i}"] = array_literal([until for _, _, until in leases], "timestamptz")
        params[f"slug{i}"] = slug
        calls.append(f"SELECT {i} AS part, %(slug{i})s::varchar AS slug, w.* FROM {_renew_call(i, schema(slug))} AS w")
    return (f"WITH {per_tenant_calls(calls, 'slug, w_id, w_due_at, w_priority')}\n"
            "SELECT -1, written FROM ixm UNION ALL SELECT part, w_id FROM w"), params


def renew_leases(conn: Any, by_tenant: Sequence[tuple[str, Sequence[Lease]]]) -> set[tuple[str, int]]:
    """Extend these leases (by tenant, tenants and each one's occurrences in a stable order) in `conn`'s
    transaction, where each occurrence still holds its token and runs; the (tenant, occurrence id) renewed."""
    schema = schema_quoter(conn)
    renewed: set[tuple[str, int]] = set()
    parts = [part for part in by_tenant if part[1]]
    if not parts:
        return renewed
    with due_index_by_statement(conn):
        for chunk in chunks(parts):
            sql, params = renew_statement(chunk, schema)
            renewed.update((chunk[part][0], oid) for part, oid in run(conn, sql, params) if part >= 0)
    return renewed
