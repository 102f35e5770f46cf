"""Delivery signals (PostgreSQL): a dispatcher looks only at the tenants whose writes signalled work.

Before, every dispatcher looked at every tenant it held each second, two transactions a tenant:
with 1,000 tenants over 4 processes, some 2,000 transactions a second while nothing happened.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import event, select

from almanac.db import Database
from almanac.delivery import signals
from almanac.delivery.dispatcher import Dispatcher
from almanac.delivery.models import DeliverySignal
from almanac.platform.models import Event, Run
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
                            rng=random.Random(1), signals=True, sweep_s=None)
    dispatcher.run_once(manual_clock.now())  # the migration's one look at each new tenant
    seen = _statements(database)
    for _ in range(3):
        dispatcher.run_once(manual_clock.now())
    assert len(seen) == 3, seen  # the take, and no tenant visited


def test_an_event_brings_its_tenant_and_only_it_into_the_next_pass(
        database: Database, tenants: list[str], settings: Any, manual_clock: Any) -> None:
    now = manual_clock.now()
    signals.take(database, now)  # the migration's looks
    _emit(database, tenants[3], now)
    assert signals.take(database, now) == {tenants[3]}
    assert signals.take(database, now) == set()  # taken once


def test_a_signal_written_while_a_dispatcher_takes_is_kept_for_its_next_pass(
        database: Database, tenants: list[str], manual_clock: Any) -> None:
    now = manual_clock.now()
    signals.take(database, now)
    slug = tenants[0]
    with database.tenant_session(slug) as s:  # a recorder's transaction, still open
        run = Run(schedule_id=1, trigger="schedule", scheduled_for=now, created_at=now, status="succeeded", attempt=1)
        s.add(run)
        s.flush()
        s.add(Event(run_id=run.id, topic="x", data="{}", created_at=now, attempts=0))
        s.flush()
        assert signals.take(database, now) == set()  # not committed: neither seen nor deleted, nor waited for
    assert signals.take(database, now) == {slug}


def test_a_signal_for_later_is_taken_when_it_falls_due(database: Database, tenants: list[str], manual_clock: Any) -> None:
    now = manual_clock.now()
    signals.take(database, now)
    with database.shared_session() as s:
        later = DeliverySignal(tenant_slug=tenants[1], at=now.replace(year=now.year + 1))
        s.add(later)
    assert signals.take(database, now) == set()
    assert signals.take(database, later.at) == {tenants[1]}
    with database.shared_session() as s:
        assert s.execute(select(DeliverySignal)).first() is None
