"""The claim writes of many tenants by ONE statement (PostgreSQL): next occurrences, runs, leases.

A claim pass across tenants (`due_index.claim`) decides each tenant's due rows in turn; in a
burst over many tenants each part claims a row or two. Written tenant by tenant
(`TenantClaims._flush`), a schedule's claim cost four statements: the next occurrence's
INSERT, the schedule's `next_run_at`, the run's INSERT and the occurrence's
compare-and-set, each a round trip and ~0.1 ms of the worker's Python for a row.

Here the pass defers those writes (`_claim_rows(..., defer=True)`) and makes them at its
end, up to `tenant_parts.TENANTS_PER_STATEMENT` tenants a statement, each tenant's part one call
of its schema's `almanac_claim_writes_v2()` (`sql/tenant/`), which makes them as
data-modifying CTEs:

    pl   the schedules' next occurrences, INSERT ... ON CONFLICT DO NOTHING
         (`planning.plan_next_many`)
    nx   the schedules' `next_run_at`
    ru   the runs, INSERT ... RETURNING their ids (`store.claim._INSERT_RUNS_RETURNING`)
    cas  each occurrence claimed if its status and attempt are still as read, with the
         lease and its run's id (`store.claim._CLAIM_CAS`), RETURNING what it claimed

and, once for all its tenants, the shared due index's entries of the new and the claimed
occurrences (`tenant_parts.index_moves` over the calls' rows, its row first in the result; the
tenants' triggers are off for the statement).

Why a function: the statement's text names the tenants it writes, so it is new at every
pass, and PostgreSQL parsed, analysed and planned every tenant's four writes every time,
a third of the statement's time. In the function they are static SQL that a backend plans
once per tenant (a generic plan, kept for the connection's life): the statement around
the calls is cheap to plan (docs/decisions/0007-per-tenant-functions.md).

The statement returns (part, occurrence id, run id) of every claimed occurrence. The
rows are locked FOR UPDATE by the pass, so the compare-and-set cannot miss; should it
ever, the pass raises (nothing is claimed on a guess: the caller rolls back, then
claims again with a savepoint per tenant, which writes tenant by tenant). The CTEs touch
disjoint rows: new occurrences, claimed ones, new runs, schedules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from almanac.platform.store.due_index.tenant_parts import array_literal, chunks, due_index_by_statement, per_tenant_calls, run, schema_quoter
from almanac.platform.store.models import RUNNING
from almanac.platform.store.sql.functions import CLAIM_WRITES

# Each group of `almanac_claim_writes_v2`'s arguments, by prefix: the column each one carries.
_OCCURRENCE = tuple(name.removeprefix("pl_") for name in CLAIM_WRITES.argument_names if name.startswith("pl_"))
_RUN = tuple(name.removeprefix("ru_") for name in CLAIM_WRITES.argument_names if name.startswith("ru_"))
_CAS = tuple(name.removeprefix("cas_") for name in CLAIM_WRITES.argument_names if name.startswith("cas_"))
_KINDS = {name: kind.removesuffix("[]") for name, kind in CLAIM_WRITES.arguments}


class Part:
    """One tenant's deferred writes: `occurrences` and `nexts` as `planning.next_occurrences`
    gives them, `runs` as `TenantClaims.run_values`, `cas` rows (id, status, attempt, token, lease)."""

    __slots__ = ("slug", "occurrences", "nexts", "runs", "cas")

    def __init__(self, slug: str, occurrences: list[dict[str, Any]], nexts: list[dict[str, Any]],
                 runs: list[dict[str, Any]], cas: list[tuple[Any, ...]]) -> None:
        self.slug, self.occurrences, self.nexts, self.runs, self.cas = slug, occurrences, nexts, runs, cas


def _part_params(i: int, part: Part) -> dict[str, Any]:
    """Part `i`'s arguments as parameters named `<argument>_<i>`."""
    params: dict[str, Any] = {}
    for prefix, rows, cols in (("pl", part.occurrences, _OCCURRENCE), ("ru", part.runs, _RUN)):
        for col in cols:
            name = f"{prefix}_{col}"
            key = "b_" + col  # made once a column, not once a row
            params[f"{name}_{i}"] = array_literal([row[key] for row in rows], _KINDS[name])
    last = {row["b_id"]: row["b_next"] for row in part.nexts}  # planned twice: the last one's time wins
    params[f"nx_id_{i}"] = array_literal(last, "int")
    params[f"nx_next_{i}"] = array_literal(last.values(), "timestamptz")
    for k, col in enumerate(_CAS):
        params[f"cas_{col}_{i}"] = array_literal([row[k] for row in part.cas], _KINDS[f"cas_{col}"])
    return params


def _call(i: int, schema: str) -> str:
    """Part `i`'s call of `almanac_claim_writes_v2`, its arguments by name (`running` shared by all)."""
    values = {name: f"%({name}_{i})s" for name in CLAIM_WRITES.argument_names}
    values["running"] = "%(running)s"
    return CLAIM_WRITES.call(schema, values)


def statement(parts: Sequence[Part], schema: Callable[[str], str]) -> tuple[str, dict[str, Any]]:
    """The SQL and parameters of these parts' writes; it returns (part, occurrence id, run id) per claim.

    `schema(slug)` gives a tenant's schema as SQL (`tenant_parts.schema_quoter`).
    """
    params: dict[str, Any] = {"running": RUNNING}
    calls = []
    for i, part in enumerate(parts):
        params.update(_part_params(i, part))
        params[f"slug{i}"] = part.slug
        calls.append(f"SELECT {i} AS part, %(slug{i})s::varchar AS slug, w.* FROM {_call(i, schema(part.slug))} AS w")
    # the index's row first (part -1, not a claim): the result reads it, so `ixm` runs
    return (f"WITH {per_tenant_calls(calls, 'slug, id, due_at, priority')}\nSELECT -1, written, NULL::int FROM ixm "
            "UNION ALL SELECT part, id, run_id FROM w WHERE kind = 1"), params


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
