"""`pg_scale_bench.py --floor N`: what PostgreSQL must do at least per run, with a schema per tenant.

The same database, tenants and triggers as the Almanac phases; N of the planned occurrences
(spread evenly over the tenants) fall due at once, and `procs` processes drain them with the
fewest statements a claim and a record can be written in, and no decision in between:

  pick    one statement: due rows of the shared index, `FOR UPDATE SKIP LOCKED`, `batch` of them
  claim   one statement: each tenant's occurrences to `running` (the trigger moves the index row)
          and its runs inserted, as data-modifying CTEs naming the tenant's schema
  record  one statement: each tenant's runs to `succeeded`, occurrences to `done` (the trigger
          drops the index row), the next occurrence inserted (the trigger adds one) and the
          schedules' `next_run_at`

No fairness, no policies, no quotas, no overlap check, no script: it is a floor, not a scheduler.
Two orders of the pick: `grouped` takes the index's rows as they lie (a tenant's rows together,
so a pass touches a few tenants with several rows each), `spread` in a random order (a pass
touches about one row per tenant, as a fair round robin does when every tenant has little due).
`warm`: each process first plans one statement over every tenant's three tables, so that its
backend has their catalog entries at hand (a long-running worker's backend does).

It reports runs per second and the CPU per run of every PostgreSQL process (the `postgres`
user's) and of the draining processes, from /proc: what the drain cost the database, set
against the CPU per run of the Almanac phases in the same run.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from typing import Any

from almanac.db import schema_for
from bench import pg_idle, pg_setup

RUNNING_LEASE = "interval '30 s'"


def claim_statement(parts: list[tuple[str, list[int]]]) -> tuple[str, dict[str, Any]]:
    """Per tenant: its occurrences to running and its runs inserted; returns (part, run, occurrence, ...)."""
    ctes, outs, params = [], [], {}
    for i, (slug, ids) in enumerate(parts):
        s = schema_for(slug)
        params[f"o{i}"] = ids
        ctes.append(
            f"c{i} AS (UPDATE {s}.occurrences SET status = 'running', attempt = attempt + 1, "
            f"lease_token = md5(id::text || clock_timestamp()::text), lease_until = now() + {RUNNING_LEASE}, "
            f"due_at = now() + {RUNNING_LEASE} WHERE id = ANY(%(o{i})s::int[]) AND status = 'planned' "
            f"RETURNING id, schedule_id, scheduled_for, attempt, lease_token)")
        ctes.append(
            f"r{i} AS (INSERT INTO {s}.runs (occurrence_id, schedule_id, script_id, script_version, trigger, "
            f"scheduled_for, created_at, started_at, status, attempt, lease_token) "
            f"SELECT id, schedule_id, 1, 1, 'schedule', scheduled_for, now(), now(), 'running', attempt, lease_token "
            f"FROM c{i} RETURNING id, occurrence_id, schedule_id, lease_token, scheduled_for)")
        outs.append(f"SELECT {i}, id, occurrence_id, schedule_id, lease_token, scheduled_for FROM r{i}")
    return "WITH " + ",\n".join(ctes) + "\n" + " UNION ALL ".join(outs), params


def record_statement(parts: list[tuple[str, list[tuple[Any, ...]]]]) -> tuple[str, dict[str, Any]]:
    """Per tenant: runs succeeded, occurrences done, next occurrences planned; returns the occurrences released."""
    ctes, outs, params = [], [], {}
    for i, (slug, rows) in enumerate(parts):
        s = schema_for(slug)
        for k, name in enumerate(("r", "o", "s", "t", "f")):
            params[f"{name}{i}"] = [row[k] for row in rows]
        ctes.append(
            f"u{i} AS (UPDATE {s}.runs SET status = 'succeeded', finished_at = now(), duration_ms = 0, cpu_ms = 0, "
            f"output = 'null', logs = '' WHERE id = ANY(%(r{i})s::int[]) AND lease_token = ANY(%(t{i})s::varchar[]))")
        ctes.append(
            f"d{i} AS (UPDATE {s}.occurrences SET status = 'done', due_at = NULL, lease_token = NULL, "
            f"lease_until = NULL WHERE id = ANY(%(o{i})s::int[]) AND lease_token = ANY(%(t{i})s::varchar[]) RETURNING 1)")
        ctes.append(
            f"n{i} AS (INSERT INTO {s}.occurrences (schedule_id, schedule_version, scheduled_for, due_at, priority, "
            f"trigger, status, attempt, created_at) SELECT sid, 1, f + interval '1 day', f + interval '1 day', 0, "
            f"'schedule', 'planned', 0, now() FROM unnest(%(s{i})s::int[], %(f{i})s::timestamptz[]) AS v(sid, f) "
            f"ON CONFLICT DO NOTHING)")
        ctes.append(
            f"x{i} AS (UPDATE {s}.schedules AS x SET next_run_at = v.f + interval '1 day' "
            f"FROM unnest(%(s{i})s::int[], %(f{i})s::timestamptz[]) AS v(sid, f) "
            f"WHERE x.id = ANY(%(s{i})s::int[]) AND x.id = v.sid)")
        outs.append(f"SELECT 1 FROM d{i}")
    return "WITH " + ",\n".join(ctes) + "\nSELECT count(*) FROM (" + " UNION ALL ".join(outs) + ") AS d", params


def _pick(spread: bool) -> str:
    order = "due_at, hashtext(tenant_slug || occurrence_id::text)" if spread else "due_at"
    return (f"SELECT tenant_slug, occurrence_id FROM due_index WHERE due_at <= now() ORDER BY {order} "
            "LIMIT %s FOR UPDATE SKIP LOCKED")


def _warm(conn: Any) -> None:
    """Plan a statement over each tenant's tables, a transaction each (their locks would fill the lock table)."""
    for (slug,) in conn.execute("SELECT slug FROM tenants").fetchall():
        s = schema_for(slug)
        with conn.transaction():
            conn.execute(f"EXPLAIN SELECT 1 FROM {s}.occurrences o, {s}.runs r, {s}.schedules x "
                         "WHERE o.id = r.id AND x.id = o.id")


