"""In a burst, every tenant's share of the claim passes is the same, whichever lane it falls in (PostgreSQL).

A pass used to break its round robin's ties at random, afresh each time, and with lanes gave the
whole pass to the lanes in rotation, one after the other. A claimed row is no longer due, so every
pass found every tenant of the burst in its first round again: which tenants a pass reached was a
draw, and a tenant in a lane of few tenants was reached as often as a lane, not as a tenant.
Tenants with equal backlogs drained at paces up to 1.5 times apart (a 20,000-run burst over 100
tenants on 3 processes: tenants' median start lags 8.8 to 28.0 s).

Now the pick ranks every lane's rows in one order, the tenants served least recently first (their
turn, kept in `tenant_turns` by every process), and gives each lane the part of the pass its rows
have in that order. A dead process's runs in flight come first in it, whichever lane holds them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest

from almanac.db import Database
from almanac.platform.decisions.policies import REAPED_AHEAD
from almanac.platform.store.connection_lanes import Lanes
from almanac.platform.store.due_index.claim import fair_chunk
from almanac.platform.store.sql_store import SqlStore
from tests.integration.platform.scheduler_world import EveryRules
from tests.integration.platform_pg.conftest import LANES
from tests.integration.platform_pg.test_due_index import _jobs, _script

pytestmark = pytest.mark.postgres

PASS = 16
BACKLOG = 80


def _drain(store: SqlStore, slugs: list[str], now: datetime, passes: int) -> Counter[str]:
    """Runs claimed per tenant by `passes` passes of `PASS` rows (each tenant's are left claimed)."""
    claimed: Counter[str] = Counter({slug: 0 for slug in slugs})
    for _ in range(passes):
        batch = store.due_index.claim_across(now, PASS)
        assert len(batch.claims) == PASS
        claimed.update(c.tenant for c in batch.claims)
    return claimed


def _burst(db: Database, slugs: list[str], now: datetime) -> dict[str, int]:
    """`BACKLOG` jobs due `now` for each tenant; their scripts."""
    scripts = {slug: _script(db, slug, now) for slug in slugs}
    for slug in slugs:
        _jobs(db, slug, scripts[slug], now, BACKLOG)
    return scripts


def test_passes_serve_the_tenants_in_turn_not_by_a_fresh_draw(
        database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    slugs = [make_tenant(f"turn-{i}") for i in range(12)]
    _burst(database, slugs, now)
    store = SqlStore(database, EveryRules(), lease_margin_s=3600)
    chunk = fair_chunk(PASS, 0.5)
    claimed = _drain(store, slugs, now, 2 * len(slugs) * chunk // PASS)  # each tenant's turn comes twice
    assert max(claimed.values()) - min(claimed.values()) <= chunk, claimed


def test_a_lane_of_few_tenants_gets_no_more_a_tenant_than_a_lane_of_many(
        laned: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    lanes = Lanes(laned)
    made = [make_tenant(f"lane-turn-{i}") for i in range(40)]
    of = lanes.of(made)
    by_lane: dict[int, list[str]] = {}
    for slug in made:
        by_lane.setdefault(of[slug], []).append(slug)
    assert len(by_lane) == LANES
    crowded = max(by_lane, key=lambda lane: len(by_lane[lane]))
    others = [lane for lane in by_lane if lane != crowded]
    slugs = by_lane[crowded][:5] + [slug for lane in others for slug in by_lane[lane][:2]]  # 5, 2, 2, 2
    _burst(laned, slugs, now)
    store = SqlStore(laned, EveryRules(), lease_margin_s=3600)
    chunk = fair_chunk(PASS, 0.5)
    claimed = _drain(store, slugs, now, 4 * len(slugs) * chunk // PASS)  # each tenant's turn comes 4 times
    # Before: the crowded lane's tenants shared a quarter of the passes (16 runs or so each), the
    # others' two each a quarter (48 each).
    assert max(claimed.values()) - min(claimed.values()) <= 2 * chunk, claimed


def test_a_dead_process_s_runs_come_first_whichever_lane_holds_them(
        laned: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    made = [make_tenant(f"taken-lane-{i}") for i in range(16)]
    store = SqlStore(laned, EveryRules(), lease_margin_s=3600)
    assert store.due_index.lanes is not None
    of = store.due_index.lanes.of(made)
    scripts = _burst(laned, made, now)
    dead = next(slug for slug in made if of[slug] != 0)  # passes used to start at lane 0, then go round
    _jobs(laned, dead, scripts[dead], now - REAPED_AHEAD, 1, prefix="reaped-")  # due a day early: made due by a reaping
    batch = store.due_index.claim_across(now, 4)
    assert batch.picked == 4
    taken = [c for c in batch.claims if c.tenant == dead and c.scheduled_for < now - timedelta(hours=1)]
    assert taken, batch
