"""Scale-out on PostgreSQL: many schedules across many tenants, bursts with 1, 2 and 4 processes, a
kill -9 during a burst, and procrastinate draining the same burst on the same server.

    .venv/bin/python bench/pg_scale_bench.py                                  # 1,000,000 schedules, 1,000 tenants
    .venv/bin/python bench/pg_scale_bench.py --tenants 50 --schedules 10000 --bursts 2000   # a quick run
    options: --bursts 8000,20000 --procs 1,2,4 --runner noop|sandbox --failover 8000 --procrastinate 8000
             --warm-burst 8000 (drain one unmeasured burst first, so that the measured one meets warm connections)
             --busy 50:50000 (50 tenants have run 50,000 times today already: the daily quotas' use to read)
             --idle 120 --bursts "" --failover 0 --procrastinate "" (only the CPU of idle workers, bench/pg_idle.py)
             --floor 8000 (the same burst drained by the fewest statements per run, bench/pg_floor.py)
             --graphile 8000,20000 --graphile-modes defaults,fast (graphile-worker beside procrastinate)
             --pg-url postgresql+psycopg://...

Set-up (bench/pg_setup.py): a throwaway PostgreSQL (tests/support/pg.py; fsync off) unless --pg-url is
given; tenants made by `registry.create_tenant` (schema + migrations, as `tenant
create` does); in each tenant one script and one schedule made by the service
(`service.create_schedule`), whose column values are then copied by multi-row
INSERTs straight into the tenant's `schedules` and `occurrences` through the
translated connection (the same values the service writes; only the name differs;
the occurrences' trigger fills the shared due index as for any other write).
Every schedule is active: daily, next due in more than an hour.

Each phase starts N worker processes (this file with `--worker`: `almanac worker`'s
services, with the runner chosen), moves a fresh set of planned occurrences (the
burst, spread evenly over the tenants) to one instant a few seconds ahead, in one
transaction, and waits until all have run. It reports due occurrences per second
(burst / (last finish - due time)), start lag p50/p99 (started_at - scheduled_for), each
tenant's median lag (lowest, median, highest) and their spread (highest - lowest median)
and each process's resident memory (VmRSS, and VmHWM its peak), main process only.

The failover phase (`--failover-procs`, 4) kills one with SIGKILL once a third of the burst has
been claimed, then checks that every occurrence succeeded exactly once, and reports how soon
after the kill the others started runs (the dead process's due work is in the shared
index, no tenant lease to wait for) and when the dead process's own in-flight runs started
again (first, median, last: the others see its session end, `platform.liveness`, and make
them due at once; their leases, the script's timeout + `--lease-margin`, are the last resort).

The procrastinate phase (bench/pg_procrastinate.py) defers the same number of jobs of a
no-op task due at one instant and drains them with the same number of worker processes.
The graphile-worker phase (`--graphile 8000`, bench/pg_graphile.py) does the same with
graphile-worker from the npm registry, at its defaults and at its documented fast settings.

`--runner noop` (default) measures the scheduler and the database: the script is
a Python no-op. `--runner sandbox` runs the real QuickJS sandbox per occurrence.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SECRET = "bench-secret-key-0123456789abcdef"
# The no-op runner keeps as many runs out as the sandbox pool of 2 processes does (10 per process),
# so the timer claims the same amount ahead as in production (a bare FunctionRunner would get 2).
NOOP_IN_FLIGHT = 20


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def settings_for(url: str, var: Path, lease_margin_s: float = 30.0) -> Any:
    from almanac.settings import Settings

    return Settings(database_url=url, var_dir=var, secret_key=SECRET, pool_size=int(os.environ.get("POOL", "10")),
                    lease_margin_s=lease_margin_s)


# -- one phase ----------------------------------------------------------------------------------


def move_burst(db: Any, slugs: list[str], per_tenant: int, offset: int, lead_s: float) -> tuple[int, datetime, float]:
    """Make `per_tenant` planned occurrences of each tenant due at one instant, in one transaction.

    Returns (moved, the due instant, seconds the move took). The instant is `lead_s` ahead of
    the start, so the whole burst is committed before it falls due.
    """
    from sqlalchemy import select, update

    from almanac.db import TENANT_SCHEMA, schema_for
    from almanac.platform.store.models import Occurrence

    O = Occurrence.__table__
    moved = 0
    t0 = time.monotonic()
    due = (datetime.now(timezone.utc) + timedelta(seconds=lead_s)).replace(microsecond=0)
    with db.engine.connect() as conn, conn.begin():
        for slug in slugs:
            conn.execution_options(schema_translate_map={TENANT_SCHEMA: schema_for(slug)})
            ids = conn.execute(select(O.c.id).where(O.c.status == "planned", O.c.trigger == "schedule")
                               .order_by(O.c.schedule_id).offset(offset).limit(per_tenant)).scalars().all()
            conn.execute(update(O).where(O.c.id.in_(ids)).values(scheduled_for=due, due_at=due))
            moved += len(ids)
    return moved, due, time.monotonic() - t0


def burst_runs(db: Any, slugs: list[str], due: datetime) -> list[Any]:
    """The burst's ended runs of every tenant, each with its tenant (occurrence ids repeat across tenants)."""
    from sqlalchemy import literal, select

    from almanac.platform.store.models import Run

    R = Run.__table__
    rows: list[Any] = []
    for slug in slugs:
        with db.tenant_connection(slug) as conn:
            rows += conn.execute(select(literal(slug).label("tenant"), R.c.started_at, R.c.finished_at,
                                        R.c.scheduled_for, R.c.status, R.c.occurrence_id, R.c.attempt, R.c.reason)
                                 .where(R.c.scheduled_for == due, R.c.status != "running")).all()
    return rows


