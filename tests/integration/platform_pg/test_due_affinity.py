"""A claim pass may take first the due work of some tenants (`prefer`, PostgreSQL); the timer does not ask it to.

Every process may claim any tenant's due work from the shared index, and should (a process
that dies leaves its tenants' work to the others at once). But a tenant met by every process
is met cold by a backend of each: in a burst over 1,000 tenants on 4 processes, planning with
cold catalog caches was a third of PostgreSQL's time (docs/decisions/
0020-prefer-held-tenants.md). So within each round of its round robin a pass orders the rows of the tenants it holds
timer leases for (`TenantLeases`, one holder a tenant) before the others': a tenant's work is
claimed by its holder while the holder has room, and by anyone otherwise. These tests fail on
the code before (`claim_across` had no `prefer`, and the timer did not pass its tenants), but
for `test_without_a_preference_the_pass_is_as_fair_as_before`, which pins what did not change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from almanac.db import Database
from almanac.platform.clock import SystemClock
from almanac.platform.store.connection_lanes import Lanes
from almanac.platform.runner import FunctionRunner
from almanac.platform.store.due_index.claim import DuePass
from almanac.platform.store.sql_store import SqlStore
from almanac.platform.timer.scheduler import across_tenants
from tests.integration.platform.scheduler_world import EveryRules
from tests.integration.platform_pg.test_due_index import _jobs, _script

pytestmark = pytest.mark.postgres


def _two(database: Database, make_tenant: Callable[..., str], now: datetime) -> tuple[str, str]:
    """A tenant with 4 jobs due five minutes ago, and one with 4 due now."""
    old, held = make_tenant("aff-old"), make_tenant("aff-held")
    _jobs(database, old, _script(database, old, now), now - timedelta(minutes=5), 4)
    _jobs(database, held, _script(database, held, now), now, 4)
    return old, held


def test_a_pass_takes_the_tenants_it_holds_first_though_another_s_work_is_older(
        database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    old, held = _two(database, make_tenant, now)
    store = SqlStore(database, EveryRules())
    # A share of 1: a round of the round robin is 4 rows a tenant, so all of both tenants' rows are
    # in the first round (as in a burst of up to 16 rows a tenant), and the preference orders it.
    assert Counter(c.tenant for c in store.due_index.claim_across(now, 4, share=1.0, prefer=[held]).claims) == {held: 4}
    assert Counter(c.tenant for c in store.due_index.claim_across(now, 4, share=1.0, prefer=[held]).claims) == {old: 4}


def test_the_preference_never_comes_before_the_round_robin(
        database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    old, held = _two(database, make_tenant, now)
    store = SqlStore(database, EveryRules())
    # Rounds of 2 rows a tenant (a pass of 4, share 0.5): the held tenant's first 2, then the other's
    # first 2 in the same round, before the held tenant's next round. A tenant whose holder died is
    # not left behind the living holders' backlogs.
    assert Counter(c.tenant for c in store.due_index.claim_across(now, 4, prefer=[held]).claims) == {old: 2, held: 2}


def test_without_a_preference_the_pass_is_as_fair_as_before(
        database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    old, held = _two(database, make_tenant, now)
    store = SqlStore(database, EveryRules())
    # Round robin in chunks of 2 (a pass of 4, share 0.5), the older tenant's first.
    assert Counter(c.tenant for c in store.due_index.claim_across(now, 4).claims) == {old: 2, held: 2}


def test_other_tenants_work_is_claimed_at_once_when_the_held_ones_have_none(
        database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    old, held = _two(database, make_tenant, now)
    idle = make_tenant("aff-idle")  # held by this process, nothing due: its holder of the others died
    batch = SqlStore(database, EveryRules()).due_index.claim_across(now, 100, prefer=[idle])
    assert Counter(c.tenant for c in batch.claims) == {old: 4, held: 4}


def test_a_lane_s_pass_takes_the_tenants_it_holds_first(
        laned: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    slugs = [make_tenant(f"aff-lane-{i}") for i in range(5)]
    by_lane: dict[int, list[str]] = {}
    for slug, lane in Lanes(laned).of(slugs).items():
        by_lane.setdefault(lane, []).append(slug)
    old, held = next(pair for pair in by_lane.values() if len(pair) >= 2)[:2]  # 5 tenants, 4 lanes
    _jobs(laned, old, _script(laned, old, now), now - timedelta(minutes=5), 4)
    _jobs(laned, held, _script(laned, held, now), now, 4)
    # A share of 1: the lanes' first round caps every tenant at its round-robin chunk (fairness
    # between lanes), here the whole pass, so only the preference decides.
    batch = SqlStore(laned, EveryRules()).due_index.claim_across(now, 4, share=1.0, prefer=[held])
    assert Counter(c.tenant for c in batch.claims) == {held: 4}


class Recording:
    """A store that records what each cross-tenant pass was asked to prefer, and finds nothing due."""

    def __init__(self) -> None:
        self.preferred: list[Any] = []

    def claim_across(self, now: datetime, limit: int, **kwargs: Any) -> DuePass:
        self.preferred.append(kwargs.get("prefer"))
        return DuePass([], 0, False, [], None, {})


def test_the_timer_puts_no_tenant_first_for_the_leases_it_holds() -> None:
    """The option stays the store's; the timer no longer uses it (test_fair_across_processes.py)."""
    store = Recording()
    timer = across_tenants(store, FunctionRunner(lambda *a: None), SystemClock(), lambda: ["a", "b"],
                           workers=4, index=store)
    timer._claim_pass(datetime.now(timezone.utc))
    assert store.preferred == [None]
