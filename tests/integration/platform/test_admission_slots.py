"""Run slots a waiting tenant holds do not hold back another tenant (SPEC section 11): runs that
wait (on `fetch`, say) and took every slot while their tenant was alone leave room for a tenant
under its share, which starts at once instead of waiting for them to end."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from almanac.db import Database
from almanac.platform.clock import SystemClock
from almanac.platform.runner import FunctionRunner
from almanac.platform.store.sql_store import SqlStore
from almanac.platform.timer.scheduler import Scheduler
from tests.integration.platform.scheduler_world import EveryRules, World


def test_a_quiet_tenant_starts_at_once_while_a_lone_tenants_runs_wait_in_every_slot(
        database: Database, make_tenant: Callable[..., str]) -> None:
    clock = SystemClock()
    store = SqlStore(database, EveryRules(), lease_margin_s=60)
    waiting = World(database, make_tenant(), clock, store, None)  # type: ignore[arg-type]
    quiet = World(database, make_tenant(), clock, store, None)  # type: ignore[arg-type]
    release = threading.Event()
    starts: dict[str, float] = {}

    def script(source: str, event: dict[str, Any], caps: Any) -> None:
        starts[event["jobKey"]] = time.monotonic()
        if event["jobKey"].startswith("waits"):
            release.wait(30)  # a run waiting on a slow server

    now = clock.now()
    script_id = waiting.add_script(timeout_ms=30_000)
    for i in range(8):
        waiting.put_job(f"waits-{i}", script_id, now)
    due_in = 1.0
    quiet.put_job("quiet", quiet.add_script(), now + timedelta(seconds=due_in))
    due_at = time.monotonic() + due_in
    scheduler = Scheduler(store, FunctionRunner(script), clock, lambda: [waiting.tenant, quiet.tenant], workers=4)
    scheduler.start()
    try:
        deadline = time.monotonic() + 10
        while "quiet" not in starts and time.monotonic() < deadline:
            time.sleep(0.02)
        waited = sum(1 for key in starts if key.startswith("waits"))
    finally:
        release.set()
        scheduler.stop()
    assert waited == 4  # the lone tenant took every slot, and its runs wait
    # Within a few seconds on a busy box; without room beside them, only when they end (10 s and more).
    assert "quiet" in starts and starts["quiet"] - due_at < 3.0, starts
