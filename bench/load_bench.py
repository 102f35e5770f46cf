"""The scheduler under load (SPEC section 11): slow bursts, a noisy tenant, the 09:00 herd.

    .venv/bin/python bench/load_bench.py [--scenario slow,quiet,herd,hostile] [--runner sim|sandbox]
        [--slow-jobs 600 --slow-ms 300 --lease-margin 30]
        [--noisy-jobs 5000 --noisy-ms 20 --quiet-jobs 40]
        [--herd-tenants 200 --herd-schedules 20000]
        [--hostile-s 15 --hostile-jobs 40]

Scenarios (each on a fresh embedded SQLite database, with the scheduler as `almanac worker` builds it):

- slow: one tenant, `--slow-jobs` jobs of `--slow-ms` each, all due at once, on
  `--processes` (2) sandbox processes; a claim's lease is the script's timeout
  (1 s) + `--lease-margin`. Counts runs ended "its lease lapsed" (false lapses:
  every process stays alive) and jobs that took more than one attempt.
- quiet: a noisy tenant with `--noisy-jobs` jobs of `--noisy-ms` due at once; a
  quiet tenant has one job due every 0.5 s while the backlog drains. The quiet
  runs' start lag (recorded started_at - scheduled_for) p50/p99/max.
- herd: `--herd-schedules` daily schedules over `--herd-tenants` tenants, all due
  at the same second (the top of the hour). Drain time, runs per schedule
  (exactly once each), and per tenant: the lag of its first start and of its
  last finish (an even interleaving gives every tenant an early first start).

- hostile: a real `almanac serve` (the sandbox pool of `--processes`). One tenant floods it for
  `--hostile-s`: 8 clients calling run-now and 2 pages calling "Run with payload" in a loop, and
  `--hostile-jobs` jobs due at once, every run waiting on a server that never answers (until its
  3 s timeout). Another tenant meanwhile has a job due every 0.5 s and calls the API
  (`GET /api/v1/schedules`) and `/healthz` in a loop: their p50/p99, and its runs' start lag.
  The flood begins once the server's sandbox pool is up (a fresh var dir compiles its image first).
  (`--runner` does not apply: the server runs scripts in its own sandbox pool.)

`--runner sim` (default) stands in for the sandbox pool without using CPU: `--processes`
threads take runs from one FIFO queue (as the pool's workers take tickets), each run
sleeping its time, and report the run's own duration, as the pool does; it accepts
`runs_in_flight` = 10 per process, as `SandboxRunner` does. `--runner sandbox` runs a
real busy-waiting script in the real pool (CPU-bound: the slow scenario then takes
the two cores for its whole drain).

With `--code DIR` the scheduler is imported from another checkout (e.g. the code before
`git archive <commit> | tar -x -C DIR`), for a before/after on one box.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import queue
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

SECRET = "bench-secret-key-0123456789"


def busy_js(ms: float) -> str:
    return f"export default function () {{ const end = Date.now() + {ms}; while (Date.now() < end) {{}} return 1; }}"


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class SimPool:
    """The sandbox pool's queueing without its CPU: `processes` threads take runs first come, first served."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._queue: queue.Queue[Any] = queue.Queue()
        self._threads = [threading.Thread(target=self._work, daemon=True) for _ in range(processes)]
        for thread in self._threads:
            thread.start()

    def runs_in_flight(self) -> int:
        return 10 * self.processes

    def _work(self) -> None:
        from almanac.sandbox.contract import RunResult

        while True:
            item = self._queue.get()
            if item is None:
                return
            ms, done = item
            t0 = time.monotonic()
            time.sleep(ms / 1000)
            done(RunResult("succeeded", output=1, duration_ms=max(1, int((time.monotonic() - t0) * 1000))))

    def submit(self, request: Any, caps: Any, done: Any) -> None:
        self._queue.put((float(request.source.split("Date.now() + ")[1].split(";")[0]), done))

    def run(self, *args: Any) -> Any:
        raise AssertionError("the scheduler uses submit")

    def check_syntax(self, source: str) -> None:
        return None

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        from almanac.db import Database
        from almanac.settings import Settings
        from almanac.tenants import migrations

        self.args = args
        self.var = Path(tempfile.mkdtemp(prefix="almanac-load-"))
        self.settings = Settings(database_url=f"sqlite:///{self.var}/almanac.db", var_dir=self.var, secret_key=SECRET)
        self.db = Database(self.settings)
        migrations.upgrade_shared(self.db)
        from almanac import logs

        logs.configure("info", (self.var / "almanac.log").open("a", encoding="utf-8"))  # as `almanac worker` logs
        self.tenants: list[str] = []

    def tenant(self, slug: str) -> str:
        from almanac.tenants import registry

        registry.create_tenant(self.db, slug, admin_email=f"a@{slug}.test", admin_password="correct-horse-battery",
                               name=slug, min_interval_seconds=1, now=datetime.now(timezone.utc))
        self.tenants.append(slug)
        return slug

    def script(self, slug: str, ms: float) -> int:
        from almanac.platform.store.models import Script, ScriptVersion

        now = datetime.now(timezone.utc)
        with self.db.tenant_session(slug) as s:
            script = Script(name=f"busy-{ms}", current_version=1, timeout_ms=1000, memory_mb=32,
                            created_at=now, updated_at=now)
            s.add(script)
            s.flush()
            s.add(ScriptVersion(script_id=script.id, version=1, source=busy_js(ms), created_at=now))
            return script.id

    def jobs(self, slug: str, script_id: int, times: list[datetime], prefix: str = "job") -> None:
        from almanac.platform.store import planning

        with self.db.tenant_session(slug) as s:
            for i, at in enumerate(times):
                fields = dict(script_id=script_id, run_at=at, payload="null", expire_after_s=None,
                              max_attempts=3, priority=0)
                planning.upsert_job(s, f"{prefix}-{i}", fields, now=datetime.now(timezone.utc))

    def scheduler(self) -> tuple[Any, Any]:
        from almanac.platform.clock import SystemClock
        from almanac.platform.store.sql_store import SqlStore
        from almanac.platform.timer.scheduler import Scheduler
        from almanac.worker import SandboxRunner

        if self.args.runner == "sim":
            runner: Any = SimPool(self.args.processes)
        else:
            runner = SandboxRunner(self.var / "cache", self.args.processes)
            runner.start()
            runner.ready(120)
        store = SqlStore(self.db, lease_margin_s=self.args.lease_margin)
        kwargs: dict[str, Any] = dict(workers=runner.runs_in_flight())
        if "parallel" in inspect.signature(Scheduler).parameters:  # older trees have no `parallel`
            kwargs.update(parallel=self.args.processes, tenant_max_share=self.settings.tenant_max_share)
        return Scheduler(store, runner, SystemClock(), lambda: list(self.tenants), **kwargs), runner

    def runs(self, slug: str) -> list[Any]:
        from sqlalchemy import select

        from almanac.platform.store.models import Run

        R = Run.__table__
        with self.db.tenant_session(slug) as s:
            return s.execute(select(R.c.job_key, R.c.schedule_id, R.c.status, R.c.reason, R.c.attempt, R.c.created_at,
                                    R.c.scheduled_for, R.c.started_at, R.c.finished_at)).all()

    def pending(self, slug: str, until: datetime | None) -> int:
        """Occurrences not done (scheduled at or before `until`: a schedule's next one is planned for tomorrow)."""
        from sqlalchemy import func, select

        from almanac.platform.store.models import Occurrence

        O = Occurrence.__table__
        query = select(func.count()).select_from(O).where(O.c.status != "done")
        if until is not None:
            query = query.where(O.c.scheduled_for <= until)
        with self.db.tenant_session(slug) as s:
            return s.execute(query).scalar_one()

    def drain(self, slugs: list[str], timeout_s: float, until: datetime | None = None) -> float:
        scheduler, runner = self.scheduler()
        t0 = time.monotonic()
        self.started_at = datetime.now(timezone.utc)
        scheduler.start()
        try:
            while time.monotonic() - t0 < timeout_s:
                time.sleep(0.5)
                if all(self.pending(slug, until) == 0 for slug in slugs):
                    break
            return time.monotonic() - t0
        finally:
            scheduler.stop()
            runner.close()


