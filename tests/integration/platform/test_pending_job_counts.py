"""The pending-jobs quota reads a kept count on PostgreSQL (t0017), not a count of every pending job.

Before, each PUT that added a pending job counted all of them: O(pending) per PUT, tens of
milliseconds a PUT for a delay queue near the default quota. The kept count must agree with a
real count after whatever changes the jobs table: single PUTs, batches, cancels, runs, jobs
made pending again, deletes; concurrent writers; folds; and a tenant migrated with jobs in it.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from alembic import command
from sqlalchemy import delete, func, insert, select

from almanac.db import Database, schema_for
from almanac.errors import QuotaExceeded
from almanac.platform.service import batch_writes as batch
from almanac.platform.store import quotas
from almanac.platform.service import resources as service
from almanac.platform.store.models import JOB_PENDING, Job
from almanac.tenants import migrations
from tests.integration.platform.scheduler_world import World
from tests.integration.platform.conftest import on_both_paths

world_path = on_both_paths  # through the claim and record production runs on each backend


def _real_count(world: World) -> int:
    with world.session() as s:
        return s.execute(select(func.count()).select_from(Job).where(Job.state == JOB_PENDING)).scalar_one()


def _used(world: World) -> int:
    with world.session() as s:
        return quotas.use_pending_jobs(s)


def _assert_agrees(world: World, expected: int) -> None:
    assert (_used(world), _real_count(world)) == (expected, expected)


def _count_rows(world: World) -> int:
    with world.session() as s:
        return s.execute(select(func.count()).select_from(quotas.PENDING_JOB_COUNTS)).scalar_one()


def test_the_pending_jobs_used_follows_every_change_to_the_jobs(world: World) -> None:
    script = world.add_script()
    now = world.clock.now()
    later = now + timedelta(days=3)
    for i in range(5):
        world.put_job(f"single-{i}", script, later)
    _assert_agrees(world, 5)
    with world.session() as s:
        batch.upsert_jobs(s, [{"key": f"batch-{i}", "script_id": script, "run_at": later, "payload": None,
                               "expire_after_s": None, "max_attempts": 3, "priority": 0} for i in range(20)], now)
    _assert_agrees(world, 25)
    with world.session() as s:
        service.cancel_job(s, "single-0", now)
        service.cancel_job(s, "batch-0", now)
    _assert_agrees(world, 23)
    world.put_job("single-0", script, later + timedelta(hours=1))  # a cancelled job put again: pending
    _assert_agrees(world, 24)
    world.put_job("due", script, now)
    _assert_agrees(world, 25)
    assert len(world.tick()) == 1  # it ran: done
    _assert_agrees(world, 24)
    world.put_job("single-1", script, later, priority=5)  # replacing a pending job changes no count
    _assert_agrees(world, 24)
    with world.session() as s:  # as retention deletes ended jobs, and a tenant purge any
        s.execute(delete(Job).where(Job.key.in_(["batch-1", "batch-2", "due"])))
    _assert_agrees(world, 22)


def test_a_put_reads_the_kept_count(world: World, database: Database) -> None:
    if database.is_sqlite:
        pytest.skip("SQLite counts its jobs: one process writes a tenant's file")
    script = world.add_script()
    with world.session() as s:  # the kept count says the quota is used up; no job says so
        s.execute(quotas.PENDING_JOB_COUNTS.insert().values(n=quotas.DEFAULTS.pending_jobs))
    fields = {"script_id": script, "run_at": world.clock.now() + timedelta(days=1), "payload": None,
              "expire_after_s": None, "max_attempts": 3, "priority": 0}
    with pytest.raises(QuotaExceeded), world.session() as s:
        service.put_job(s, "one-too-many", fields, world.clock.now())
    assert _real_count(world) == 0


def test_counts_fold_and_a_fold_keeps_what_an_open_transaction_wrote(world: World, database: Database) -> None:
    if database.is_sqlite:
        pytest.skip("PostgreSQL's kept count only")
    script = world.add_script()
    later = world.clock.now() + timedelta(days=1)
    with database.tenant_connection(world.tenant) as open_conn:  # its change stays uncommitted meanwhile
        open_conn.execute(insert(Job).values(key="open", script_id=script, run_at=later, payload="null", max_attempts=3,
                                             priority=0, state=JOB_PENDING, root_key="open", depth=0,
                                             created_at=later, updated_at=later))
        for i in range(300):  # a row each: at least two folds
            world.put_job(f"k{i}", script, later)
        assert _count_rows(world) < 200, "the rows were not folded"
        assert _used(world) == 300
        open_conn.commit()
    _assert_agrees(world, 301)


def test_a_tenant_migrated_with_pending_jobs_starts_at_their_count(world: World, database: Database) -> None:
    if database.is_sqlite:
        pytest.skip("PostgreSQL's kept count only")
    script = world.add_script()
    later = world.clock.now() + timedelta(days=1)
    with database.tenant_connection(world.tenant) as conn:
        command.downgrade(migrations._config("tenant", conn, schema_for(world.tenant), database.settings), "t0016_due_index_in_bulk")
        conn.commit()
    for i in range(7):  # no trigger counts these
        world.put_job(f"before-{i}", script, later)
    migrations.upgrade_tenant(database, world.tenant)
    _assert_agrees(world, 7)
    world.put_job("after", script, later)
    _assert_agrees(world, 8)
