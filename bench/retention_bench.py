"""Claim latency while history is pruned, on PostgreSQL.

    .venv/bin/python bench/retention_bench.py                  # 200,000 old runs (1,000,000 old rows)
    .venv/bin/python bench/retention_bench.py --old 2000000    # the issue's 10 million rows
    options: --claims N --batch 500 --pg-url postgresql+psycopg://...

One tenant on a throwaway PostgreSQL (tests/support/pg.py; fsync off) unless --pg-url is given. Its
history is filled by SQL: `--old` finished runs 40 days old, each with its ended occurrence, one event,
its fan-out marker and one succeeded delivery (5 rows each). Jobs due now are made through the batch
API's core (`batch.upsert_jobs`). Then `SqlStore.claim_due(limit=10)` is timed, `--claims` calls
without pruning, then as many while `retention.prune_tenant` (the server's pruner, `--batch` rows per
transaction, `--rest` seconds apart) runs in a thread of the same process, as the server runs it. Prints a table with the
command and the load average.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SECRET = "bench-secret-key-0123456789abcdef"
BASE = 10_000_000  # ids of the generated history, clear of the sequences' own


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def fill_history(db: Any, slug: str, old: int, now: datetime) -> float:
    from sqlalchemy import text

    from almanac.db import schema_for
    from almanac.delivery.models import Target

    with db.tenant_session(slug) as s:
        target = Target(kind="webhook", name="t", url="https://example.com/h", topics='["*"]', enabled=True,
                        created_at=now, updated_at=now)
        s.add(target)
        s.flush()
        target_id = target.id
    schema = schema_for(slug)
    when = (now - timedelta(days=40)).isoformat()
    t0 = time.monotonic()
    chunk = 200_000
    for start in range(1, old + 1, chunk):
        end = min(old, start + chunk - 1)
        params = {"a": start, "b": end, "base": BASE, "when": when, "target": target_id}
        with db.engine.begin() as conn:
            for sql in (
                f"""INSERT INTO "{schema}".occurrences (id, schedule_id, scheduled_for, priority, trigger, status,
                    attempt, run_id, created_at) SELECT CAST(:base AS integer) + g, CAST(:base AS integer) + g, CAST(:when AS timestamptz)
                    - g * interval '1 second', 0, 'schedule', 'done', 1, :base + g, CAST(:when AS timestamptz)
                    FROM generate_series(CAST(:a AS integer), CAST(:b AS integer)) g""",
                f"""INSERT INTO "{schema}".runs (id, occurrence_id, schedule_id, trigger, scheduled_for, created_at,
                    started_at, finished_at, status, attempt) SELECT CAST(:base AS integer) + g, CAST(:base AS integer) + g, :base + g, 'schedule',
                    CAST(:when AS timestamptz), CAST(:when AS timestamptz), CAST(:when AS timestamptz),
                    CAST(:when AS timestamptz), 'succeeded', 1 FROM generate_series(CAST(:a AS integer), CAST(:b AS integer)) g""",
                f"""INSERT INTO "{schema}".events (id, run_id, topic, data, created_at, attempts)
                    SELECT CAST(:base AS integer) + g, CAST(:base AS integer) + g, 'x', '{{}}', CAST(:when AS timestamptz), 0
                    FROM generate_series(CAST(:a AS integer), CAST(:b AS integer)) g""",
                f"""INSERT INTO "{schema}".event_fanouts (event_id, public_id, fanned_out_at)
                    SELECT :base + g, 'evt_' || g, CAST(:when AS timestamptz) FROM generate_series(CAST(:a AS integer), CAST(:b AS integer)) g""",
                f"""INSERT INTO "{schema}".deliveries (id, event_id, target_id, order_key, status, attempts,
                    created_at, updated_at) SELECT CAST(:base AS integer) + g, CAST(:base AS integer) + g, :target, 'schedule:1', 'succeeded', 1,
                    CAST(:when AS timestamptz), CAST(:when AS timestamptz) FROM generate_series(CAST(:a AS integer), CAST(:b AS integer)) g""",
            ):
                conn.execute(text(sql), params)
        print(f"  {end:,} old runs ({end * 5:,} rows), {time.monotonic() - t0:.0f} s", flush=True)
    with db.engine.begin() as conn:
        conn.execute(text(f'ANALYZE "{schema}".occurrences, "{schema}".runs, "{schema}".events'))
    return time.monotonic() - t0


def make_due_jobs(db: Any, slug: str, count: int, now: datetime) -> None:
    from almanac.platform.service import batch_writes as batch
    from almanac.platform.store.models import Script, ScriptVersion

    with db.tenant_session(slug) as s:
        script = Script(name="noop", current_version=1, timeout_ms=1000, memory_mb=32, created_at=now, updated_at=now)
        s.add(script)
        s.flush()
        s.add(ScriptVersion(script_id=script.id, version=1, source="export default () => 1;", created_at=now))
        script_id = script.id
    for start in range(0, count, 1000):
        items = [dict(key=f"due-{i}", script_id=script_id, run_at=now - timedelta(seconds=60), payload=None,
                      expire_after_s=None, max_attempts=3, priority=0) for i in range(start, min(count, start + 1000))]
        with db.tenant_session(slug) as s:
            batch.upsert_jobs(s, items, now)


def time_claims(store: Any, slug: str, count: int, stop: threading.Event | None = None,
                pace_s: float = 0.0) -> list[float]:
    """Time up to `count` claims (each takes up to 10 due jobs), `pace_s` apart, until `stop` is set."""
    out = []
    for _ in range(count):
        if stop is not None and stop.is_set():
            break
        t0 = time.perf_counter()
        store.claim_due(slug, datetime.now(timezone.utc), 10)
        out.append((time.perf_counter() - t0) * 1000)
        if pace_s:
            time.sleep(pace_s)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", type=int, default=200_000, help="old finished runs (5 rows each)")
    parser.add_argument("--claims", type=int, default=300, help="claim_due(limit=10) calls without pruning")
    parser.add_argument("--claims-busy", type=int, default=2000,
                        help="at most this many claims while pruning, one every 20 ms until the prune ends")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rest", type=float, default=0.02, help="seconds between two prune transactions "
                        "(the server's Pruner.rest_s); 0: none")
    parser.add_argument("--pg-url")
    args = parser.parse_args()
    load_before = os.getloadavg()
    from almanac import retention
    from almanac.db import Database
    from almanac.platform.store.sql_store import SqlStore
    from almanac.settings import Settings
    from almanac.tenants import migrations, registry
    from tests.support.pg import PgServer

    pg = None if args.pg_url else PgServer()
    url = args.pg_url or pg.start()  # type: ignore[union-attr]
    try:
        db = Database(Settings(database_url=url, var_dir=Path(tempfile.mkdtemp()), secret_key=SECRET))
        migrations.upgrade_shared(db)
        now = datetime.now(timezone.utc)
        registry.create_tenant(db, "bench", admin_email="a@bench.test", admin_password="correct-horse-battery",
                               name="bench", min_interval_seconds=60, now=now)
        fill_s = fill_history(db, "bench", args.old, now)
        due = (args.claims + args.claims_busy) * 10 + 200
        from almanac.platform.store import quotas

        with db.shared_session() as s:  # enough room for the due jobs the claims take
            quotas.set_quotas(s, "bench", {"pending_jobs": max(due, quotas.DEFAULTS.pending_jobs)}, now)
        make_due_jobs(db, "bench", due, now)
        store = SqlStore(db, lease_margin_s=600)
        time_claims(store, "bench", 10)  # warm-up
        quiet = time_claims(store, "bench", args.claims)

        done = threading.Event()
        result: dict[str, Any] = {}

        def prune() -> None:
            t0 = time.monotonic()
            result["pruned"] = retention.prune_tenant(db, "bench", now - timedelta(days=30), batch=args.batch,
                                                      rest=(lambda: time.sleep(args.rest)) if args.rest else None)
            result["seconds"] = time.monotonic() - t0
            done.set()

        pruner = threading.Thread(target=prune)
        pruner.start()
        busy = time_claims(store, "bench", args.claims_busy, stop=done, pace_s=0.02)
        pruner.join()
        pruned = result["pruned"]
        rows = pruned.runs + pruned.occurrences + pruned.events * 2 + pruned.deliveries  # + fan-out markers
        print()
        print("command: " + " ".join([Path(sys.executable).name, *sys.argv]))
        print(f"load average before: {' '.join(f'{x:.2f}' for x in load_before)}; "
              f"after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}  (cores: {os.cpu_count()})")
        print(f"history: {args.old:,} old runs = {args.old * 5:,} rows, written by SQL in {fill_s:.0f} s; "
              f"pruned {rows:,} rows in {result['seconds']:.1f} s ({rows / result['seconds']:.0f} rows/s, "
              f"{pruned.batches} transactions of at most {args.batch} rows, {args.rest} s apart)")
        print()
        print("| claim_due(limit=10) | calls | p50 ms | p99 ms | max ms |")
        print("|---|---|---|---|---|")
        for name, values in (("no pruning", quiet), ("while pruning", busy)):
            print(f"| {name} | {len(values)} | {pct(values, 50):.1f} | {pct(values, 99):.1f} | {max(values):.1f} |")
        if len(busy) >= args.claims_busy:
            print("(the claims ended before the prune: the prune went on alone after them)")
        db.dispose()
    finally:
        if pg is not None:
            pg.stop()


if __name__ == "__main__":
    main()
