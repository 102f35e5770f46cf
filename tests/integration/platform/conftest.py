"""The `world` fixture of the scheduler's integration tests (helpers in scheduler_world.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from almanac.db import Database
from almanac.platform.clock import ManualClock
from almanac.platform.timer.metrics import get_metrics
from almanac.platform.runner import FunctionRunner
from almanac.platform.store.sql_store import SqlStore
from almanac.platform.timer.scheduler import Scheduler
from almanac.platform.timer.scheduler import across_tenants
from tests.integration.platform.scheduler_world import EveryRules, World


@pytest.fixture
def world_path() -> str:
    """Which claim the `world` fixture's scheduler uses: "per_tenant" (SQLite's path) by default."""
    return "per_tenant"


@pytest.fixture(params=["per_tenant", "across"])
def on_both_paths(request: pytest.FixtureRequest) -> str:
    """`world_path = on_both_paths` in a module runs its `world` tests on both claims: the
    per-tenant one, and the claim across tenants through the shared due index, the path
    `almanac worker` runs on PostgreSQL (skipped on SQLite)."""
    return str(request.param)


@pytest.fixture
def world(world_path: str, database: Database, make_tenant: Callable[..., str],
          manual_clock: ManualClock) -> World:
    """A scheduler over one tenant, claiming by `world_path`."""
    path = world_path
    if path == "across" and database.is_sqlite:
        pytest.skip("the claim across tenants is PostgreSQL's")
    store = SqlStore(database, EveryRules(), lease_margin_s=120)
    holder: dict[str, World] = {}

    def script(source: str, event: dict[str, Any], caps: Any) -> Any:
        w = holder["w"]
        w.calls.append(event)
        return w.behaviour(source, event, caps) if w.behaviour else {"ok": True}

    timer = across_tenants if path == "across" else Scheduler
    scheduler = timer(store, FunctionRunner(script), manual_clock, lambda: [],
                      metrics=get_metrics(CollectorRegistry()))
    w = World(database, make_tenant(), manual_clock, store, scheduler)
    holder["w"] = w
    return w
