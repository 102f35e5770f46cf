"""Lanes (PostgreSQL): each tenant's claims and records on one connection of its process.

Before, a claim pass or a record took whichever pooled connection was free, so in a burst a
tenant's tables were met, cold, by several backends of each process; half of PostgreSQL's
time went to planning with cold caches. These tests would fail on the code before:
there were no lanes (`Settings.pg_lanes`, `Database.lanes`).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event, select, update

from almanac.db import Database, schema_for
from almanac.platform.store.connection_lanes import Lanes
from almanac.platform.store.models import Occurrence, Run
from almanac.platform.store.sql_store import SqlStore
from almanac.sandbox.contract import RunResult
from almanac.settings import Settings
from tests.integration.platform.scheduler_world import EveryRules
from tests.integration.platform_pg.conftest import LANES
from tests.integration.platform_pg.test_due_index import _index, _jobs, _script

pytestmark = pytest.mark.postgres

DONE = RunResult("succeeded", output=1, duration_ms=1)


def _tenants(laned: Database, make_tenant: Callable[..., str], count: int, lanes: int) -> list[str]:
    """`count` tenants that fall in at least `lanes` different lanes of `laned`."""
    slugs = [make_tenant(f"lane-{i}") for i in range(count)]
    assert len(set(Lanes(laned).of(slugs).values())) >= lanes
    return slugs


def _tenants_with_jobs(laned: Database, make_tenant: Callable[..., str], count: int, now: datetime,
                       jobs: int) -> list[str]:
    """`_tenants` over at least 2 lanes, each with `jobs` jobs due `now`."""
    slugs = _tenants(laned, make_tenant, count, 2)
    for slug in slugs:
        _jobs(laned, slug, _script(laned, slug, now), now, jobs)
    return slugs


def _backends_by_tenant(db: Database, slugs: list[str]) -> dict[str, set[int]]:
    """Every backend (pid) that ran a statement naming each tenant's schema, from now on."""
    names = {schema_for(slug): slug for slug in slugs}
    pattern = re.compile("|".join(re.escape(name) for name in names))
    seen: dict[str, set[int]] = {slug: set() for slug in slugs}

    def listen(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        pid = conn.connection.dbapi_connection.info.backend_pid
        for name in set(pattern.findall(statement)):
            seen[names[name]].add(pid)

    for engine in [db.engine, *db.lanes]:
        event.listen(engine, "before_cursor_execute", listen)
    return seen


def test_each_tenant_is_claimed_and_recorded_on_the_one_connection_of_its_lane(
        laned: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    slugs = _tenants_with_jobs(laned, make_tenant, 8, now, 6)
    store = SqlStore(laned, EveryRules())
    seen = _backends_by_tenant(laned, slugs)
    held = threading.Event()

    def busy() -> None:  # another thread holds a pooled connection meanwhile: the pool has two
        with laned.engine.connect():
            held.wait(30)

    other = threading.Thread(target=busy)
    other.start()
    try:
        for _ in range(20):  # small passes: each tenant is claimed and recorded several times
            claims = store.due_index.claim_across(now, 5).claims
            if not claims:
                break
            assert store.due_index.finish_across([(c, DONE, now, now + timedelta(seconds=1)) for c in claims]) == [True] * len(claims)
    finally:
        held.set()
        other.join()
    assert all(len(pids) == 1 for pids in seen.values()), seen
    lane = Lanes(laned).of(slugs)
    by_lane = {lane[slug]: pids for slug, pids in seen.items()}
    assert len(set().union(*seen.values())) == len(by_lane) >= 2  # a backend per lane, none shared
    for slug in slugs:
        with laned.tenant_session(slug) as s:
            assert Counter(r.status for r in s.execute(select(Run)).scalars()) == {"succeeded": 6}


def test_a_quiet_tenant_in_another_lane_is_claimed_in_the_first_pass(
        laned: Database, database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    """SPEC section 11: a tenant with no backlog is not held back by another's thousands."""
    slugs = _tenants(laned, make_tenant, 8, 2)
    lane = Lanes(laned).of(slugs)
    noisy = slugs[0]
    quiet = next(slug for slug in slugs if lane[slug] != lane[noisy])
    _jobs(database, noisy, _script(database, noisy, now), now - timedelta(minutes=5), 300)
    quiet_script = _script(database, quiet, now)
    for start in range(LANES):  # pass after pass
        _jobs(database, quiet, quiet_script, now, 1, prefix=f"q{start}-")
        store = SqlStore(laned, EveryRules())
        batch = store.due_index.claim_across(now, 20, share=0.5)
        by = Counter(c.tenant for c in batch.claims)
        assert by[quiet] == 1 and by[noisy] == 19 and batch.full, (start, by)


def test_two_processes_with_lanes_and_two_claimers_each_run_every_occurrence_once(
        settings: Settings, database: Database, laned: Database, make_tenant: Callable[..., str]) -> None:
    from almanac.platform.clock import SystemClock
    from almanac.platform.runner import FunctionRunner
    from almanac.platform.timer.scheduler import across_tenants

    clock = SystemClock()
    now = clock.now()
    slugs = _tenants_with_jobs(laned, make_tenant, 6, now, 25)
    processes = [Database(settings.model_copy(update={"pg_lanes": LANES})) for _ in range(2)]
    timers = [across_tenants(SqlStore(db, EveryRules()), FunctionRunner(lambda *a: 1), clock,
                                   lambda: [], workers=4, claimers=2) for db in processes]
    try:
        for timer in timers:
            timer.start()
        deadline = clock.now() + timedelta(seconds=60)
        while any(d <= clock.now() for d in _index(database).values()) and clock.now() < deadline:
            threading.Event().wait(0.1)
    finally:
        for timer in timers:
            timer.stop()
        for db in processes:
            db.dispose()
    for slug in slugs:
        with database.tenant_session(slug) as s:
            ok = Counter(r.job_key for r in s.execute(select(Run).where(Run.status == "succeeded")).scalars())
            assert len(ok) == 25 and set(ok.values()) == {1}, (slug, ok)


def test_a_lost_lease_rolls_back_only_its_lane_s_record_and_the_timer_records_those_runs_apart(
        laned: Database, database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    from almanac.platform.clock import ManualClock
    from almanac.platform.runner import FunctionRunner
    from almanac.platform.timer.scheduler import across_tenants
    from almanac.platform.timer.recorder import Finished

    slugs = _tenants_with_jobs(laned, make_tenant, 8, now, 2)
    store = SqlStore(laned, EveryRules())
    claims = store.due_index.claim_across(now, 100).claims
    assert len(claims) == 16
    lost = claims[0]
    with database.tenant_session(lost.tenant) as s:  # another process took the attempt over
        s.execute(update(Occurrence).where(Occurrence.id == lost.occurrence_id).values(lease_token="x" * 32))
    lane = Lanes(laned).of(slugs)
    items = [(c, DONE, now, now + timedelta(seconds=1)) for c in claims]
    applied = store.due_index.finish_across(items)
    assert applied is not None
    for c, ok in zip(claims, applied):
        assert ok is (None if lane[c.tenant] == lane[lost.tenant] else True), (c.tenant, ok)
    # The timer records what that lane's transaction did not, the per-tenant way: the lost one fenced.
    again = [c for c, ok in zip(claims, applied) if ok is None]
    timer = across_tenants(store, FunctionRunner(lambda *a: None), ManualClock(now), lambda: [], workers=4)
    with timer._cond:
        timer._inflight = timer._unrecorded = len(again)
        timer._held_by.update(Counter(c.tenant for c in again))
    timer.recorder.record_done([Finished(c, DONE, now, now + timedelta(seconds=1), 0.001) for c in again])
    for slug in slugs:
        with database.tenant_session(slug) as s:
            statuses = Counter(r.status for r in s.execute(select(Run)).scalars())
            assert statuses == ({"succeeded": 1, "running": 1} if slug == lost.tenant else {"succeeded": 2}), slug


def test_a_lane_whose_record_fails_leaves_only_its_runs_to_the_caller(
        laned: Database, make_tenant: Callable[..., str], now: datetime,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, one failure rolled back every tenant's record and the timer recorded them all again;
    with lanes, the lanes before it have committed, so only the failed lane's runs may be retried."""
    slugs = _tenants_with_jobs(laned, make_tenant, 8, now, 2)
    store = SqlStore(laned, EveryRules())
    claims = store.due_index.claim_across(now, 100).claims
    lane = Lanes(laned).of(slugs)
    broken = laned.lanes[lane[slugs[0]]]
    real = store.due_index._finish_on

    def finish_on(engine: Any, items: Any) -> Any:
        if engine is broken:
            raise RuntimeError("the database refused it")
        return real(engine, items)

    monkeypatch.setattr(store.due_index, "_finish_on", finish_on)
    applied = store.due_index.finish_across([(c, DONE, now, now + timedelta(seconds=1)) for c in claims])
    assert applied is not None
    assert [ok for c, ok in zip(claims, applied) if lane[c.tenant] == lane[slugs[0]]] == [None] * 2 * sum(
        1 for slug in slugs if lane[slug] == lane[slugs[0]])
    assert all(ok is True for c, ok in zip(claims, applied) if lane[c.tenant] != lane[slugs[0]])