def _drain(url: str, batch: int, spread: bool, warm: bool, ready: Any, go: Any, out: Any, measured: Any) -> None:
    """One draining process: pick, claim, record until nothing is due (it reports its runs and CPU).

    Its connection stays open until the parent has read the PostgreSQL processes' CPU
    (`measured`): a backend that has exited is gone from /proc, and its CPU with it.
    """
    import psycopg

    conn = psycopg.connect(url, autocommit=True)
    if warm:
        _warm(conn)
    ready.release()
    go.wait()
    start = os.times()  # the process's start and warming are not the drain's
    runs, pick = 0, _pick(spread)
    while True:
        with conn.transaction():
            by_tenant: dict[str, list[int]] = {}
            for slug, oid in conn.execute(pick, (batch,)).fetchall():
                by_tenant.setdefault(slug, []).append(oid)
            parts = sorted(by_tenant.items())
            claimed = conn.execute(*claim_statement(parts)).fetchall() if parts else []
        if not claimed:
            break  # nothing due that another process has not locked: the burst is drained or in hand
        finished: dict[str, list[tuple[Any, ...]]] = {}
        for i, *row in claimed:
            finished.setdefault(parts[i][0], []).append(tuple(row))
        with conn.transaction():
            released = conn.execute(*record_statement(sorted(finished.items()))).fetchone()[0]
        if released != len(claimed):
            raise SystemExit(f"record released {released} of {len(claimed)}")
        runs += len(claimed)
    end = os.times()
    out.put((runs, end.user + end.system - start.user - start.system))
    measured.wait()
    conn.close()


def move_burst(url: str, burst: int) -> int:
    """`burst` planned occurrences, spread evenly over the tenants, due a second ago; returns how many."""
    import psycopg

    with psycopg.connect(url) as conn:
        slugs = [r[0] for r in conn.execute("SELECT slug FROM tenants ORDER BY slug")]
        per = max(1, burst // len(slugs))
        for slug in slugs:
            s = schema_for(slug)
            conn.execute(f"UPDATE {s}.occurrences SET due_at = now() - interval '1 s' WHERE id IN "
                         f"(SELECT id FROM {s}.occurrences WHERE status = 'planned' AND due_at > now() "
                         f"ORDER BY id LIMIT {per})")
        conn.commit()
        conn.execute("ANALYZE due_index")
        return conn.execute("SELECT count(*) FROM due_index WHERE due_at <= now()").fetchone()[0]


def run(url: str, burst: int, procs: int, batch: int, *, spread: bool, warm: bool) -> dict[str, Any]:
    """Drain one burst with `procs` processes; the row of the floor's table."""
    url = pg_setup.dsn(url)
    due = move_burst(url, burst)
    ctx = mp.get_context("spawn")
    ready, go, measured, out = ctx.Semaphore(0), ctx.Event(), ctx.Event(), ctx.Queue()
    workers = [ctx.Process(target=_drain, args=(url, batch, spread, warm, ready, go, out, measured))
               for _ in range(procs)]
    for w in workers:
        w.start()
    for _ in workers:
        ready.acquire()
    pg0, t0 = pg_idle.postgres_cpu_seconds(), time.monotonic()
    go.set()
    done = [out.get() for _ in workers]
    wall, pg = time.monotonic() - t0, pg_idle.postgres_cpu_seconds() - pg0
    measured.set()
    for w in workers:
        w.join()
    ran = sum(n for n, _ in done)
    return {"order": "spread" if spread else "grouped", "cache": "warm" if warm else "cold", "processes": procs,
            "batch": batch, "due": due, "ran": ran, "per_second": round(ran / wall, 1),
            "pg_ms": round(1000 * pg / max(ran, 1), 3),
            "client_ms": round(1000 * sum(c for _, c in done) / max(ran, 1), 3),
            "load": [round(x, 2) for x in os.getloadavg()]}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| floor: pick order | backends | processes | pass | due | ran | runs/s | "
             "CPU ms per run: PostgreSQL / drainers | load 1/5/15 |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['order']} | {r['cache']} | {r['processes']} | {r['batch']} | {r['due']} | {r['ran']} | "
                     f"{r['per_second']} | {r['pg_ms']} / {r['client_ms']} | {' / '.join(str(x) for x in r['load'])} |")
    return "\n".join(lines)
