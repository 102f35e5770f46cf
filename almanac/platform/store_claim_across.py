"""The claim writes of many tenants by ONE statement (PostgreSQL): next occurrences, runs, leases.

A claim pass across tenants (`store_due`) decides each tenant's due rows in turn; in a
burst over many tenants each part claims a row or two. Written tenant by tenant
(`ClaimMixin._flush`), a schedule's claim cost four statements: the next occurrence's
INSERT, the schedule's `next_run_at`, the run's INSERT and the occurrence's
compare-and-set, each a round trip and ~0.1 ms of the worker's Python for a row.

Here the pass defers those writes (`_claim_rows(..., defer=True)`) and makes them at its
end, each tenant's part as data-modifying CTEs of one statement naming its schema, up
to `across.TENANTS_PER_STATEMENT` tenants a statement:

    pl_i   the schedules' next occurrences, INSERT ... ON CONFLICT DO NOTHING
           (`planning.plan_next_many`)
    nx_i   the schedules' `next_run_at`
    ru_i   the runs, INSERT ... RETURNING their ids (`store_claim._INSERT_RUNS_RETURNING`)
    cas_i  each occurrence claimed if its status and attempt are still as read, with the
           lease and its run's id (`store_claim._CLAIM_CAS`), RETURNING what it claimed

and, once for all its tenants, the shared due index's entries of the new and the claimed
occurrences (`across.index_moves`, its row first in the result; the tenants' triggers are
off for the statement).

The statement returns (part, occurrence id, run id) of every claimed occurrence. The
rows are locked FOR UPDATE by the pass, so the compare-and-set cannot miss; should it
ever, the pass raises (nothing is claimed on a guess: the caller rolls back, then
claims again with a savepoint per tenant, which writes tenant by tenant). The CTEs touch
disjoint rows: new occurrences, claimed ones, new runs, schedules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from almanac.platform.across import array_literal, chunks, due_index_by_statement, index_moves, run, schema_quoter
from almanac.platform.models import RUNNING

# (column, array type) of a new occurrence and of a new run, in the order of their values' keys.
_OCCURRENCE = (("scheduled_for", "timestamptz"), ("due_at", "timestamptz"), ("priority", "int"),
               ("trigger", "varchar"), ("status", "varchar"), ("attempt", "int"), ("created_at", "timestamptz"),
               ("schedule_id", "int"), ("schedule_version", "int"))
_RUN = (("occurrence_id", "int"), ("schedule_id", "int"), ("job_key", "varchar"), ("script_id", "int"),
        ("script_version", "int"), ("trigger", "varchar"), ("scheduled_for", "timestamptz"),
        ("created_at", "timestamptz"), ("started_at", "timestamptz"), ("status", "varchar"), ("attempt", "int"),
        ("lease_token", "varchar"))
_CAS = (("id", "int"), ("status", "varchar"), ("attempt", "int"), ("token", "varchar"), ("lease", "timestamptz"))


class Part:
    """One tenant's deferred writes: `occurrences` and `nexts` as `planning.next_occurrences`
    gives them, `runs` as `ClaimMixin._run_values`, `cas` rows (id, status, attempt, token, lease)."""

    __slots__ = ("slug", "occurrences", "nexts", "runs", "cas")

    def __init__(self, slug: str, occurrences: list[dict[str, Any]], nexts: list[dict[str, Any]],
                 runs: list[dict[str, Any]], cas: list[tuple[Any, ...]]) -> None:
        self.slug, self.occurrences, self.nexts, self.runs, self.cas = slug, occurrences, nexts, runs, cas


def _insert(i: int, name: str, schema: str, table: str, cols: Sequence[tuple[str, str]], returning: str) -> str:
    names = ", ".join(col for col, _ in cols)
    arrays = ", ".join(f"%({name}{i}_{col})s::{kind}[]" for col, kind in cols)
    return f"{name}{i} AS (INSERT INTO {schema}.{table} ({names}) SELECT * FROM unnest({arrays}) {returning})"


def _part_sql(i: int, schema: str, part: Part) -> str:
    """The CTEs of one tenant's part; `schema` quoted already."""
    ctes = []
    if part.occurrences:
        ctes.append(_insert(i, "pl", schema, "occurrences", _OCCURRENCE,
                            "ON CONFLICT DO NOTHING RETURNING id, due_at, priority"))
    if part.nexts:
        ctes.append(f"nx{i} AS (UPDATE {schema}.schedules AS x SET next_run_at = v.next "
                    f"FROM unnest(%(nx{i}_id)s::int[], %(nx{i}_next)s::timestamptz[]) AS v(id, next) "
                    f"WHERE x.id = ANY(%(nx{i}_id)s::int[]) AND x.id = v.id)")
    if part.runs:
        ctes.append(_insert(i, "ru", schema, "runs", _RUN, "RETURNING id, occurrence_id"))
        arrays = ", ".join(f"%(cas{i}_{col})s::{kind}[]" for col, kind in _CAS)
        ctes.append(
            f"cas{i} AS (UPDATE {schema}.occurrences AS o SET status = %(running)s, attempt = v.attempt + 1, "
            f"lease_token = v.token, lease_until = v.lease, due_at = v.lease, run_id = ru.id "
            f"FROM unnest({arrays}) AS v(id, status, attempt, token, lease) JOIN ru{i} AS ru ON ru.occurrence_id = v.id "
            f"WHERE o.id = ANY(%(cas{i}_id)s::int[]) AND o.id = v.id AND o.status = v.status "
            f"AND o.attempt = v.attempt RETURNING o.id, o.run_id, o.due_at, o.priority)")
    return ",\n".join(ctes)


