"""PostgreSQL's shared due index: every tenant's due work found, claimed and recorded across tenants.

`due_index` (a shared table, kept by triggers on each tenant's occurrences) holds every
planned occurrence's due time. A claim pass picks due rows of any tenants from it, fairly,
`FOR UPDATE SKIP LOCKED`, so any number of processes share the work without a coordinator;
then reads, decides and writes every picked tenant's rows with a few statements in all.

    claim.py          `DueIndex`: the pass (pick, read, decide, write) and the record across tenants
    reads.py          the pass's reads of many tenants by one statement
    writes.py         the pass's claim writes (next occurrences, runs, leases) by one statement
    record.py         plain finished runs of many tenants recorded by one statement
    tenant_parts.py   what those statements share: a statement's part per tenant, its schema

The per-tenant decisions are the store's (`store.claim.TenantClaims`): this folder only
batches their reads and writes across tenants. `SqlStore.due_index` holds one on PostgreSQL.
"""