def cpu_now(workers: list[subprocess.Popen]) -> list[float]:
    """CPU seconds so far of the workers (main processes, the living ones) and of every PostgreSQL process."""
    from bench import pg_idle

    return [pg_idle.cpu_seconds([w.pid for w in workers]), pg_idle.postgres_cpu_seconds()]


def memory_kb(pid: int) -> dict[str, int]:
    from bench import pg_idle

    return pg_idle.status_kb(pid, ("VmRSS", "VmHWM"))


def succeeded_count(db: Any, slugs: list[str], due: datetime) -> int:
    """Runs of the burst that succeeded, every tenant in one statement (polling costs the workers little)."""
    from sqlalchemy import text

    from almanac.db import schema_for

    parts = " UNION ALL ".join(f"SELECT count(*) AS n FROM {schema_for(slug)}.runs "
                               "WHERE scheduled_for = :due AND status = 'succeeded'" for slug in slugs)
    with db.engine.connect() as conn:
        return int(conn.execute(text(f"SELECT sum(n) FROM ({parts}) c"), {"due": due}).scalar() or 0)


def due_left(db: Any) -> int:
    """Rows of the due index due now and not claimed: one indexed count, cheap to poll (the exact
    count above reads every tenant's runs, and polled every 2 s it held PostgreSQL a third of the time)."""
    from sqlalchemy import text

    with db.engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM due_index WHERE due_at <= now()")).scalar() or 0)


WORKER_APP = "almanac-bench-worker"  # the workers' connections' application_name, for `backend_pids`


def backend_pids(db: Any) -> list[int]:
    """The PostgreSQL backends serving the workers' connections now."""
    from sqlalchemy import text

    with db.engine.connect() as conn:
        return list(conn.execute(text("SELECT pid FROM pg_stat_activity WHERE application_name = :a"),
                                 {"a": WORKER_APP}).scalars())


def start_workers(args: Any, url: str, var: Path, procs: int, tag: str) -> list[subprocess.Popen]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ALMANAC_LOG_LEVEL": "warning", "PGAPPNAME": WORKER_APP}
    return [
        subprocess.Popen([sys.executable, __file__, "--worker", "--pg-url", url, "--var", str(var),
                          "--runner", args.runner, "--lease-margin", str(args.lease_margin)], env=env,
                         stdout=(var / f"w{tag}-{n}.log").open("w"), stderr=subprocess.STDOUT)
        for n in range(procs)
    ]


def stop_workers(workers: list[subprocess.Popen]) -> None:
    for w in workers:
        if w.poll() is None:
            w.send_signal(signal.SIGTERM)
    for w in workers:
        try:
            w.wait(60)
        except subprocess.TimeoutExpired:
            w.kill()


LAST_MOVE_S = [0.0]  # how long the previous phase's move took


