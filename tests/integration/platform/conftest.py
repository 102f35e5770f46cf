"""The `world` fixture of the scheduler's integration tests (helpers in scheduler_world.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from almanac.db import Database
from almanac.platform.clock import ManualClock
from almanac.platform.metrics import get_metrics
from almanac.platform.runner import FunctionRunner
from almanac.platform.store_sql import SqlStore
from almanac.platform.timer import Scheduler
from tests.integration.platform.scheduler_world import EveryRules, World


@pytest.fixture
def world(database: Database, make_tenant: Callable[..., str], manual_clock: ManualClock) -> World:
    store = SqlStore(database, EveryRules(), lease_margin_s=120)
    holder: dict[str, World] = {}

    def script(source: str, event: dict[str, Any], caps: Any) -> Any:
        w = holder["w"]
        w.calls.append(event)
        return w.behaviour(source, event, caps) if w.behaviour else {"ok": True}

    scheduler = Scheduler(store, FunctionRunner(script), manual_clock, lambda: [],
                          metrics=get_metrics(CollectorRegistry()))
    w = World(database, make_tenant(), manual_clock, store, scheduler)
    holder["w"] = w
    return w
