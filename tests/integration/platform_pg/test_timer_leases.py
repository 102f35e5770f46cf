"""Tenants' timers spread over processes by leases in the shared schema (PostgreSQL)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from sqlalchemy import select, update

from almanac.db import Database
from almanac.platform.store.coordination_models import TimerLease, WorkerHeartbeat
from almanac.platform.timer.tenant_leases import TenantLeases

pytestmark = pytest.mark.postgres


def _leases(db: Database, tenants: list[str], name: str, gained: list[str] | None = None, ttl: float = 30) -> TenantLeases:
    return TenantLeases(db, lambda: tenants, ttl_s=ttl, owner=name,
                        on_gained=(gained.append if gained is not None else None))


def test_one_process_takes_every_tenant_and_is_told_of_each(database: Database) -> None:
    tenants = [f"t{i}" for i in range(7)]
    gained: list[str] = []
    a = _leases(database, tenants, "a", gained)
    assert a.cycle() == frozenset(tenants)
    assert sorted(gained) == tenants and a.owned() == tenants and a.owns("t3")
    assert a.cycle() == frozenset(tenants) and len(gained) == 7  # renewing gains nothing new


def test_processes_share_the_tenants_and_a_newcomer_takes_its_share(database: Database) -> None:
    tenants = [f"t{i}" for i in range(10)]
    a, b = _leases(database, tenants, "a"), _leases(database, tenants, "b")
    assert len(a.cycle()) == 10
    b.cycle()  # b's heartbeat is seen from now on; a gives back its excess on its next cycle
    a.cycle()
    b.cycle()
    assert len(a.owned()) == 5 and len(b.owned()) == 5
    assert set(a.owned()).isdisjoint(b.owned())
    c = _leases(database, tenants, "c")
    for _ in range(2):
        for leases in (c, a, b):
            leases.cycle()
    owned = [set(x.owned()) for x in (a, b, c)]
    assert sorted(len(o) for o in owned) == [3, 3, 4]  # 10 // 3, and one more for the first
    assert set().union(*owned) == set(tenants) and sum(len(o) for o in owned) == 10


def test_the_tenants_of_a_dead_process_go_to_the_others_when_its_leases_lapse(database: Database) -> None:
    tenants = [f"t{i}" for i in range(6)]
    a, b = _leases(database, tenants, "a", ttl=30), _leases(database, tenants, "b", ttl=30)
    for _ in range(2):
        a.cycle(), b.cycle()
    assert len(b.owned()) == 3
    b.cycle()
    # b dies: it renews nothing more. Let its heartbeat and leases lapse (as if 30 s passed).
    with database.shared_session() as s:
        past = s.execute(select(WorkerHeartbeat.expires_at).where(WorkerHeartbeat.owner == "b")).scalar_one()
        s.execute(update(TimerLease).where(TimerLease.owner == "b").values(expires_at=past.replace(year=2000)))
        s.execute(update(WorkerHeartbeat).where(WorkerHeartbeat.owner == "b").values(expires_at=past.replace(year=2000)))
    assert a.cycle() == frozenset(tenants)


def test_a_paused_process_whose_leases_were_taken_drops_those_tenants(database: Database) -> None:
    tenants = ["t1", "t2"]
    a = _leases(database, tenants, "a")
    a.cycle()
    with database.shared_session() as s:  # while a was stopped, b took t1 over
        s.execute(update(TimerLease).where(TimerLease.tenant_slug == "t1").values(owner="b", token="x" * 32))
    assert a.cycle() == frozenset({"t2"}) and not a.owns("t1")


def test_new_and_removed_tenants_follow_the_tenant_list(database: Database) -> None:
    tenants = ["t1", "t2"]
    a = _leases(database, tenants, "a")
    a.cycle()
    tenants[:] = ["t2", "t3"]
    assert a.cycle() == frozenset({"t2", "t3"})
    with database.shared_session() as s:
        assert sorted(s.execute(select(TimerLease.tenant_slug)).scalars()) == ["t2", "t3"]


def test_stop_hands_the_leases_back_at_once(database: Database) -> None:
    tenants = ["t1", "t2"]
    a, b = _leases(database, tenants, "a"), _leases(database, tenants, "b")
    a.start()
    assert a.owned() == tenants
    a.stop()
    assert b.cycle() == frozenset(tenants)


def test_a_new_tenant_is_picked_up_by_the_renewal_thread(database: Database, make_tenant: Callable[..., str]) -> None:
    from almanac.tenants.registry import list_slugs

    first = make_tenant()
    gained: list[str] = []
    a = TenantLeases(database, lambda: list_slugs(database), ttl_s=0.6, owner="a", on_gained=gained.append)
    a.start()
    try:
        assert a.owned() == [first]
        second = make_tenant()
        deadline = time.monotonic() + 5
        while second not in gained and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(gained) == sorted([first, second])
    finally:
        a.stop()


def test_sqlite_has_one_machine_and_every_process_owns_every_tenant(sqlite_settings) -> None:
    db = Database(sqlite_settings)
    try:
        leases = TenantLeases(db, lambda: ["x", "y"], owner="a")
        leases.start()
        assert leases.owned() == ["x", "y"] and leases.owns("z")
        leases.stop()
    finally:
        db.dispose()
