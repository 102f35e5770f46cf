"""The cross-tenant timer's passes, as several processes make them: round every tenant a row at a time,
and the runs a dead process had in flight before any round (PostgreSQL).

The passes are the store's own (`claim_across`) with what the timer gives them: the tenants its
process served in the current turn (`timer_due.next_served`), a row of a tenant a round
(`PASS_CHUNK`). Before, a pass ranked the rows afresh, drew its tenants at random by a seeded hash
and took several rows of each: a tenant's place in a burst came down to the draws.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from sqlalchemy import text

from almanac.db import Database
from almanac.platform.liveness import new_tag, reap
from almanac.platform.store_sql import SqlStore
from almanac.platform.timer_due import PASS_CHUNK, next_served
from tests.integration.platform.scheduler_world import EveryRules
from tests.integration.platform_pg.test_due_index import _jobs, _script

pytestmark = pytest.mark.postgres


def test_three_processes_passes_go_round_every_tenant_so_that_no_tenant_falls_behind(
        database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    tenants = [make_tenant(f"turn-{i}") for i in range(9)]
    for slug in tenants:
        _jobs(database, slug, _script(database, slug, now), now, 8)
    processes = [SqlStore(database, EveryRules()) for _ in range(3)]
    served: list[set[str]] = [set(), set(), set()]
    order: list[str] = []  # the tenant of every claim, in the order of the passes
    for n in range(18):  # 72 rows due, passes of 4 taken by the processes in turn
        k = n % 3
        batch = processes[k].claim_across(now, 4, served=served[k], chunk=PASS_CHUNK)
        served[k] = next_served(served[k], {c.tenant for c in batch.claims})
        order += [c.tenant for c in batch.claims]
    assert Counter(order) == {slug: 8 for slug in tenants}
    # Every tenant's k-th row is claimed within about one turn of every other's: after any number of
    # claims, no tenant has had more than 3 rows (one a process) beyond any other.
    seen: Counter[str] = Counter()
    for tenant in order:
        seen[tenant] += 1
        assert seen[tenant] - min(seen[t] for t in tenants) <= 3, (order, seen)


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
    # A pass of 3, a row of a tenant a round, the dead process's tenant served already in this turn:
    # still its 3 runs, not the busy tenant's rows of the first round.
    batch = alive.claim_across(later, 3, served=[dead_tenant], chunk=1)
    assert sorted((c.tenant, c.occurrence_id, c.attempt) for c in batch.claims) == sorted(
        (c.tenant, c.occurrence_id, 2) for c in taken)
    with database.engine.connect() as conn:
        due = conn.execute(text("SELECT count(*) FROM due_index WHERE due_at <= :at"), {"at": later}).scalar()
    assert due == 6  # the busy tenant's, for the next passes


def test_a_process_with_lanes_goes_round_the_tenants_of_every_lane_alike(
        laned: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    """A pass takes a lane's tenants a row each, then what is left of it from the next lane. Started
    where the last pass stopped, passes went first in every other lane, and the tenants of the
    lanes between had only the passes' remains."""
    tenants = [make_tenant(f"lane-turn-{i}") for i in range(16)]
    for slug in tenants:
        _jobs(laned, slug, _script(laned, slug, now), now, 12)
    process = SqlStore(laned, EveryRules())
    lanes = process.lanes
    assert lanes is not None
    biggest = max(Counter(lanes.of(tenants).values()).values())
    served: set[str] = set()
    seen: Counter[str] = Counter()
    for _ in range(12):  # passes of a lane and a half: the case that alternated
        batch = process.claim_across(now, biggest + biggest // 2 + 1, served=served, chunk=PASS_CHUNK)
        served = next_served(served, {c.tenant for c in batch.claims})
        seen.update(c.tenant for c in batch.claims)
        assert max(seen[t] for t in tenants) - min(seen[t] for t in tenants) <= 2, (seen, lanes.of(tenants))
