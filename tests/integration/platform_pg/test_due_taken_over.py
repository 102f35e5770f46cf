"""The runs a dead process had in flight come before every round of the cross-tenant pick (PostgreSQL).

Reaped (`liveness.reap`), they are due a day early; the pick takes the rows due half a day ago or
more before any round of its round robin, of every tenant. Before, they came first only within
their tenant's ranking, so a tenant with several of them waited a round of every other tenant for
each but the first.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from sqlalchemy import text

from almanac.db import Database
from almanac.platform.store.claim import new_tag
from almanac.platform.timer.liveness import reap
from almanac.platform.store.sql_store import SqlStore
from tests.integration.platform.scheduler_world import EveryRules
from tests.integration.platform_pg.test_due_index import _jobs, _script

pytestmark = pytest.mark.postgres


def test_a_dead_process_s_runs_in_flight_come_before_every_round_and_every_tenant(
        database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    dead_tenant, busy = make_tenant("turn-dead"), make_tenant("turn-busy")
    _jobs(database, dead_tenant, _script(database, dead_tenant, now), now, 3)
    _jobs(database, busy, _script(database, busy, now), now, 6)
    tag = new_tag()
    taken = SqlStore(database, EveryRules(), owner_tag=tag).claim_due(dead_tenant, now, 3).claims
    assert len(taken) == 3
    later = now + timedelta(seconds=2)
    with database.engine.connect() as conn, conn.begin():  # its process was seen dead
        assert reap(conn, [dead_tenant, busy], tag, later) == [dead_tenant]
    alive = SqlStore(database, EveryRules())
    # A pass of 3 (a row of a tenant a round): its 3 runs, not a row of each tenant in turn.
    batch = alive.due_index.claim_across(later, 3)
    assert sorted((c.tenant, c.occurrence_id, c.attempt) for c in batch.claims) == sorted(
        (c.tenant, c.occurrence_id, 2) for c in taken)
    with database.engine.connect() as conn:
        due = conn.execute(text("SELECT count(*) FROM due_index WHERE due_at <= :at"), {"at": later}).scalar()
    assert due == 6  # the busy tenant's, for the next passes
