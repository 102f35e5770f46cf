"""Drain time and start lag: Almanac's scheduler beside APScheduler 3 (SQLAlchemy SQLite job store).

    .venv/bin/python bench/scheduler_bench.py [--jobs 2000] [--steady 300] [--rounds N] [--processes N]
                                              [--runner noop [--run-ms MS]] [--no-aps]

Burst: N one-off jobs all due in the same second (with --rounds N, the two
schedulers' bursts alternate N times and the rows give each figure's median,
since a shared box's speed can swing by 2x within minutes). Almanac runs a real sandboxed
script (QuickJS in wasmtime) per job through the full claim -> run -> record path
on the embedded SQLite, with the sandbox as `almanac worker` builds it (a pool of
worker processes, one per core; --processes 0 runs scripts in-process); APScheduler 3 runs a plain Python no-op from its
SQLAlchemy job store on SQLite. Steady: jobs spread evenly at 20 a second, for
the p95 start lag under normal load. Start lag = actual start - scheduled time.

Both schedulers are loaded with their jobs before they start (almanac stopped,
its sandbox pool already up; APScheduler paused). Almanac's jobs are loaded at a
far time and then moved to the due time in two statements. If loading takes
longer than the 3 s head start (APScheduler adds its jobs one transaction each),
a job cannot start before its scheduler does: its lag and the drain time are
then counted from the scheduler's start, not from the (already past) due
time, and the "late start" column says by how much that happened.

Almanac logs its JSON lines at info to a file in the bench's folder, as
`almanac worker` logs them (so their cost is counted). `--runner noop` measures
the scheduler alone: a Python no-op stands in for the sandbox (as in
pg_scale_bench.py), with as many run threads as the sandbox rows keep runs in flight.
`--run-ms` makes each no-op run wait that long without using CPU, as a run
thread waits on its sandbox process: runs then finish a few at a time, as with
the sandbox, instead of whole batches at once.
Every Almanac row also gives the main process's CPU per job (process_time,
which counts this process's threads and not the sandbox's worker processes),
from the scheduler's start until its last run is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections import Counter
import tempfile
import threading
import time
from typing import Any
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import bindparam, func, select, update

NOOP_JS = "export default async function (event) { return event.jobKey; }"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class NoopRunner:
    """The platform's Runner without a sandbox: every run succeeds at once with the job key."""

    def __init__(self, threads: int | None, run_ms: float = 0.0) -> None:
        self.threads, self.run_s = threads, run_ms / 1000

    def runs_in_flight(self) -> int | None:
        return self.threads

    def run(self, request: Any, caps: object) -> object:
        from almanac.sandbox.contract import RunResult

        if self.run_s:
            time.sleep(self.run_s)  # waits like a run thread on its sandbox process, using no CPU
        return RunResult("succeeded", output=request.event["jobKey"])

    def check_syntax(self, source: str) -> None:
        return None

    def close(self) -> None:
        pass


def log_to(path: Path) -> None:
    """JSON lines at info to a file, set up as `almanac worker` sets up its log (so their cost is counted)."""
    from almanac import logs

    logs.configure("info", path.open("a", encoding="utf-8"))


