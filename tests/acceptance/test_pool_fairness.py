"""The sandbox pool's workers and spares are shared between tenants (SPEC section 11): runs of one
tenant waiting on `fetch` cannot take the slots another tenant's due work needs, and that work's
deadline counts from when its script starts.

The real scheduler, the real sandbox pool (one process and three spares, so that one tenant could
fill it) and a real local server that never answers. The bounds are generous: the tenant that
waits on the network holds its runs for 8 s, the other's job must start well before that.

On the embedded default (SQLite), where one process claims for every tenant and the pool decides
who runs. On PostgreSQL the claim across tenants comes first: a process holding a waiting tenant's
claims claims nothing more until they end, which no sharing of the pool can change.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest

from almanac.worker import build_services
from tests.support.httpservers import LocalServer

pytestmark = pytest.mark.timing

WAIT_MS = 8000  # the waiting tenant's runs hold their worker this long
STARTS_WITHIN_S = 4.0  # the other tenant's job starts this soon after it falls due (a loaded box included)


@pytest.fixture
def settings(sqlite_settings: Any) -> Any:
    return sqlite_settings.model_copy(update={"allow_private_targets": True, "sandbox_processes": 1,
                                       "sandbox_spare_workers": 3})


@pytest.fixture
def services(settings: Any, database: Any) -> Iterator[Any]:
    built = build_services(settings)  # the real clock: start lags are measured on it
    yield built
    built.scheduler.stop(WAIT_MS / 1000 + 10)
    built.runner.close()
    built.db.dispose()


@pytest.fixture
def server() -> Iterator[LocalServer]:
    s = LocalServer()
    yield s
    s.close()


def _script(client: Any, source: str, timeout_ms: int) -> int:
    answer = client.post("/api/v1/scripts", json={"name": "s", "source": source, "timeout_ms": timeout_ms})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def _hangs(server: LocalServer) -> int:
    return sum(1 for seen in server.seen if seen["path"] == "/hang")


def test_runs_waiting_on_fetch_leave_the_pool_to_another_tenants_due_job(
        api: Any, services: Any, server: LocalServer) -> None:
    waiter, other = api(), api()
    for client in (waiter, other):
        assert client.put("/api/v1/egress", json={"hosts": [f"127.0.0.1:{server.port}"]}).status_code == 200
    waits = _script(waiter, f"export default async () => (await fetch('{server.url('/hang')}')).status;", WAIT_MS)
    # The other tenant's script fetches too: a deadline counted from before its script started would
    # already be spent while it waited for a worker.
    quick = _script(other, f"export default async () => (await fetch('{server.url('/json')}')).json();", 1000)
    now = datetime.now(timezone.utc).isoformat()
    jobs = [{"key": f"w{i}", "script_id": waits, "run_at": now} for i in range(12)]
    assert waiter.post("/api/v1/jobs/batch", json={"jobs": jobs}).status_code == 200
    services.scheduler.start()
    ends = time.monotonic() + 30
    while _hangs(server) < 2 and time.monotonic() < ends:  # the waiting tenant's runs have taken workers
        time.sleep(0.05)
    assert _hangs(server) >= 2
    time.sleep(1.0)  # and whatever more of the pool they can take

    due = datetime.now(timezone.utc)
    assert other.put("/api/v1/jobs/j", json={"script_id": quick, "run_at": due.isoformat()}).status_code == 201
    services.scheduler.wake(other.tenant)
    run = None
    ends = time.monotonic() + WAIT_MS / 1000 + 20
    while time.monotonic() < ends:
        items = other.get("/api/v1/runs", params={"job_key": "j"}).json()["items"]
        if items and items[0]["status"] not in ("pending", "running"):
            run = items[0]
            break
        time.sleep(0.1)
    assert run is not None, (other.get("/api/v1/runs").json(), other.get("/api/v1/jobs/j").json(),
                             len(waiter.get("/api/v1/runs", params={"limit": 100}).json()["items"]))
    lag = (datetime.fromisoformat(run["started_at"]) - datetime.fromisoformat(run["scheduled_for"])).total_seconds()
    assert run["status"] == "succeeded" and run["output"] == {"rates": {"USD": 1.08}}, run
    assert lag < STARTS_WITHIN_S, (lag, _hangs(server))