def secs(a: datetime, b: datetime) -> float:
    return (a - b).total_seconds()


def slow(args: argparse.Namespace) -> dict[str, Any]:
    bench = Bench(args)
    slug = bench.tenant("slow")
    script = bench.script(slug, args.slow_ms)
    due = datetime.now(timezone.utc) + timedelta(seconds=1)
    bench.jobs(slug, script, [due] * args.slow_jobs)
    bench.drain([slug], 3600)
    runs = bench.runs(slug)
    drain = max(secs(r.finished_at, due) for r in runs if r.finished_at)
    lapsed = [r for r in runs if "lease lapsed" in (r.reason or "")]
    attempts: dict[str, int] = {}
    for r in runs:
        attempts[r.job_key] = attempts.get(r.job_key, 0) + 1
    succeeded = {r.job_key for r in runs if r.status == "succeeded"}
    return {"scenario": f"slow burst: {args.slow_jobs} x {args.slow_ms:g} ms, lease 1 s + {args.lease_margin:g} s",
            "drain_s": round(drain, 1), "false_lease_lapses": len(lapsed),
            "jobs_with_retries": sum(1 for n in attempts.values() if n > 1),
            "jobs_succeeded": len(succeeded)}


def quiet(args: argparse.Namespace) -> dict[str, Any]:
    bench = Bench(args)
    noisy, calm = bench.tenant("noisy"), bench.tenant("quiet")
    now = datetime.now(timezone.utc)
    start = now + timedelta(seconds=2)
    bench.jobs(noisy, bench.script(noisy, args.noisy_ms), [start] * args.noisy_jobs)
    quiet_times = [start + timedelta(seconds=1 + 0.5 * i) for i in range(args.quiet_jobs)]
    bench.jobs(calm, bench.script(calm, 1), quiet_times, prefix="quiet")
    bench.drain([noisy, calm], 3600)
    # Only occurrences due after the scheduler started (loading 5,000 jobs one upsert each takes
    # seconds: the first quiet times may be past before it starts, and their lag is the loading's).
    calm_runs = [r for r in bench.runs(calm) if r.started_at and r.scheduled_for >= bench.started_at]
    lags = [secs(r.started_at, r.scheduled_for) for r in calm_runs]
    claim_lags = [secs(r.created_at, r.scheduled_for) for r in calm_runs]
    noisy_runs = bench.runs(noisy)
    last_noisy = max(r.finished_at for r in noisy_runs if r.finished_at)
    return {"scenario": f"quiet tenant beside {args.noisy_jobs} x {args.noisy_ms:g} ms of a noisy one",
            "noisy_drain_s": round(secs(last_noisy, start), 1), "quiet_runs": len(lags),
            "quiet_during_backlog": sum(1 for t in quiet_times if t < last_noisy),
            "quiet_lag_p50_s": round(pct(lags, 50), 3), "quiet_lag_p99_s": round(pct(lags, 99), 3),
            "quiet_lag_max_s": round(max(lags), 3) if lags else None,
            "quiet_claim_lag_p50_s": round(pct(claim_lags, 50), 3), "quiet_claim_lag_p99_s": round(pct(claim_lags, 99), 3)}