def almanac_run(jobs: int, spread_s: float, processes: int | None, runner_kind: str = "sandbox",
                run_ms: float = 0.0) -> dict[str, float]:
    from almanac.db import Database
    from almanac.platform.store import planning
    from almanac.platform.store.models import Job, Occurrence, Run, Script, ScriptVersion
    from almanac.platform.timer.scheduler import Scheduler
    from almanac.settings import Settings
    from almanac.tenants import migrations, registry
    from almanac.worker import SandboxRunner

    var = Path(tempfile.mkdtemp(prefix="almanac-bench-"))
    settings = Settings(database_url=f"sqlite:///{var}/almanac.db", var_dir=var, secret_key="bench-secret-key-0123456789")
    db = Database(settings)
    migrations.upgrade_shared(db)
    now = datetime.now(timezone.utc)
    registry.create_tenant(db, "bench", admin_email="a@bench.test", admin_password="correct-horse-battery",
                           name="Bench", min_interval_seconds=60, now=now)
    from almanac.platform.clock import SystemClock
    from almanac.platform.store.sql_store import SqlStore

    log_to(var / "almanac.log")
    if runner_kind == "noop":
        sandbox = SandboxRunner(None, processes)  # only for its runs in flight: as many threads
        runner = NoopRunner(sandbox.runs_in_flight(), run_ms)
    else:
        runner = SandboxRunner(var / "cache", processes)
        runner.start()
        if runner.processes and not runner.ready(120):
            raise SystemExit("the sandbox pool did not start")
        from almanac.sandbox.contract import RunRequest
        from almanac.sandbox.limits import Limits

        # A warm sandbox, as a running server has.
        runner.run(RunRequest(NOOP_JS, {}, Limits(timeout_ms=1000, memory_mb=32)), None)
    # Load the jobs through the API's own upsert at a far time, then move them all to
    # `due` in two statements: loading never eats into the head start.
    far = now + timedelta(days=30)
    with db.tenant_session("bench") as s:
        script = Script(name="noop", current_version=1, timeout_ms=1000, memory_mb=32, created_at=now, updated_at=now)
        s.add(script)
        s.flush()
        s.add(ScriptVersion(script_id=script.id, version=1, source=NOOP_JS, created_at=now))
        ids = []
        for i in range(jobs):
            fields = dict(script_id=script.id, run_at=far, payload="null",
                          expire_after_s=None, max_attempts=1, priority=0)
            ids.append(planning.upsert_job(s, f"job-{i}", fields, now=now).id)
    due = (datetime.now(timezone.utc) + timedelta(seconds=2)).replace(microsecond=0) + timedelta(seconds=1)
    step = spread_s / jobs
    times = [due + timedelta(seconds=i * step) for i in range(jobs)]
    with db.tenant_session("bench") as s:
        J, O = Job.__table__, Occurrence.__table__
        s.execute(update(J).where(J.c.id == bindparam("b_id")).values(run_at=bindparam("b_at")),
                  [{"b_id": i, "b_at": at} for i, at in zip(ids, times)])
        s.execute(update(O).where(O.c.job_id == bindparam("b_id")).values(
            scheduled_for=bindparam("b_at"), due_at=bindparam("b_at")),
            [{"b_id": i, "b_at": at} for i, at in zip(ids, times)])
    scheduler = Scheduler(SqlStore(db), runner, SystemClock(), lambda: ["bench"], workers=runner.runs_in_flight())
    started = datetime.now(timezone.utc)
    cpu0, own0 = time.process_time(), time.thread_time()
    scheduler.start()
    try:
        while True:  # an occurrence is done (due_at NULL) in its run's finishing transaction
            with db.tenant_session("bench") as s:
                finished = s.execute(select(func.count()).select_from(O).where(O.c.due_at.is_(None))).scalar()
            if finished >= jobs:
                break
            time.sleep(0.2)
        cpu = time.process_time() - cpu0 - (time.thread_time() - own0)  # not this thread's polling
        with db.tenant_session("bench") as s:
            done = s.execute(select(
                Run.started_at, Run.finished_at, Run.scheduled_for, Run.status, Run.error, Run.reason,
            ).where(Run.status != "running")).all()
    finally:
        scheduler.stop()
        runner.close()
        db.dispose()
    ended = Counter((r.status, r.error or r.reason) for r in done if r.status != "succeeded")
    if ended:
        first = next(r for r in done if r.status != "succeeded")
        raise SystemExit(f"not every run succeeded: {ended.most_common(5)}; the first was scheduled for "
                         f"{first.scheduled_for}, started {first.started_at}, finished {first.finished_at}")
    late = max(0.0, (started - due).total_seconds())
    lags = [(r.started_at - max(r.scheduled_for, started)).total_seconds() for r in done]
    drain = (max(r.finished_at for r in done) - max(due, started)).total_seconds()
    return summary(jobs, drain, lags, late, cpu_ms=cpu * 1000 / jobs)


def summary(jobs: int, drain: float, lags: list[float], late: float, cpu_ms: float | None = None) -> dict[str, float]:
    return {"jobs": jobs, "drain_s": drain, "jobs_per_s": jobs / drain if drain > 0 else float("inf"),
            "lag_p50": statistics.median(lags), "lag_p95": pct(lags, 95), "lag_p99": pct(lags, 99),
            "late_start_s": late, "cpu_ms_per_job": float("nan") if cpu_ms is None else cpu_ms}


_STARTS: list[tuple[float, float]] = []
_LOCK = threading.Lock()


def _aps_noop(scheduled: float) -> None:
    with _LOCK:
        _STARTS.append((scheduled, time.time()))


def apscheduler_run(jobs: int, spread_s: float) -> dict[str, float]:
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    from apscheduler.schedulers.background import BackgroundScheduler

    _STARTS.clear()
    var = Path(tempfile.mkdtemp(prefix="aps-bench-"))
    scheduler = BackgroundScheduler(
        jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{var}/jobs.db")},
        executors={"default": ThreadPoolExecutor(10)},
        job_defaults={"misfire_grace_time": 3600, "coalesce": False},
    )
    scheduler.start(paused=True)
    due = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=3)
    step = spread_s / jobs
    for i in range(jobs):
        when = due + timedelta(seconds=i * step)
        scheduler.add_job(_aps_noop, "date", run_date=when, args=[when.timestamp()], id=f"job-{i}")
    started = time.time()
    scheduler.resume()
    while len(_STARTS) < jobs:
        time.sleep(0.1)
    finish = time.time()
    scheduler.shutdown(wait=True)
    lags = [start - max(scheduled, started) for scheduled, start in _STARTS]
    late = max(0.0, started - due.timestamp())
    return summary(jobs, finish - max(due.timestamp(), started), lags, late)


