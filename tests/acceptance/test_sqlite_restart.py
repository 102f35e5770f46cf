"""The embedded default: a worker killed mid-run, started again, retries the run at once.

On SQLite a process holds a lock file of its own (`platform.liveness`); the kernel drops the
lock with the process however it dies, so the next process to look (here: the same worker
started again) finds the file unlocked and makes the dead process's running attempts due.
Before, they waited out their lease (the script's timeout plus `ALMANAC_LEASE_MARGIN_S`).
"""

from __future__ import annotations

import os
import signal
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from almanac.db import Database
from almanac.platform.store import planning
from almanac.platform.store.models import Run, Script, ScriptVersion
from almanac.tenants import registry
from tests.support.proc import ALMANAC, almanac, cli_env
from tests.support.wait import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timing]

SLOW = "export default function () { const t = Date.now(); while (Date.now() - t < 1500) {} return 'slow'; }"


def _worker(env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("w") as out:
        return subprocess.Popen([ALMANAC, "worker"], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _runs(db: Database) -> list[Any]:
    with db.tenant_session("t1") as s:
        return list(s.execute(select(Run.attempt, Run.status, Run.reason, Run.started_at).order_by(Run.attempt)))


def test_a_worker_killed_mid_run_and_started_again_retries_the_run_at_once(sqlite_settings: Any) -> None:
    env = cli_env(sqlite_settings, ALMANAC_LOG_LEVEL="info", ALMANAC_LEASE_MARGIN_S="60",
                  ALMANAC_SANDBOX_PROCESSES="1")
    assert almanac("migrate", env=env).returncode == 0
    db = Database(sqlite_settings)
    now = datetime.now(timezone.utc)
    registry.create_tenant(db, "t1", admin_email="a@t1.test", admin_password=None, name="t1",
                           min_interval_seconds=1, now=now)
    with db.tenant_session("t1") as s:
        script = Script(name="slow", current_version=1, timeout_ms=10_000, memory_mb=32, created_at=now,
                        updated_at=now)
        s.add(script)
        s.flush()
        s.add(ScriptVersion(script_id=script.id, version=1, source=SLOW, created_at=now))
        planning.upsert_job(s, "slow-1", dict(script_id=script.id, run_at=now + timedelta(seconds=1), payload="null",
                                              expire_after_s=None, max_attempts=3, priority=0), now=now)
    var = Path(sqlite_settings.var_dir)
    first = _worker(env, var / "worker-1.log")
    second = None
    try:
        wait_until(lambda: [r for r in _runs(db) if r.status == "running"], timeout=60, what="the run's start")
        os.killpg(first.pid, signal.SIGKILL)  # the worker and its sandbox process, mid-run
        first.wait()
        second = _worker(env, var / "worker-2.log")
        log = var / "worker-2.log"
        # The timer claims once its sandbox pool runs scripts (seconds on a busy machine); the dead
        # worker's run was made due before, when the worker started.
        wait_until(lambda: "worker.sandbox_pool_ready" in log.read_text(), timeout=60,
                   what="the second worker's sandbox pool", interval=0.01)
        restarted = datetime.now(timezone.utc)
        wait_until(lambda: any(r.status == "succeeded" for r in _runs(db)), timeout=30,
                   what="the retry (the lease would end 70 s after the claim)")
        runs = _runs(db)
        assert [(r.attempt, r.status) for r in runs] == [(1, "failed"), (2, "succeeded")], runs
        assert "lease lapsed" in runs[0].reason
        lag = (runs[1].started_at - restarted).total_seconds()
        print(f"\nthe killed worker's run started again {lag:.2f} s after the new worker could run scripts")
        assert lag < 5, lag
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        db.dispose()
