"""A process that dies has its running attempts claimed again at once; one that lives, however
long its runs wait, never has (`platform.liveness`), on both backends.

The process that dies is a real one: a child Python process holding its liveness (a PostgreSQL
session with its advisory lock, or a lock file on SQLite), killed with SIGKILL. Its claims are
made in this process under its tag, as its timer would have made them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from almanac.db import Database
from almanac.platform.clock import ManualClock
from almanac.platform.store.claim import new_tag
from almanac.platform.timer.liveness import AHEAD, Liveness, reap
from almanac.platform.store.models import Occurrence, Run
from almanac.platform.store.sql_store import SqlStore
from almanac.sandbox.contract import RunResult
from tests.integration.platform.scheduler_world import EveryRules
from tests.integration.platform_pg.test_due_index import _jobs, _script

CHILD = """
import sys, time
from pathlib import Path
from almanac.db import Database
from almanac.platform.clock import SystemClock
from almanac.platform.timer.liveness import Liveness
from almanac.settings import Settings

db = Database(Settings(database_url=sys.argv[1], var_dir=Path(sys.argv[2]), secret_key="liveness-child-key-0123"))
live = Liveness(db, sys.argv[3], lambda: [], SystemClock())
live.start()
assert db.is_sqlite or live.alive.is_set()
print("alive", flush=True)
time.sleep(600)
"""


@pytest.fixture
def process(database: Database) -> Iterator[Callable[[str], subprocess.Popen]]:
    """Start a process that holds the liveness of `tag` (it prints "alive" once it does)."""
    started: list[subprocess.Popen] = []

    def start(tag: str) -> subprocess.Popen:
        settings = database.settings
        proc = subprocess.Popen([sys.executable, "-c", CHILD, settings.database_url, str(settings.var_dir), tag],
                                stdout=subprocess.PIPE, text=True)
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "alive"
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def _claimed_by(database: Database, slug: str, tag: str, now: datetime, count: int) -> tuple[SqlStore, list[Any]]:
    _jobs(database, slug, _script(database, slug, now), now, count)
    store = SqlStore(database, EveryRules(), owner_tag=tag)
    claims = store.claim_due(slug, now, 100).claims
    assert len(claims) == count and all(c.lease_token.startswith(tag) for c in claims)
    return store, claims


def _kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def test_the_running_attempts_of_a_killed_process_are_claimed_again_at_once(
        database: Database, make_tenant: Callable[..., str], now: datetime,
        process: Callable[[str], subprocess.Popen]) -> None:
    slug, dead = make_tenant("live-a"), new_tag()
    child = process(dead)
    dead_store, claims = _claimed_by(database, slug, dead, now, 3)
    reaped: list[list[str]] = []
    clock = ManualClock(now + timedelta(seconds=1))  # the leases run 31 s from `now`
    other = Liveness(database, new_tag(), lambda: [slug], clock, on_reaped=reaped.append)
    if database.is_sqlite:  # one machine: the process that looks is the one started again
        _kill(child)
        other.start()
    else:  # the others watch: the killed process's session ends, and its lock with it
        other.start()
        _kill(child)
    try:
        deadline = time.monotonic() + 5
        while not reaped:
            assert time.monotonic() < deadline, "the dead process was not reaped"
            time.sleep(0.05)
        later = now + timedelta(seconds=2)
        store = SqlStore(database, EveryRules(), owner_tag=other.tag)
        again = store.claim_due(slug, later, 100).claims
    finally:
        other.stop()
    assert reaped == [[slug]]
    assert sorted(c.occurrence_id for c in again) == sorted(c.occurrence_id for c in claims)
    assert {c.attempt for c in again} == {2} and all(c.lease_token.startswith(other.tag) for c in again)
    with database.tenant_session(slug) as s:
        first = s.execute(select(Run.status, Run.reason).where(Run.attempt == 1)).all()
    assert {r.status for r in first} == {"failed"} and all("lease lapsed" in r.reason for r in first)
    # Had it only stopped, its records now come too late: the token fences them.
    done = [(c, RunResult("succeeded", output=1, duration_ms=1), now, later) for c in claims]
    assert dead_store.finish_many(done) == [False] * 3


def test_a_live_process_s_claims_are_never_taken_however_long_they_wait(
        database: Database, make_tenant: Callable[..., str], now: datetime,
        process: Callable[[str], subprocess.Popen]) -> None:
    slug, live = make_tenant("live-b"), new_tag()
    process(live)
    _, claims = _claimed_by(database, slug, live, now, 2)
    reaped: list[list[str]] = []
    other = Liveness(database, new_tag(), lambda: [slug], ManualClock(now + timedelta(seconds=1)),
                     on_reaped=reaped.append)
    other.start()
    try:
        time.sleep(2.5)  # many beats, past the grace
    finally:
        other.stop()
    assert reaped == []
    store = SqlStore(database, EveryRules(), owner_tag=other.tag)
    assert store.claim_due(slug, now + timedelta(seconds=2), 100).claims == []
    with database.tenant_session(slug) as s:
        tokens = set(s.execute(select(Occurrence.lease_token)).scalars())
    assert tokens == {c.lease_token for c in claims}


def test_reaping_touches_only_the_dead_process_s_running_attempts(
        database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    slug, dead, alive = make_tenant("live-c"), new_tag(), new_tag()
    script = _script(database, slug, now)
    _jobs(database, slug, script, now, 2)
    mine = SqlStore(database, EveryRules(), owner_tag=dead).claim_due(slug, now, 100).claims
    _jobs(database, slug, script, now, 2, prefix="k")
    theirs = SqlStore(database, EveryRules(), owner_tag=alive).claim_due(slug, now, 100).claims
    assert len(mine) == len(theirs) == 2
    at = now + timedelta(seconds=1)
    if database.is_sqlite:  # a transaction per tenant file
        touched = reap(None, [slug], dead, at, sqlite_db=database)
    else:  # in the caller's transaction, the one that deletes the dead process's heartbeat
        with database.engine.connect() as conn, conn.begin():
            touched = reap(conn, [slug], dead, at)
    assert touched == [slug]
    with database.tenant_session(slug) as s:
        due = dict(s.execute(select(Occurrence.id, Occurrence.due_at)).all())
    assert all(due[c.occurrence_id] == at - AHEAD for c in mine)  # first in the tenant's ranking
    assert all(due[c.occurrence_id] == c.lease_until for c in theirs)
    with pytest.raises(ValueError):
        reap(None, [slug], "%", at, sqlite_db=database)
