"""PostgreSQL's one-statement creation of a new job (`platform/service/job_create.py`): all of it or nothing.

Whenever it cannot simply create the job it writes nothing and answers None, so that the caller's
transaction (`service.put_job`) decides: a key that exists or that another request is creating, a
missing script, a used-up quota. The API-level comparison with the transaction is in
test_put_fast_path.py.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy import func, insert, select

from almanac.db import Database
from almanac.platform import notify
from almanac.platform.service import job_create
from almanac.platform.store import quotas
from almanac.platform.store.models import JOB_PENDING, Job, Occurrence
from almanac.tenants import registry
from almanac.tenants.models import AuditEntry
from tests.integration.platform.scheduler_world import World

@pytest.fixture
def pg_world(world: World) -> World:
    if world.db.is_sqlite:
        pytest.skip("PostgreSQL only: SQLite always takes the transaction")
    return world


def _fields(script: int, world: World) -> dict[str, Any]:
    return {"script_id": script, "run_at": world.clock.now() + timedelta(days=3), "payload": '{"n":1}',
            "expire_after_s": None, "max_attempts": 3, "priority": 0}


def _counts(world: World) -> tuple[int, int, int]:
    with world.session() as s:
        return (s.execute(select(func.count()).select_from(Job)).scalar_one(),
                s.execute(select(func.count()).select_from(Occurrence)).scalar_one(),
                s.execute(select(func.count()).select_from(AuditEntry)).scalar_one())


def _entry(world: World) -> tuple[Any, dict[str, Any]]:
    with world.db.shared_session() as shared:
        tenant_id = registry.get_tenant(shared, world.tenant).id
    return (AuditEntry.__table__, dict(tenant_id=tenant_id, at=world.clock.now(), actor_kind="token", actor="t", actor_id=1,
                                       address=None, action="job.create", target="job k", changes="{}"))


def test_a_new_key_is_made_whole_in_one_statement(pg_world: World) -> None:
    w, script = pg_world, pg_world.add_script()
    job = job_create.create_job(w.db, w.tenant, "k", _fields(script, w), w.clock.now(), companions=(_entry(w),))
    assert job is not None and job.state == JOB_PENDING and job.key == job.root_key == "k"
    assert _counts(w)[:2] == (1, 1)
    (occurrence,) = w.occurrences(job_id=job.id)
    assert (occurrence.status, occurrence.scheduled_for, occurrence.trigger) == ("planned", job.run_at, "job")
    with w.session() as s:
        assert quotas.use_pending_jobs(s) == 1


def test_what_it_leaves_to_the_transaction_writes_nothing(pg_world: World) -> None:
    w, script = pg_world, pg_world.add_script()
    w.put_job("taken", script, w.clock.now() + timedelta(days=1))
    before = _counts(w)
    assert job_create.create_job(w.db, w.tenant, "taken", _fields(script, w), w.clock.now(),
                                 companions=(_entry(w),)) is None
    assert job_create.create_job(w.db, w.tenant, "new", _fields(script + 1, w), w.clock.now(),
                                 companions=(_entry(w),)) is None  # no such script
    table, row = _entry(w)
    assert job_create.create_job(w.db, w.tenant, "new", _fields(script, w), w.clock.now(),
                                 companions=((table, {**row, "tenant_id": 10**6}),)) is None  # a row it cannot write
    with w.db.shared_session() as shared:
        quotas.set_quotas(shared, w.tenant, {"pending_jobs": 1}, w.clock.now())
    assert job_create.create_job(w.db, w.tenant, "new", _fields(script, w), w.clock.now(),
                                 companions=(_entry(w),)) is None  # the quota is used up
    assert _counts(w) == before


def test_a_key_another_request_is_creating_waits_for_it_then_is_left_to_the_transaction(
        pg_world: World, database: Database) -> None:
    w, script = pg_world, pg_world.add_script()
    later = w.clock.now() + timedelta(days=1)
    answers: list[Any] = []
    with database.tenant_connection(w.tenant) as other:  # has taken the key, not committed yet
        other.execute(insert(Job).values(key="k", script_id=script, run_at=later, payload="null", max_attempts=3,
                                         priority=0, state=JOB_PENDING, root_key="k", depth=0, created_at=later,
                                         updated_at=later))
        racer = threading.Thread(target=lambda: answers.append(job_create.create_job(
            w.db, w.tenant, "k", _fields(script, w), w.clock.now(), companions=(_entry(w),))))
        racer.start()
        time.sleep(0.5)
        assert racer.is_alive(), "it did not wait for the key's other writer"
        other.commit()
    racer.join(10)
    assert answers == [None]
    assert _counts(w)[:2] == (1, 0)  # the other's job alone (it planned nothing here)


def test_it_notifies_with_its_commit_only_when_asked(pg_world: World, database: Database) -> None:
    w, script = pg_world, pg_world.add_script()
    url = database.settings.database_url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(url, autocommit=True) as listener:
        listener.execute(f"LISTEN {notify.CHANNEL}")
        job_create.create_job(w.db, w.tenant, "quiet", _fields(script, w), w.clock.now())
        job_create.create_job(w.db, w.tenant, "loud", _fields(script, w), w.clock.now(), notify=True)
        job_create.create_job(w.db, w.tenant, "loud", _fields(script, w), w.clock.now(), notify=True)  # not made
        heard = [n.payload for n in listener.notifies(timeout=1, stop_after=2)]
    assert heard == [w.tenant]
