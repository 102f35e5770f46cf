"""Scale-out on PostgreSQL: many schedules across many tenants, then bursts with 1, 2 and 4 processes.

    .venv/bin/python bench/pg_scale_bench.py                                  # 1,000,000 schedules, 1,000 tenants
    .venv/bin/python bench/pg_scale_bench.py --tenants 50 --schedules 10000   # a quick run
    options: --burst 8000 --procs 1,2,4 --runner noop|sandbox --pg-url postgresql+psycopg://...

Set-up: a throwaway PostgreSQL (tests/support/pg.py; fsync off) unless --pg-url is
given; tenants made by `registry.create_tenant` (schema + migrations, as `tenant
create` does); in each tenant one script and one schedule made by the service
(`service.create_schedule`), whose column values are then copied by multi-row
INSERTs straight into the tenant's `schedules` and `occurrences` through the
translated connection (the same values the service writes; only the name differs).
Every schedule is active: daily, next due in more than an hour.

Each phase starts N worker processes (this file with `--worker`: `almanac worker`'s
services, with the runner chosen), moves a fresh set of `--burst` planned
occurrences, spread evenly over the tenants, to one instant a few seconds ahead,
and waits until all have run. It reports due occurrences per second
(burst / (last finish - due time)), start lag p50/p99 (started_at - scheduled_for)
and each process's resident memory (VmRSS, and VmHWM its peak), main process only.

`--runner noop` (default) measures the scheduler and the database: the script is
a Python no-op. `--runner sandbox` runs the real QuickJS sandbox per occurrence.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NOOP_JS = "export default function (event) { return event.scheduleId; }"
SECRET = "bench-secret-key-0123456789abcdef"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def settings_for(url: str, var: Path) -> Any:
    from almanac.settings import Settings

    return Settings(database_url=url, var_dir=var, secret_key=SECRET, pool_size=int(os.environ.get("POOL", "10")))


# -- set-up -----------------------------------------------------------------------------------


def create_tenants(db: Any, count: int) -> list[str]:
    from almanac.tenants import migrations, registry

    migrations.upgrade_shared(db)
    now = datetime.now(timezone.utc)
    slugs = [f"b{i:04d}" for i in range(count)]
    t0 = time.monotonic()
    for i, slug in enumerate(slugs):
        registry.create_tenant(db, slug, admin_email=f"a@{slug}.test", admin_password="correct-horse-battery",
                               name=slug, min_interval_seconds=60, now=now)
        if i % 100 == 99:
            print(f"  {i + 1} tenants, {time.monotonic() - t0:.0f} s", flush=True)
    return slugs


def fill_tenant(db: Any, slug: str, count: int, rule: str) -> None:
    """One schedule through the service, then `count - 1` copies of its values by multi-row INSERTs."""
    from sqlalchemy import select

    from almanac.platform import planning, service
    from almanac.platform.models import Occurrence, Schedule, Script, ScriptVersion

    now = datetime.now(timezone.utc)
    S, O = Schedule.__table__, Occurrence.__table__
    with db.tenant_session(slug) as s:
        script = Script(name="noop", current_version=1, timeout_ms=1000, memory_mb=32, created_at=now, updated_at=now)
        s.add(script)
        s.flush()
        s.add(ScriptVersion(script_id=script.id, version=1, source=NOOP_JS, created_at=now))
        fields = dict(name="s0", script_id=script.id, rule=rule, timezone="UTC", start=None, payload=None,
                      enabled=True, priority=0, misfire="run_once", catchup_window_s=86400, overlap="skip",
                      expire_after_s=None, max_attempts=3, retry_backoff_s=10)
        first = service.create_schedule(s, planning.RecurrenceRules(), fields, now=now, min_interval_s=60)
        s.flush()
        template = dict(s.execute(select(S).where(S.c.id == first.id)).one()._mapping)
        occurrence = dict(s.execute(select(O).where(O.c.schedule_id == first.id)).one()._mapping)
    del template["id"], occurrence["id"]
    chunk = 5000
    with db.tenant_connection(slug) as conn:
        for start in range(1, count, chunk):
            rows = [{**template, "name": f"s{i}"} for i in range(start, min(count, start + chunk))]
            ids = conn.execute(S.insert().returning(S.c.id, sort_by_parameter_order=True), rows).scalars().all()
            conn.execute(O.insert(), [{**occurrence, "schedule_id": sid} for sid in ids])
        conn.commit()


def daily_rule() -> str:
    hour = (datetime.now(timezone.utc).hour + 12) % 24  # next occurrence at least 11 hours away
    return f"FREQ=DAILY;BYHOUR={hour};BYMINUTE=0;BYSECOND=0"


# -- one phase ----------------------------------------------------------------------------------


def move_burst(db: Any, slugs: list[str], per_tenant: int, phase: int, due: datetime) -> int:
    """Make `per_tenant` planned occurrences of each tenant due at `due` (a fresh set per phase)."""
    from sqlalchemy import select, update

    from almanac.platform.models import Occurrence

    O = Occurrence.__table__
    moved = 0
    for slug in slugs:
        with db.tenant_connection(slug) as conn:
            ids = conn.execute(select(O.c.id).where(O.c.status == "planned", O.c.trigger == "schedule")
                               .order_by(O.c.schedule_id).offset(phase * per_tenant).limit(per_tenant)).scalars().all()
            conn.execute(update(O).where(O.c.id.in_(ids)).values(scheduled_for=due, due_at=due))
            conn.commit()
            moved += len(ids)
    return moved


def burst_runs(db: Any, slugs: list[str], due: datetime) -> list[Any]:
    from sqlalchemy import select

    from almanac.platform.models import Run

    R = Run.__table__
    rows: list[Any] = []
    for slug in slugs:
        with db.tenant_connection(slug) as conn:
            rows += conn.execute(select(R.c.started_at, R.c.finished_at, R.c.scheduled_for, R.c.status)
                                 .where(R.c.scheduled_for == due, R.c.status != "running")).all()
    return rows


def memory_kb(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS", "VmHWM")):
                key, value = line.split(":")
                out[key] = int(value.split()[0])
    except FileNotFoundError:
        pass
    return out


def run_phase(args: Any, db: Any, url: str, var: Path, slugs: list[str], procs: int, phase: int) -> dict[str, Any]:
    per_tenant = max(1, args.burst // len(slugs))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ALMANAC_LOG_LEVEL": "warning"}
    workers = [
        subprocess.Popen([sys.executable, __file__, "--worker", "--pg-url", url, "--var", str(var),
                          "--runner", args.runner], env=env, stdout=(var / f"w{phase}-{n}.log").open("w"),
                         stderr=subprocess.STDOUT)
        for n in range(procs)
    ]
    try:
        time.sleep(args.warmup)  # processes start, take their share of tenants, first ticks
        due = (datetime.now(timezone.utc) + timedelta(seconds=3)).replace(microsecond=0)
        moved = move_burst(db, slugs, per_tenant, phase, due)
        deadline = time.monotonic() + args.timeout
        while True:
            time.sleep(2)
            runs = burst_runs(db, slugs, due)
            if len(runs) >= moved or time.monotonic() > deadline:
                break
        mem = [memory_kb(w.pid) for w in workers]
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(60)
            except subprocess.TimeoutExpired:
                w.kill()
    lags = [(r.started_at - r.scheduled_for).total_seconds() for r in runs if r.started_at]
    span = (max(r.finished_at for r in runs) - due).total_seconds() if runs else float("nan")
    return {
        "processes": procs, "due": moved, "ran": len(runs),
        "succeeded": sum(1 for r in runs if r.status == "succeeded"),
        "per_second": round(len(runs) / span, 1) if runs else 0, "drain_s": round(span, 2),
        "lag_p50_s": round(pct(lags, 50), 3), "lag_p99_s": round(pct(lags, 99), 3),
        "rss_mb": [round(m.get("VmRSS", 0) / 1024, 1) for m in mem],
        "peak_rss_mb": [round(m.get("VmHWM", 0) / 1024, 1) for m in mem],
    }


# -- the worker processes ----------------------------------------------------------------------------


def worker_main(args: Any) -> None:
    from almanac import logs
    from almanac.platform.runner import FunctionRunner
    from almanac.worker import build_services

    logs.configure(os.environ.get("ALMANAC_LOG_LEVEL", "warning"))
    settings = settings_for(args.pg_url, Path(args.var))
    runner = FunctionRunner(lambda source, event, caps: event.get("scheduleId")) if args.runner == "noop" else None
    services = build_services(settings, runner=runner)
    stopping = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stopping.update(now=True))
    starter = getattr(services, "start", None)  # the scale-out services (leases, listener) when present
    starter() if starter else services.scheduler.start()
    while not stopping["now"]:
        time.sleep(0.2)
    services.close()


# -- main ------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--schedules", type=int, default=1_000_000)
    parser.add_argument("--burst", type=int, default=8000)
    parser.add_argument("--procs", default="1,2,4")
    parser.add_argument("--runner", choices=("noop", "sandbox"), default="noop")
    parser.add_argument("--pg-url")
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--var", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker_main(args)
    from almanac.db import Database
    from tests.support.pg import PgServer

    server = None
    if args.pg_url is None:
        server = PgServer()
        base = server.start()
        args.pg_url = server.url_for(server.create_database())
        print(f"PostgreSQL at {base}", flush=True)
    var = Path(tempfile.mkdtemp(prefix="almanac-pgbench-"))
    db = Database(settings_for(args.pg_url, var))
    try:
        t0 = time.monotonic()
        slugs = create_tenants(db, args.tenants)
        t1 = time.monotonic()
        rule, per_tenant = daily_rule(), args.schedules // args.tenants
        for i, slug in enumerate(slugs):
            fill_tenant(db, slug, per_tenant, rule)
            if i % 100 == 99:
                print(f"  {(i + 1) * per_tenant} schedules, {time.monotonic() - t1:.0f} s", flush=True)
        t2 = time.monotonic()
        print(f"set-up: {args.tenants} tenants in {t1 - t0:.0f} s, {per_tenant * args.tenants} schedules "
              f"in {t2 - t1:.0f} s", flush=True)
        results = []
        for phase, procs in enumerate(int(p) for p in args.procs.split(",")):
            result = run_phase(args, db, args.pg_url, var, slugs, procs, phase)
            print(json.dumps(result), flush=True)
            results.append(result)
        summary = {"tenants": args.tenants, "schedules": per_tenant * args.tenants, "runner": args.runner,
                   "cores": os.cpu_count(), "phases": results}
        print(json.dumps(summary, indent=2))
    finally:
        db.dispose()
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
