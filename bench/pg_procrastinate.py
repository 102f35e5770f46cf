"""The reference side of `pg_scale_bench.py`: procrastinate draining the same burst on the same PostgreSQL.

    (used by pg_scale_bench.py; alone: python bench/pg_procrastinate.py --worker DSN CONCURRENCY)

`burst()` applies procrastinate's schema (once), defers `count` jobs of a no-op async task
with `schedule_at` the same instant (one `batch_defer`), starts `procs` worker processes
(`app.run_worker`, `concurrency` jobs at once each, LISTEN/NOTIFY on, polling every
`POLL_S` when idle), and waits until every job succeeded. Times come from procrastinate's
own `procrastinate_events` (`started`, `succeeded`), on the database's clock: drain rate =
jobs / (last success - due), start lag = started - due.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

POLL_S = 0.2  # an idle worker looks for newly due jobs this often (NOTIFY comes at defer time, not due time)


def make_app(dsn: str, *, sync: bool) -> Any:
    import procrastinate

    connector = procrastinate.SyncPsycopgConnector(conninfo=dsn) if sync else procrastinate.PsycopgConnector(conninfo=dsn)
    app = procrastinate.App(connector=connector)

    @app.task(name="noop", queue="bench")
    async def noop(n: int = 0) -> None:  # the same nothing as Almanac's no-op runner
        return None

    return app


def prepare(url: str) -> None:
    import psycopg

    from bench import pg_setup  # here: the workers run this file as a script, without the package

    with psycopg.connect(pg_setup.dsn(url), autocommit=True) as conn:
        exists = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()[0]
    if exists is None:
        app = make_app(pg_setup.dsn(url), sync=True)
        with app.open():
            app.schema_manager.apply_schema()


def burst(url: str, count: int, procs: int, concurrency: int, var: Path, timeout_s: float = 600.0,
          lead_s: float = 8.0) -> dict[str, Any]:
    import psycopg

    from bench import pg_setup

    dsn = pg_setup.dsn(url)
    prepare(url)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM procrastinate_jobs")
    workers = [subprocess.Popen([sys.executable, __file__, "--worker", dsn, str(concurrency)],
                                stdout=(var / f"procrastinate-{procs}-{n}.log").open("w"), stderr=subprocess.STDOUT)
               for n in range(procs)]
    try:
        due = (datetime.now(timezone.utc) + timedelta(seconds=lead_s)).replace(microsecond=0)
        app = make_app(dsn, sync=True)
        with app.open():
            task = app.tasks["noop"]
            for start in range(0, count, 5000):  # one batch_defer per 5,000 (its statement grows with the batch)
                task.configure(schedule_at=due).batch_defer(*[{"n": i} for i in range(start, min(count, start + 5000))])
        deadline = time.monotonic() + timeout_s
        with psycopg.connect(dsn, autocommit=True) as conn:
            while True:
                time.sleep(1)
                done = conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'").fetchone()[0]
                if done >= count or time.monotonic() > deadline:
                    break
            last = conn.execute("SELECT max(at) FROM procrastinate_events WHERE type = 'succeeded'").fetchone()[0]
            lags = [r[0] for r in conn.execute(
                "SELECT extract(epoch FROM e.at - j.scheduled_at)::float FROM procrastinate_events e "
                "JOIN procrastinate_jobs j ON j.id = e.job_id WHERE e.type = 'started'")]
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
    span = (last - due).total_seconds() if last else float("nan")
    lags.sort()

    def pct(p: float) -> float:
        return round(lags[min(len(lags) - 1, int(round(p / 100 * (len(lags) - 1))))], 3) if lags else float("nan")

    return {"system": "procrastinate", "processes": procs, "concurrency": concurrency, "due": count, "ran": done,
            "per_second": round(done / span, 1) if span and span > 0 else 0, "drain_s": round(span, 2),
            "lag_p50_s": pct(50), "lag_p99_s": pct(99)}


def worker_main(dsn: str, concurrency: int) -> None:
    app = make_app(dsn, sync=False)

    async def run() -> None:
        async with app.open_async():
            await app.run_worker_async(queues=["bench"], concurrency=concurrency, wait=True,
                                       fetch_job_polling_interval=POLL_S, listen_notify=True,
                                       install_signal_handlers=True, delete_jobs="never")

    asyncio.run(run())


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    worker_main(sys.argv[2], int(sys.argv[3]))