def _part_params(i: int, part: Part) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name, rows, cols in (("pl", part.occurrences, _OCCURRENCE), ("ru", part.runs, _RUN)):
        for col, kind in cols:
            key = "b_" + col  # made once a column, not once a row
            params[f"{name}{i}_{col}"] = array_literal([row[key] for row in rows], kind)
    last = {row["b_id"]: row["b_next"] for row in part.nexts}  # planned twice: the last one's time wins
    params[f"nx{i}_id"] = array_literal(last, "int")
    params[f"nx{i}_next"] = array_literal(last.values(), "timestamptz")
    for k, (col, kind) in enumerate(_CAS):
        params[f"cas{i}_{col}"] = array_literal([row[k] for row in part.cas], kind)
    return params


def statement(parts: Sequence[Part], schema: Callable[[str], str]) -> tuple[str, dict[str, Any]]:
    """The SQL and parameters of these parts' writes; it returns (part, occurrence id, run id) per claim.

    `schema(slug)` gives a tenant's schema as SQL (`across.schema_quoter`).
    """
    params: dict[str, Any] = {"running": RUNNING}
    ctes, claimed, moved = [], [], []
    for i, part in enumerate(parts):
        params.update(_part_params(i, part))
        params[f"slug{i}"] = part.slug
        ctes.append(_part_sql(i, schema(part.slug), part))
        for cte in ([f"pl{i}"] if part.occurrences else []) + ([f"cas{i}"] if part.runs else []):
            moved.append(f"SELECT %(slug{i})s::varchar, id, due_at, priority FROM {cte}")
        if part.runs:
            claimed.append(f"SELECT {i}, id, run_id FROM cas{i}")
    if moved:  # the index's row first (part -1, not a claim): the result reads it, so `ixm` runs
        ctes.append(index_moves(moved))
        claimed.insert(0, "SELECT -1, written, NULL::int FROM ixm")
    body = " UNION ALL ".join(claimed) or "SELECT NULL::int, NULL::int, NULL::int WHERE false"
    return "WITH " + ",\n".join(c for c in ctes if c) + "\n" + body, params


def write_claims(conn: Any, parts: Sequence[Part]) -> dict[tuple[str, int], int]:
    """Make these parts' writes in `conn`'s transaction; the run id of each claimed (tenant, occurrence).

    Raises RuntimeError when some compare-and-set missed (the caller rolls back).
    """
    schema = schema_quoter(conn)
    run_ids: dict[tuple[str, int], int] = {}
    writing = [part for part in parts if part.occurrences or part.nexts or part.runs]
    if not writing:
        return run_ids
    with due_index_by_statement(conn):
        for chunk in chunks(writing):
            sql, params = statement(chunk, schema)
            for i, occurrence_id, run_id in run(conn, sql, params):
                if i >= 0:  # -1: the due index's row
                    run_ids[(chunk[i].slug, occurrence_id)] = run_id
            wanted = sum(len(part.cas) for part in chunk)
            claimed = sum(1 for part in chunk for row in part.cas if (part.slug, row[0]) in run_ids)
            if claimed != wanted:
                raise RuntimeError(f"claim changed {claimed} locked occurrences, expected {wanted}")
    return run_ids