def herd(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).parent))
    from pg_scale_bench import fill_tenant
    from sqlalchemy import update

    from almanac.platform.store.models import Occurrence, ScriptVersion

    bench = Bench(args)
    per = args.herd_schedules // args.herd_tenants
    slugs = [bench.tenant(f"h{i:03d}") for i in range(args.herd_tenants)]
    hour = (datetime.now(timezone.utc).hour + 12) % 24
    for slug in slugs:
        fill_tenant(bench.db, slug, per, f"FREQ=DAILY;BYHOUR={hour};BYMINUTE=0;BYSECOND=0")
    due = (datetime.now(timezone.utc) + timedelta(seconds=3)).replace(microsecond=0)
    O, SV = Occurrence.__table__, ScriptVersion.__table__
    for slug in slugs:
        with bench.db.tenant_session(slug) as s:
            s.execute(update(O).values(scheduled_for=due, due_at=due))
            s.execute(update(SV).values(source=busy_js(args.herd_ms)))
    bench.drain(slugs, 3600, until=due)
    first, last, counts = [], [], []
    for slug in slugs:
        runs = [r for r in bench.runs(slug) if r.scheduled_for == due]
        by_schedule: dict[int, int] = {}
        for r in runs:
            by_schedule[r.schedule_id] = by_schedule.get(r.schedule_id, 0) + 1
        counts.extend(by_schedule.values())
        counts.extend([0] * (per - len(by_schedule)))
        first.append(min(secs(r.started_at, due) for r in runs))
        last.append(max(secs(r.finished_at, due) for r in runs))
    return {"scenario": f"herd: {per * len(slugs)} schedules over {len(slugs)} tenants at one second",
            "drain_s": round(max(last), 1), "runs_per_schedule": sorted(set(counts)),
            "first_start_p50_s": round(pct(first, 50), 2), "first_start_max_s": round(max(first), 2),
            "last_finish_min_s": round(min(last), 2), "last_finish_max_s": round(max(last), 2)}


