"""The store: the tables, and the transactions that plan, claim and record one tenant's runs.

    contract.py            `Store`, the protocol the timer calls, and `Claim`, a claimed attempt
    models.py              every per-tenant table (scripts, kv, outbox, schedules, jobs, occurrences, runs)
    coordination_models.py shared tables through which processes share work (heartbeats, tenant leases)
    sql_store.py           `SqlStore`: the contract on SQLite and PostgreSQL, composed of `TenantClaims`,
                           `Records` and, on PostgreSQL, `DueIndex`
    claim.py               `TenantClaims`: one tenant's claim transaction (policies row by row, claims in bulk)
    claim_rows.py          the rows one claim works on, read with one query per table
    record.py              `Records`: finished attempts recorded, each fenced by its lease token
    run_effects.py         a run's reads (kv) and, when it is recorded, its writes applied
    failures.py            failures in a row: the failed event, and a schedule that pauses itself
    planning.py            the next occurrences of schedules and jobs, in the caller's transaction
    quotas.py              per-tenant quotas: defaults, overrides, use, and the checks
    executemany.py         the hot path's executemany statements, compiled once per dialect
    connection_lanes.py    PostgreSQL: each tenant's claims and records on one connection of the process
    sql/                   PostgreSQL's PL/pgSQL functions, triggers and hot statements, one `.sql` file each
    due_index/             PostgreSQL: the claim and record across tenants through the shared due index

Nothing here starts a thread or reads the clock: callers pass `now`.
"""