def table(rows: list[tuple[str, dict[str, float]]]) -> str:
    head = (f"{'scenario':<46}{'jobs':>6}{'drain s':>9}{'jobs/s':>9}{'lag p50':>9}{'lag p95':>9}{'lag p99':>9}"
            f"{'late start':>11}{'cpu ms/job':>11}")
    lines = [head, "-" * len(head)]
    for name, r in rows:
        lines.append(f"{name:<46}{int(r['jobs']):>6}{r['drain_s']:>9.2f}{r['jobs_per_s']:>9.0f}"
                     f"{r['lag_p50']:>9.3f}{r['lag_p95']:>9.3f}{r['lag_p99']:>9.3f}{r['late_start_s']:>11.2f}"
                     f"{r['cpu_ms_per_job']:>11.3f}")
    return "\n".join(lines)


def median_row(results: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's median over rounds (so one round in a slow spell of the box does not decide)."""
    return {key: statistics.median(r[key] for r in results) for key in results[0]}


def bursts(args: argparse.Namespace, what: str) -> list[tuple[str, dict[str, float]]]:
    """The burst rows; with --rounds N, the two schedulers alternate N times and each row is the median."""
    aps: list[dict[str, float]] = []
    ours: list[dict[str, float]] = []
    for i in range(args.rounds):
        if not args.no_aps:
            aps.append(apscheduler_run(args.jobs, 0.0))
        ours.append(almanac_run(args.jobs, 0.0, args.processes, args.runner, args.run_ms))
        if args.rounds > 1:
            done = [f"apscheduler3 {aps[-1]['jobs_per_s']:.0f}"] if aps else []
            print(f"round {i + 1}/{args.rounds}: " + ", ".join(done + [f"almanac {ours[-1]['jobs_per_s']:.0f} jobs/s"]),
                  flush=True)
    label = f", median of {args.rounds}" if args.rounds > 1 else ""
    rows = [(f"apscheduler3 burst (py no-op{label})", median_row(aps))] if aps else []
    rows.append((f"almanac burst ({what}{label})", median_row(ours)))
    if aps and args.rounds > 1:
        ratios = sorted(o["jobs_per_s"] / a["jobs_per_s"] for o, a in zip(ours, aps))
        print("drain ratio per round: " + ", ".join(f"{r:.2f}x" for r in ratios))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--steady", type=int, default=300, help="jobs spread at 20/s (0 to skip)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="alternate the two schedulers' bursts this many times; rows give medians")
    parser.add_argument("--processes", type=int, default=None,
                        help="sandbox worker processes (default: ALMANAC_SANDBOX_PROCESSES or one per core)")
    parser.add_argument("--runner", choices=("sandbox", "noop"), default="sandbox",
                        help="noop: a Python no-op instead of the sandbox, to measure the scheduler alone")
    parser.add_argument("--run-ms", type=float, default=0.0,
                        help="with --runner noop: each run waits this long (no CPU), like a run on the sandbox")
    parser.add_argument("--no-aps", action="store_true", help="skip the APScheduler rows")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    load_before = os.getloadavg()
    what = "sandboxed js" if args.runner == "sandbox" else "py no-op" + (f", {args.run_ms:g} ms" if args.run_ms else "")
    rows = bursts(args, what)
    if args.steady:
        if not args.no_aps:
            rows.append(("apscheduler3 steady 20/s", apscheduler_run(args.steady, args.steady / 20)))
        rows.append((f"almanac steady 20/s ({what})",
                     almanac_run(args.steady, args.steady / 20, args.processes, args.runner, args.run_ms)))
    if args.json:
        print(json.dumps(dict(rows)))
        return
    print(table(rows))
    loads = " / ".join(f"{a:.2f} {b:.2f} {c:.2f}" for a, b, c in (load_before, os.getloadavg()))
    print(f"cores {os.cpu_count()}; load average (1/5/15 min) before / after: {loads}")
    if not args.no_aps and rows[0][1]["jobs_per_s"] > 0:
        print(f"almanac burst drain / apscheduler3 burst drain: {rows[1][1]['jobs_per_s'] / rows[0][1]['jobs_per_s']:.1f}x")


if __name__ == "__main__":
    main()