def warm_up(db: Any, slugs: list[str], burst: int, offset: int, lead_s: float, timeout_s: float) -> int:
    """Drain a burst that is not measured; how many schedules of each tenant it used.

    A worker that has run for a while holds connections whose PostgreSQL backends have each
    tenant's tables, plans and trigger functions cached (first use in a backend costs ~0.75 ms
    a tenant, measured by hand); freshly started workers meet every tenant cold, which a
    long-running deployment never does. `--warm-burst` measures that steady state.
    """
    per_tenant = max(1, burst // len(slugs))
    moved, due, _ = move_burst(db, slugs, per_tenant, offset, lead_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (datetime.now(timezone.utc) <= due or due_left(db) > 0
                                           or succeeded_count(db, slugs, due) < moved):
        time.sleep(1)
    return per_tenant


def run_phase(args: Any, db: Any, url: str, var: Path, slugs: list[str], procs: int, phase: int, burst: int,
              *, kill_one: bool = False, offset: int = 0) -> dict[str, Any]:
    per_tenant = max(1, burst // len(slugs))
    from bench import pg_idle

    workers = start_workers(args, url, var, procs, str(phase))
    killed_at: datetime | None = None
    backends = pg_idle.BackendMemory(lambda: backend_pids(db))
    try:
        backends.start()
        time.sleep(args.warmup)  # processes start, first passes
        if args.warm_burst:  # the measured burst then meets warm connections, as a long-running worker's
            offset += warm_up(db, slugs, args.warm_burst, offset, args.lead, args.timeout)
        # The burst must be committed before it falls due, or its lag counts the move (1,000 schemas
        # took 28 s at load 20): lead by more than the last move took.
        moved, due, move_s = move_burst(db, slugs, per_tenant, offset, max(args.lead, 1.5 * LAST_MOVE_S[0] + 2))
        LAST_MOVE_S[0] = move_s
        time.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds()))
        cpu0 = cpu_now(workers)  # from the due time to the end of the drain (and up to a second after)
        deadline = time.monotonic() + args.timeout
        while True:
            time.sleep(0.1 if kill_one and killed_at is None else 1)
            past_due = datetime.now(timezone.utc) > due
            if kill_one and killed_at is None and time.monotonic() < deadline:
                # Mid-burst: once a third of it is claimed, told by the cheap count of what is left
                # (the exact count of runs that succeeded took ~0.5 s at load, and a kill timed by
                # it came once most of a 4 s drain was over). Its claimed runs wait for their leases.
                if past_due and due_left(db) <= moved - max(1, moved // 3):
                    workers[0].send_signal(signal.SIGKILL)
                    killed_at = datetime.now(timezone.utc)
                continue
            if time.monotonic() < deadline and (not past_due or due_left(db) > 0):
                continue  # not due yet, or some of it is not even claimed: not done
            done = succeeded_count(db, slugs, due)
            if done >= moved or time.monotonic() > deadline:
                break
        cpu = [b - a for a, b in zip(cpu0, cpu_now(workers))]
        mem = [memory_kb(w.pid) for w in workers if w.poll() is None]
        load = os.getloadavg()
    finally:
        backends.stop()
        stop_workers(workers)
    runs = burst_runs(db, slugs, due)
    ok = [r for r in runs if r.status == "succeeded"]
    per_occurrence = Counter((r.tenant, r.occurrence_id) for r in ok)
    lags = [(r.started_at - r.scheduled_for).total_seconds() for r in ok if r.started_at]
    span = (max(r.finished_at for r in ok) - due).total_seconds() if ok else float("nan")
    # To the 99% mark: the burst's last runs (a killed process's, say) say little of its pace.
    ends = sorted(r.finished_at for r in ok)
    span_99 = (ends[max(0, int(0.99 * len(ends)) - 1)] - due).total_seconds() if ends else float("nan")
    result: dict[str, Any] = {
        "system": "almanac", "processes": procs, "burst": burst, "due": moved, "ran": len(per_occurrence),
        "twice": sum(1 for n in per_occurrence.values() if n > 1),
        "per_second": round(len(ok) / span, 1) if ok else 0, "drain_s": round(span, 2),
        "per_second_99": round(0.99 * len(ok) / span_99, 1) if ok and span_99 > 0 else 0,
        "lag_p50_s": round(pct(lags, 50), 3), "lag_p99_s": round(pct(lags, 99), 3),
        **tenant_medians(ok),
        "rss_mb": [round(m.get("VmRSS", 0) / 1024, 1) for m in mem],
        "peak_rss_mb": [round(m.get("VmHWM", 0) / 1024, 1) for m in mem],
        "move_s": round(move_s, 2), "load": [round(x, 2) for x in load],
        "backends_mb": [round(backends.peak_sum_kb / 1024), round(backends.peak_one_kb / 1024)],
    }
    if killed_at is None:  # a killed worker's CPU is gone from /proc
        result["cpu_ms_per_run"] = [round(1000 * c / max(1, len(ok)), 3) for c in cpu]  # workers, PostgreSQL
    else:
        after = sorted(r.started_at for r in ok if r.started_at and r.started_at >= killed_at)
        retried = [r for r in ok if r.attempt > 1]
        result.update({
            "killed_after_s": round((killed_at - due).total_seconds(), 2),
            "killed_at": killed_at.isoformat(),  # to read the workers' logs by
            # The others' first start after the kill: the due work waits on nobody.
            "first_start_after_kill_s": round((after[0] - killed_at).total_seconds(), 3) if after else None,
            "longest_gap_after_kill_s": round(max((b - a).total_seconds() for a, b in zip([killed_at, *after], after)), 3)
            if after else None,
            # The dead process's in-flight runs: made due once the others see its session gone
            # (`platform.liveness`), not when their leases lapse; how soon they started again.
            "lease_lapsed": sum(1 for r in runs if r.status == "failed" and "lease lapsed" in (r.reason or "")),
            "retried_started_after_kill_s": restarted(retried, killed_at),
        })
    return result


def tenant_medians(ok: list[Any]) -> dict[str, Any]:
    """Each tenant's median start lag, and their spread (max - min): whether a tenant's place in the
    burst depends on which process holds it (SPEC section 11 asks for a spread within 2 s)."""
    by_tenant: dict[str, list[float]] = {}
    for r in ok:
        if r.started_at:
            by_tenant.setdefault(r.tenant, []).append((r.started_at - r.scheduled_for).total_seconds())
    medians = sorted(pct(lags, 50) for lags in by_tenant.values())
    if not medians:
        return {}
    return {"tenant_median_lag_s": [round(medians[0], 3), round(pct(medians, 50), 3), round(medians[-1], 3)],
            "tenant_median_spread_s": round(medians[-1] - medians[0], 3)}


def restarted(retried: list[Any], killed_at: datetime) -> list[float] | None:
    """When the dead process's runs started again, after the kill: [first, median, last] (s), or None."""
    after = sorted((r.started_at - killed_at).total_seconds() for r in retried if r.started_at)
    return [round(after[0], 2), round(after[len(after) // 2], 2), round(after[-1], 2)] if after else None


# -- the worker processes ----------------------------------------------------------------------------


def worker_main(args: Any) -> None:
    from almanac import logs
    from almanac.platform.runner import FunctionRunner
    from almanac.worker import build_services

    logs.configure(os.environ.get("ALMANAC_LOG_LEVEL", "warning"))
    settings = settings_for(args.pg_url, Path(args.var), args.lease_margin)
    class NoopRunner(FunctionRunner):
        def runs_in_flight(self) -> int:
            return NOOP_IN_FLIGHT

    runner = NoopRunner(lambda source, event, caps: event.get("scheduleId")) if args.runner == "noop" else None
    services = build_services(settings, runner=runner)
    stopping = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stopping.update(now=True))
    starter = getattr(services, "start", None)  # the scale-out services (leases, listener) when present
    starter() if starter else services.scheduler.start()
    while not stopping["now"]:
        time.sleep(0.2)
    services.close()


# -- main ------------------------------------------------------------------------------------------


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| system | processes | due at once | ran (twice) | drain/s (to 99%) | drain s | lag p50 / p99 s | "
             "tenants' median lag s: lowest / highest (spread) | RSS MB (peak) | "
             "CPU ms per run: workers / PostgreSQL | workers' backends MB, peak: all / largest | load 1/5/15 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rss = f"{min(r['rss_mb'], default=0)}-{max(r['rss_mb'], default=0)} ({max(r['peak_rss_mb'], default=0)})" \
            if "rss_mb" in r else "-"
        extra = " kill -9 one" if "killed_after_s" in r else ""
        if r.get("retried_started_after_kill_s"):
            first, median, last = r["retried_started_after_kill_s"]
            extra += (f" (its {r['lease_lapsed']} runs in flight started again {first}-{last} s after, "
                      f"median {median} s)")
        medians = r.get("tenant_median_lag_s")
        spread = f"{medians[0]} / {medians[-1]} ({r['tenant_median_spread_s']})" if medians else "-"
        lines.append(f"| {r['system']}{extra} | {r['processes']} | {r['due']} | {r['ran']} ({r.get('twice', '-')}) | "
                     f"{r['per_second']} ({r.get('per_second_99', '-')}) | {r['drain_s']} | {r['lag_p50_s']} / {r['lag_p99_s']} | {spread} | {rss} | "
                     f"{' / '.join(str(x) for x in r.get('cpu_ms_per_run', [])) or '-'} | "
                     f"{' / '.join(str(x) for x in r.get('backends_mb', [])) or '-'} | "
                     f"{' / '.join(str(x) for x in r.get('load', []))} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--schedules", type=int, default=1_000_000)
    parser.add_argument("--bursts", default="8000,20000", help="due at once, comma separated; each with every --procs")
    parser.add_argument("--procs", default="1,2,4")
    parser.add_argument("--failover", type=int, default=8000, help="burst of the kill -9 phase; 0: none")
    parser.add_argument("--failover-procs", type=int, default=4, help="processes of the kill -9 phase")
    parser.add_argument("--procrastinate", default="8000", help="bursts drained by procrastinate; empty: none")
    parser.add_argument("--procrastinate-concurrency", type=int, default=10)
    parser.add_argument("--graphile", default="",
                        help="bursts drained by graphile-worker (bench/pg_graphile.py, installed from npm); empty: none")
    parser.add_argument("--graphile-modes", default="defaults,fast", help="its settings: defaults, fast or both")
    parser.add_argument("--floor", type=int, default=0,
                        help="burst of the floor phases (bench/pg_floor.py: the fewest statements per run); 0: none")
    parser.add_argument("--floor-pass", type=int, default=120, help="rows a pass of the floor phases claims")
    parser.add_argument("--runner", choices=("noop", "sandbox"), default="noop")
    parser.add_argument("--lease-margin", type=float, default=5.0,
                        help="lease margin of the workers (s): how long a killed process's claimed runs wait")
    parser.add_argument("--pg-url")
    parser.add_argument("--template", help="with --pg-url: keep the set-up as this database and clone it on later "
                                           "runs of the same --tenants / --schedules (setting up 1,000 tenants takes minutes); "
                                           "refused once its daily schedules fall due within the hour (a day after it was made)")
    parser.add_argument("--idle", type=float, default=0.0,
                        help="first sample the CPU of the workers and PostgreSQL this long with nothing due (bench/pg_idle.py)")
    parser.add_argument("--catalog", action="store_true",
                        help="first measure one backend's catalog memory as it meets every tenant (bench/pg_catalog.py)")
    parser.add_argument("--busy", default="", help="N:M: the first N tenants have run M times today already")
    parser.add_argument("--warmup", type=float, default=6.0)
    parser.add_argument("--warm-burst", type=int, default=0,
                        help="before each measured burst, drain one of this size unmeasured (warm connections)")
    parser.add_argument("--lead", type=float, default=4.0, help="the burst falls due this long after its move starts")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--var", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker_main(args)
    from almanac.db import Database
    from bench import pg_catalog, pg_floor, pg_graphile, pg_idle, pg_procrastinate, pg_setup
    from tests.support.pg import PgServer

    command = shlex.join(["python", "bench/pg_scale_bench.py", *sys.argv[1:]])
    server = None
    if args.pg_url is None:
        server = PgServer()
        base = server.start()
        args.pg_url = server.url_for(server.create_database())
        print(f"PostgreSQL at {base}", flush=True)
    pg_idle.use_server(args.pg_url)  # its CPU alone, not that of other servers on the machine
    var = Path(tempfile.mkdtemp(prefix="almanac-pgbench-"))
    per_tenant = args.schedules // args.tenants
    t0 = time.monotonic()
    cloned = bool(args.template) and pg_setup.clone_template(args)
    db = Database(settings_for(args.pg_url, var))
    try:
        if cloned:
            slugs, t1 = [f"b{i:04d}" for i in range(args.tenants)], time.monotonic()
            print(f"set-up cloned from database {args.template} in {t1 - t0:.1f} s", flush=True)
            pg_setup.bring_up_to_date(db)
            t1 = time.monotonic()
        else:
            slugs = pg_setup.create_tenants(db, args.tenants)
            t1 = time.monotonic()
            rule = pg_setup.daily_rule()
            for i, slug in enumerate(slugs):
                pg_setup.fill_tenant(db, slug, per_tenant, rule)
                if i % 100 == 99:
                    print(f"  {(i + 1) * per_tenant} schedules, {time.monotonic() - t1:.0f} s", flush=True)
        if not cloned:
            pg_setup.vacuum(args.pg_url)
        t2 = time.monotonic()
        if args.template and not cloned:  # kept as it is now, then this run works on a copy of it
            db.dispose()
            pg_setup.clone_template(args)
            db = Database(settings_for(args.pg_url, var))
        print(f"set-up: {args.tenants} tenants in {t1 - t0:.0f} s, {per_tenant * args.tenants} schedules "
              f"in {t2 - t1:.0f} s", flush=True)
        if args.busy:
            pg_setup.add_runs_today(db, slugs, *(int(n) for n in args.busy.split(":")))
        catalog = pg_catalog.table(pg_catalog.measure(args.pg_url, slugs)) if args.catalog else ""
        if catalog:
            print(catalog, flush=True)
        if args.idle:
            procs = max(int(p) for p in args.procs.split(","))
            workers = start_workers(args, args.pg_url, var, procs, "idle")
            try:
                print(pg_idle.table(pg_idle.sample([w.pid for w in workers], args.idle), procs, args.tenants), flush=True)
            finally:
                stop_workers(workers)
        bursts = [int(b) for b in args.bursts.split(",") if b]
        warm = max(1, args.warm_burst // args.tenants) if args.warm_burst else 0
        phases = [max(1, b // args.tenants) + warm for b in bursts for _ in args.procs.split(",")]
        phases += [max(1, args.failover // args.tenants) + warm] if args.failover else []
        floors = [(procs, spread, cache) for procs in (int(p) for p in args.procs.split(","))
                  for spread in (False, True) for cache in (False, True)] if args.floor else []
        phases += [max(1, args.floor // args.tenants)] * len(floors)  # the floor moves the next planned ones
        if sum(phases) > per_tenant:  # each phase moves the next set of every tenant's schedules
            raise SystemExit(f"{per_tenant} schedules per tenant cannot feed phases of {phases} each: "
                             "raise --schedules or lower the bursts")
        results: list[dict[str, Any]] = []
        phase = 0
        for burst in bursts:
            for procs in (int(p) for p in args.procs.split(",")):
                results.append(run_phase(args, db, args.pg_url, var, slugs, procs, phase, burst,
                                         offset=sum(phases[:phase])))
                print(json.dumps(results[-1]), flush=True)
                phase += 1
        if args.failover:
            results.append(run_phase(args, db, args.pg_url, var, slugs, args.failover_procs, phase, args.failover,
                                     kill_one=True,
                                     offset=sum(phases[:phase])))
            print(json.dumps(results[-1]), flush=True)
        floor_rows = []
        for procs, spread, cache in floors:
            floor_rows.append(pg_floor.run(args.pg_url, args.floor, procs, args.floor_pass, spread=spread, warm=cache))
            print(json.dumps(floor_rows[-1]), flush=True)
        for burst in (int(b) for b in args.procrastinate.split(",") if b):
            for procs in (int(p) for p in args.procs.split(",")):
                row = pg_procrastinate.burst(args.pg_url, burst, procs, args.procrastinate_concurrency, var)
                row["load"] = [round(x, 2) for x in os.getloadavg()]
                results.append(row)
                print(json.dumps(row), flush=True)
        for burst in (int(b) for b in args.graphile.split(",") if b):
            for procs in (int(p) for p in args.procs.split(",")):
                for mode in (m for m in args.graphile_modes.split(",") if m):
                    row = pg_graphile.burst(pg_setup.dsn(args.pg_url), burst, procs, mode, var)
                    results.append(row)
                    print(json.dumps(row), flush=True)
        summary = {"command": command, "tenants": args.tenants, "schedules": per_tenant * args.tenants,
                   "runner": args.runner, "cores": os.cpu_count(), "setup_s": [round(t1 - t0), round(t2 - t1)],
                   "phases": results, "floor": floor_rows}
        print(json.dumps(summary, indent=2))
        print(f"\n{command}\n{args.tenants} tenants, {per_tenant * args.tenants} schedules, runner {args.runner}, "
              f"{os.cpu_count()} cores\n\n{table(results)}" + (f"\n\n{pg_floor.table(floor_rows)}" if floor_rows else "")
              + (f"\n\n{catalog}" if catalog else ""))
    finally:
        db.dispose()
        if args.template and args.pg_url.rsplit("/", 1)[1] != args.template:
            pg_setup.drop_clone(args.pg_url)  # each copy of a million schedules is ~1.5 GB
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