def hostile(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).parent))
    from hostile_tenant import flood_and_measure

    bench = Bench(args)
    return {"scenario": f"hostile tenant: run-now x8, trials x2, {args.hostile_jobs} jobs waiting on fetch, "
                        f"{args.hostile_s:g} s; another tenant measured",
            **flood_and_measure(bench, args)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="slow,quiet,herd")
    parser.add_argument("--runner", choices=("sim", "sandbox"), default="sim")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--lease-margin", type=float, default=30.0)
    parser.add_argument("--slow-jobs", type=int, default=600)
    parser.add_argument("--slow-ms", type=float, default=300)
    parser.add_argument("--noisy-jobs", type=int, default=5000)
    parser.add_argument("--noisy-ms", type=float, default=20)
    parser.add_argument("--quiet-jobs", type=int, default=40)
    parser.add_argument("--herd-tenants", type=int, default=200)
    parser.add_argument("--herd-schedules", type=int, default=20000)
    parser.add_argument("--herd-ms", type=float, default=1)
    parser.add_argument("--hostile-s", type=float, default=15.0)
    parser.add_argument("--hostile-jobs", type=int, default=40)
    parser.add_argument("--code", type=Path, default=None, help="import almanac from this checkout")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.code is not None:
        sys.path.insert(0, str(args.code.resolve()))
    import almanac

    load_before = os.getloadavg()
    scenarios = {"slow": slow, "quiet": quiet, "herd": herd, "hostile": hostile}
    rows = [scenarios[name](args) for name in args.scenario.split(",")]
    load_after = os.getloadavg()
    if args.json:
        print(json.dumps(rows))
        return
    print("command: " + " ".join([Path(sys.executable).name, *sys.argv]))
    print(f"code: {Path(almanac.__file__).parent.parent}; runner {args.runner}, {args.processes} processes")
    for row in rows:
        print(" | ".join(f"{k}={v}" for k, v in row.items()))
    print("load average (1/5/15 min) before / after: "
          + " ".join(f"{x:.2f}" for x in load_before) + " / " + " ".join(f"{x:.2f}" for x in load_after))


if __name__ == "__main__":
    main()
