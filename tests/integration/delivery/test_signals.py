"""Delivery signals (PostgreSQL): a dispatcher looks only at the tenants whose writes signalled work.

Before, every dispatcher looked at every tenant it held each second, two transactions a tenant:
with 1,000 tenants over 4 processes, some 2,000 transactions a second while nothing happened.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import delete, event, select

from almanac.db import Database
from almanac.delivery import signals
from almanac.delivery.dispatcher import Dispatcher
from almanac.delivery.models import DeliverySignal
from almanac.platform.store.models import Event, Run
from tests.integration.delivery.conftest import FAST

pytestmark = pytest.mark.postgres


def _emit(db: Database, slug: str, now: datetime) -> None:
    with db.tenant_session(slug) as s:
        run = Run(schedule_id=1, trigger="schedule", scheduled_for=now, created_at=now, status="succeeded", attempt=1)
        s.add(run)
        s.flush()
        s.add(Event(run_id=run.id, topic="x", data=json.dumps({}), created_at=now, attempts=0))


@pytest.fixture
def tenants(database: Database, make_tenant: Callable[..., str]) -> list[str]:
    if database.is_sqlite:
        pytest.skip("signals are written by PostgreSQL triggers; on SQLite one process looks at each tenant file")
    return [make_tenant(f"sig-{i}") for i in range(12)]


def _statements(database: Database) -> Any:
    seen: list[str] = []
    event.listen(database.engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    return seen


def test_idle_tenants_cost_one_statement_a_pass_whatever_their_number(
        database: Database, tenants: list[str], settings: Any, manual_clock: Any) -> None:
    dispatcher = Dispatcher(database, manual_clock, settings, lambda: tenants, config=FAST,
                            rng=random.Random(1), signals=True)
    dispatcher.run_once(manual_clock.now())  # the migration's one look at each new tenant
    seen = _statements(database)
    for _ in range(3):
        dispatcher.run_once(manual_clock.now())
    assert len(seen) == 3, seen  # the take, and no tenant visited


def test_an_event_brings_its_tenant_and_only_it_into_the_next_pass(
        database: Database, tenants: list[str], settings: Any, manual_clock: Any) -> None:
    now = manual_clock.now()
    _clear(database)
    _emit(database, tenants[3], now)
    assert set(signals.take(database, now)) == {tenants[3]}
    assert signals.take(database, now) == {}  # taken once (held)


def test_a_signal_written_while_a_dispatcher_takes_is_kept_for_its_next_pass(
        database: Database, tenants: list[str], manual_clock: Any) -> None:
    now = manual_clock.now()
    _clear(database)
    slug = tenants[0]
    with database.tenant_session(slug) as s:  # a recorder's transaction, still open
        run = Run(schedule_id=1, trigger="schedule", scheduled_for=now, created_at=now, status="succeeded", attempt=1)
        s.add(run)
        s.flush()
        s.add(Event(run_id=run.id, topic="x", data="{}", created_at=now, attempts=0))
        s.flush()
        assert signals.take(database, now) == {}  # not committed: neither seen nor held, nor waited for
    assert set(signals.take(database, now)) == {slug}


def test_a_signal_for_later_is_taken_when_it_falls_due(database: Database, tenants: list[str], manual_clock: Any) -> None:
    now = manual_clock.now()
    _clear(database)
    with database.shared_session() as s:
        later = DeliverySignal(tenant_slug=tenants[1], at=now.replace(year=now.year + 1))
        s.add(later)
    assert signals.take(database, now) == {}
    taken = signals.take(database, later.at)
    assert set(taken) == {tenants[1]}
    signals.settle(database, taken[tenants[1]])
    with database.shared_session() as s:
        assert s.execute(select(DeliverySignal)).first() is None


def _visits(dispatcher: Dispatcher, fail: set[str] | None = None) -> list[str]:
    """The tenants each later pass of `dispatcher` looks at (`fail`: those whose look raises)."""
    visited: list[str] = []

    def look(slug: str, now: datetime) -> int:
        visited.append(slug)
        if slug in (fail or set()):
            raise RuntimeError("this tenant's look failed")
        return 0

    dispatcher.run_tenant = look  # type: ignore[method-assign]
    return visited


def _clear(database: Database) -> None:
    """Settle the migration's one signal per new tenant, as a dispatcher's first pass would."""
    with database.shared_session() as s:
        s.execute(delete(DeliverySignal))


def test_no_pass_looks_at_idle_tenants_not_the_first_nor_a_minute_later(
        database: Database, tenants: list[str], settings: Any, manual_clock: Any) -> None:
    now = manual_clock.now()
    _clear(database)
    dispatcher = Dispatcher(database, manual_clock, settings, lambda: tenants, config=FAST, signals=True)
    visited = _visits(dispatcher)
    for minutes in (0, 1, 2, 10):
        dispatcher.run_once(now + timedelta(minutes=minutes))
    assert visited == []  # before: every tenant held, at start and each minute (two transactions a tenant)


def test_signals_taken_by_a_dispatcher_that_died_bring_their_tenant_to_another_after_the_hold(
        database: Database, tenants: list[str], settings: Any, manual_clock: Any) -> None:
    now = manual_clock.now()
    _clear(database)
    _emit(database, tenants[5], now)
    assert set(signals.take(database, now)) == {tenants[5]}  # taken by a dispatcher that died before it looked
    other = Dispatcher(database, manual_clock, settings, lambda: tenants, config=FAST, signals=True)
    visited = _visits(other)
    other.run_once(now)
    assert visited == []  # held: the taker may still be looking
    other.run_once(now + timedelta(seconds=signals.HOLD_S))
    assert visited == [tenants[5]]
    other.run_once(now + timedelta(seconds=3 * signals.HOLD_S))
    assert visited == [tenants[5]]  # looked at, so settled: once


def test_a_tenant_whose_look_failed_is_looked_at_again_after_the_hold(
        database: Database, tenants: list[str], settings: Any, manual_clock: Any) -> None:
    now = manual_clock.now()
    _clear(database)
    for slug in tenants[:2]:
        _emit(database, slug, now)
    dispatcher = Dispatcher(database, manual_clock, settings, lambda: tenants, config=FAST, signals=True)
    visited = _visits(dispatcher, fail={tenants[0]})
    dispatcher.run_once(now)
    assert sorted(visited) == sorted(tenants[:2])
    visited.clear()
    dispatcher.run_once(now + timedelta(seconds=signals.HOLD_S))
    assert visited == [tenants[0]]  # the failed one only: the other's signal was settled
