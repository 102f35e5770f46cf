"""A quota holds exactly under concurrent requests (SPEC section 3), on both backends.

Each test sets a small quota, then lets many threads send their requests at the same moment
(a barrier), each through its own client of the one app, against the real database. However the
requests interleave, the tenant ends with exactly the quota's worth of rows: every request that
fitted was answered 2xx, every other one 429 `quota_exceeded`, and nothing else.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from almanac.platform.store import quotas
from almanac.platform.store.models import JOB_PENDING, KV, Job, Schedule

THREADS = 12
ROUNDS = 4
RUN_AT = "2026-12-01T09:00:00Z"


def _limit(services: Any, tenant: str, **changes: int) -> None:
    with services.db.shared_session() as session:
        quotas.set_quotas(session, tenant, changes, services.clock.now())


def _script(client: Any) -> int:
    answer = client.post("/api/v1/scripts", json={"name": "s", "source": "export default () => 1;"})
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


def _at_once(app: Any, admin: Any, send: Callable[[Any, int], Any]) -> Counter[int]:
    """`send(client, i)` in THREADS threads released together; the answers' status codes counted."""
    clients = [TestClient(app, raise_server_exceptions=False, headers=dict(admin.headers)) for _ in range(THREADS)]
    gate = threading.Barrier(THREADS)
    codes: list[int] = []
    failures: list[BaseException] = []

    def one(i: int) -> None:
        try:
            gate.wait(timeout=30)
            answer = send(clients[i], i)
            if answer.status_code == 429:
                assert answer.json()["error"]["code"] == "quota_exceeded", answer.text
            codes.append(answer.status_code)
        except BaseException as exc:  # reported below, in the test's own thread
            failures.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not failures, failures
    return Counter(codes)


def _count(services: Any, tenant: str, query: Any) -> int:
    with services.db.tenant_session(tenant) as s:
        return int(s.execute(query).scalar_one())


def _pending(services: Any, tenant: str) -> int:
    return _count(services, tenant, select(func.count()).select_from(Job).where(Job.state == JOB_PENDING))


def test_single_schedules(app: Any, api: Any, services: Any) -> None:
    admin = api("admin")
    sid = _script(admin)
    _limit(services, admin.tenant, schedules=5)
    codes = _at_once(app, admin, lambda c, i: c.post("/api/v1/schedules", json={
        "name": f"s{i}", "script_id": sid, "rule": "@daily"}))
    assert codes == {201: 5, 429: THREADS - 5}
    assert _count(services, admin.tenant, select(func.count()).select_from(Schedule)) == 5


def test_schedule_batches(app: Any, api: Any, services: Any) -> None:
    admin = api("admin")
    sid = _script(admin)
    _limit(services, admin.tenant, schedules=6)
    codes = _at_once(app, admin, lambda c, i: c.post("/api/v1/schedules/batch", json={"schedules": [
        {"name": f"s{i}-{n}", "script_id": sid, "rule": "@daily"} for n in range(2)]}))
    assert codes == {201: 3, 429: THREADS - 3}
    assert _count(services, admin.tenant, select(func.count()).select_from(Schedule)) == 6


def test_single_job_puts(app: Any, api: Any, services: Any) -> None:
    # A single PUT of a new key is one short statement on PostgreSQL: its window is narrow, so each
    # round lets every thread race for the one place the quota has left.
    admin = api("editor")
    sid = _script(api("admin", tenant=admin.tenant))
    for room in range(1, ROUNDS + 1):
        _limit(services, admin.tenant, pending_jobs=room)
        codes = _at_once(app, admin, lambda c, i, room=room: c.put(f"/api/v1/jobs/r{room}-k{i}",
                                                                   json={"script_id": sid, "run_at": RUN_AT}))
        assert codes == {201: 1, 429: THREADS - 1}, f"with room for {room}"
        assert _pending(services, admin.tenant) == room
    with services.db.tenant_session(admin.tenant) as s:
        assert quotas.use_pending_jobs(s) == ROUNDS  # PostgreSQL's kept count agrees


def test_job_batches(app: Any, api: Any, services: Any) -> None:
    admin = api("admin")
    sid = _script(admin)
    _limit(services, admin.tenant, pending_jobs=6)
    codes = _at_once(app, admin, lambda c, i: c.post("/api/v1/jobs/batch", json={"jobs": [
        {"key": f"k{i}-{n}", "script_id": sid, "run_at": RUN_AT} for n in range(2)]}))
    assert codes == {200: 3, 429: THREADS - 3}
    assert _pending(services, admin.tenant) == 6


def test_kv_keys(app: Any, api: Any, services: Any) -> None:
    admin = api("admin")
    _limit(services, admin.tenant, kv_keys=5)
    codes = _at_once(app, admin, lambda c, i: c.put(f"/api/v1/kv/key{i}", json={"value": i}))
    assert codes == {200: 5, 429: THREADS - 5}
    assert _count(services, admin.tenant, select(func.count()).select_from(KV)) == 5
