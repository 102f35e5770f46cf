"""The 1,000-tenant set-up of `pg_scale_bench.py` (and `pg_idle.py`): tenants, their schedules, the template.

Tenants are made by `registry.create_tenant` (schema + migrations, as `tenant create` does); in
each tenant one script and one schedule are made by the service, whose column values are then
copied by multi-row INSERTs. `--template NAME` keeps the whole set-up as a database and clones it
on later runs; a clone made from an older template is brought up to date as `almanac migrate` does.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

NOOP_JS = "export default function (event) { return event.scheduleId; }"


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

    from almanac.platform.store import planning

    from almanac.platform.service import resources as service
    from almanac.platform.store.models import Occurrence, Schedule, Script, ScriptVersion

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


def dsn(url: str) -> str:
    """A SQLAlchemy URL (`postgresql+psycopg://...`) as psycopg and libpq take it."""
    return url.replace("postgresql+psycopg://", "postgresql://")


def clone_template(args: Any) -> bool:
    """Point `args.pg_url` at a fresh copy of the template database; False (pointed at the template) if there is none yet."""
    import uuid

    import psycopg

    base = args.pg_url.rsplit("/", 1)[0]
    server = dsn(base)  # the same server, as psycopg names it
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (args.template,)).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{args.template}"')
            args.pg_url = f"{base}/{args.template}"
            return False
        refuse_stale_template(server, args.template)
        name = f"bench_{uuid.uuid4().hex[:8]}"
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{args.template}" STRATEGY FILE_COPY')
    args.pg_url = f"{base}/{name}"
    return True


def drop_clone(url: str) -> None:
    """Drop the copy `clone_template` made (the run is over; its workers are stopped)."""
    import psycopg

    base, name = url.rsplit("/", 1)
    server = dsn(base)
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def vacuum(url: str) -> None:
    """VACUUM a database just filled, as an operator does after a bulk load (not ANALYZE: t0018 holds it back).

    Never vacuumed, a tenant's tables count as empty to autovacuum (`reltuples` -1), so 50 dead
    rows set it off: the first burst after the set-up (the unmeasured warm-up one) left each
    tenant's occurrences past that, and autovacuum then vacuumed all 1,000 of them in 4 s, in the
    middle of the measured burst. Each vacuum invalidated its table's catalog entries in every
    backend, so the warm backends the warm-up had made met their tenants cold again (1,921/s in
    such a sitting against 2,407/s in the next).
    """
    import psycopg

    with psycopg.connect(dsn(url), autocommit=True) as conn:
        conn.execute("VACUUM")


def bring_up_to_date(db: Any) -> None:
    """Migrate a clone as `almanac migrate` would, when its template was made by code with fewer migrations."""
    from almanac.tenants import registry

    t0 = time.monotonic()
    report = registry.migrate_all(db)
    if report.failed:
        raise SystemExit(f"the clone's migration failed for {len(report.failed)} tenants: {report.failed}")
    print(f"  the clone brought up to date (almanac migrate) in {time.monotonic() - t0:.1f} s", flush=True)


def add_runs_today(db: Any, slugs: list[str], tenants: int, runs: int) -> None:
    """`--busy N:M`: the first N tenants have each run M times since midnight UTC (succeeded, 5 ms), as busy
    tenants have late in a day: what the daily quotas' use is read from at each claim of theirs."""
    from almanac.db import schema_for

    t0 = time.monotonic()
    with db.engine.begin() as conn:
        for slug in slugs[:tenants]:
            conn.exec_driver_sql(
                f"INSERT INTO {schema_for(slug)}.runs (trigger, scheduled_for, created_at, status, attempt, duration_ms) "
                "SELECT 'schedule', t, t, 'succeeded', 1, 5 FROM (SELECT date_trunc('day', now() AT TIME ZONE 'UTC') "
                "AT TIME ZONE 'UTC' + (g %% greatest(1, extract(epoch FROM now() - date_trunc('day', now() AT TIME ZONE "
                "'UTC') AT TIME ZONE 'UTC')::int)) * interval '1 s' AS t FROM generate_series(1, %s) g) AS times",
                (runs,))
            conn.exec_driver_sql(f"ANALYZE {schema_for(slug)}.runs")
    print(f"  {tenants} tenants given {runs} runs today each in {time.monotonic() - t0:.1f} s", flush=True)


def refuse_stale_template(server: str, template: str) -> None:
    """Stop if the template's planned occurrences fall due within the hour.

    Its daily schedules were planned at least 11 hours ahead on the day it was made; a day later
    they are all due, and a run on a clone would drain the million with the burst and report
    that as the burst's lag and rate.
    """
    import psycopg

    with psycopg.connect(f"{server}/{template}") as conn:  # closed before the clone: a template must be idle
        soonest = conn.execute("SELECT min(due_at) FROM due_index").fetchone()[0]
    if soonest is not None and soonest < datetime.now(timezone.utc) + timedelta(hours=1):
        raise SystemExit(f"template {template}: its schedules fall due from {soonest:%Y-%m-%d %H:%M} UTC, within "
                         "the hour, so a run would drain them with the burst; drop the database to make it again")


def daily_rule() -> str:
    hour = (datetime.now(timezone.utc).hour + 12) % 24  # next occurrence at least 11 hours away
    return f"FREQ=DAILY;BYHOUR={hour};BYMINUTE=0;BYSECOND=0"
