"""A process holds no more claims than it can start soon (PostgreSQL, the cross-tenant timer).

Claims held in memory are runs another process could have started: with 600 two-second jobs
over 3 workers of 2 sandbox processes, each worker held 78 claims while running 2. The bound
(`decisions.pacing.held_claims`): the runs it has slots for now, plus what its processes start within
`HELD_WAIT_S`; before any run has ended, one waiting run per process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from almanac.db import Database
from almanac.platform.clock import SystemClock
from almanac.platform.store.models import RUNNING, Occurrence
from almanac.platform.runner import FunctionRunner
from almanac.platform.store.sql_store import SqlStore
from almanac.platform.timer.scheduler import across_tenants
from tests.integration.platform.scheduler_world import EveryRules
from tests.integration.platform_pg.test_due_index import _jobs, _script

pytestmark = pytest.mark.postgres


class Gated(FunctionRunner):
    """Two processes' worth of runs that block until the gate opens; counts the runs under way."""

    processes = 2

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.started = 0
        self._lock = threading.Lock()
        super().__init__(self._run)

    def _run(self, source: str, event: dict[str, Any], caps: Any) -> int:
        with self._lock:
            self.started += 1
        self.gate.wait(30)
        return 1


def _claimed_in_db(database: Database, slug: str) -> int:
    with database.tenant_session(slug) as s:
        return s.execute(select(func.count()).select_from(Occurrence).where(Occurrence.status == RUNNING)).scalar_one()


def test_a_process_with_two_sandbox_processes_holds_a_few_claims_not_its_whole_in_flight_budget(
        database: Database, make_tenant: Callable[..., str], now: datetime) -> None:
    slug = make_tenant("bound")
    _jobs(database, slug, _script(database, slug, now), now - timedelta(seconds=1), 60)
    runner = Gated()
    # workers=20: the sandbox runner's in-flight budget for 2 processes (`SandboxRunner.runs_in_flight`).
    timer = across_tenants(SqlStore(database, EveryRules()), runner, SystemClock(), lambda: [slug],
                                 workers=20, parallel=2)
    timer.start()
    try:
        deadline = time.monotonic() + 10
        while runner.started < 2:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.5)  # every claimer has had its passes
        held = timer.outstanding().claimed
        assert held <= 4, held  # the 2 running, and one waiting for each process
        assert _claimed_in_db(database, slug) == held
    finally:
        runner.gate.set()
        timer.stop()
    assert _claimed_in_db(database, slug) == 0
