"""`pg_scale_bench.py --catalog`: the memory one PostgreSQL backend keeps for the tenants it has met.

A backend keeps a cache entry for every table and index it has opened (PostgreSQL never evicts
them; an entry goes only when its table changes). The scheduler's passes name each picked
tenant's tables, so a pooled connection that claims and records for every tenant ends up holding
entries for all of them: memory that grows with the number of tenants times the number of pooled
connections, whatever the work. This opens, on one fresh connection, the tables a claim and its
record name (`TABLES`), tenant after tenant, by planning a lookup by key in each (as the passes'
planning opens the table and all its indexes), and reports the backend's `CacheMemoryContext`
(`pg_backend_memory_contexts`; needs a superuser or `pg_read_all_stats`) and its anonymous
resident memory (from /proc, when the server runs on this machine). Executing statements adds a
little more (the triggers' entries), so this is a lower bound.
"""

from __future__ import annotations

import os
from typing import Any

TABLES = ("occurrences", "schedules", "jobs", "scripts", "script_versions", "runs")

_CACHE = ("SELECT sum(total_bytes) FROM pg_backend_memory_contexts "
          "WHERE name = 'CacheMemoryContext' OR parent = 'CacheMemoryContext'")


def measure(pg_url: str, slugs: list[str]) -> list[dict[str, Any]]:
    """One row per step of tenants met (1, 10, 100, ... and all): cache bytes and RssAnon."""
    import psycopg

    from almanac.db import schema_for
    from bench import pg_idle, pg_setup

    steps = {n for n in (1, 10, 100, 1_000, 10_000) if n < len(slugs)} | {len(slugs)}
    rows: list[dict[str, Any]] = []
    with psycopg.connect(pg_setup.dsn(pg_url), autocommit=True) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]

        def row(met: int) -> dict[str, Any]:
            cache = int(conn.execute(_CACHE).fetchone()[0] or 0)  # type: ignore[index]
            return {"tenants": met, "cache_mb": round(cache / 2**20, 1), "rss_anon_mb": _mb(pg_idle.status_kb(pid, ("RssAnon",)).get("RssAnon"))}

        rows.append(row(0))
        for met, slug in enumerate(slugs, 1):
            schema = schema_for(slug)  # a validated slug's schema name, quoted below
            for table in TABLES:
                conn.execute(f'EXPLAIN SELECT * FROM "{schema}".{table} WHERE id = 1')
            if met in steps:
                rows.append(row(met))
    first = rows[0]["cache_mb"]
    for r in rows[1:]:
        r["kb_a_tenant"] = round((r["cache_mb"] - first) * 1024 / r["tenants"], 1)
    rows.append({"load": [round(x, 2) for x in os.getloadavg()]})
    return rows


def _mb(kb: int | None) -> float | None:
    return None if kb is None else round(kb / 1024, 1)


def table(rows: list[dict[str, Any]]) -> str:
    """A markdown table of `measure`'s rows, the load average below it."""
    lines = ["| tenants met by one backend | catalog cache MB | backend RssAnon MB | cache kB a tenant |",
             "|---|---|---|---|"]
    for r in rows:
        if "tenants" in r:
            lines.append(f"| {r['tenants']:,} | {r['cache_mb']} | {r['rss_anon_mb']} | {r.get('kb_a_tenant', '')} |")
    load = next((r["load"] for r in rows if "load" in r), None)
    return "\n".join(lines) + (f"\n\ntables met a tenant: {', '.join(TABLES)}; load {load}" if load else "")
