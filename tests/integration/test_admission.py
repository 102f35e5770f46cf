"""One admission path for every run (SPEC section 11): runs started by a request (the API's run now,
the pages' Run now, Run again and Try with payload) are checked and counted against the daily
budgets, share the timer's slots, and wait without holding a thread, a bounded number per tenant."""

from __future__ import annotations

import threading
import time
from typing import Any

from almanac.platform.store import quotas
from almanac.web import run_now
from tests.integration.web_views.conftest import Browser
from tests.support.inprocess import sandbox_cache, services  # noqa: F401  (fixtures: scripts run in-process)

NOOP = "export default async function (event) { return {payload: event.payload}; }"
EMITS = 'export default async function () { almanac.emit("said", {hi: 1}); almanac.emit("said", {hi: 2}); return 1; }'


def _limit(services: Any, tenant: str, **changes: int) -> None:
    with services.db.shared_session() as session:
        quotas.set_quotas(session, tenant, changes, services.clock.now())


def _script(client: Any, source: str = NOOP, name: str = "s", timeout_ms: int = 20_000) -> int:
    answer = client.post("/api/v1/scripts", json={"name": name, "source": source, "timeout_ms": timeout_ms})
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def test_run_now_counts_against_the_daily_runs_and_refuses_past_them(api: Any, services: Any) -> None:
    admin = api("admin")
    sid = _script(admin)
    _limit(services, admin.tenant, runs_per_day=3)
    answers = [admin.post(f"/api/v1/scripts/{sid}/run", json={"payload": i}) for i in range(4)]
    assert [a.status_code for a in answers] == [200, 200, 200, 429], [a.text for a in answers]
    refused = answers[3].json()["error"]
    assert refused["code"] == "quota_exceeded" and "3 runs a day" in refused["message"]
    runs = admin.get("/api/v1/runs").json()["items"]
    assert [(r["trigger"], r["status"]) for r in runs] == [("manual", "succeeded")] * 3  # the refused one: nothing
    assert admin.get("/api/v1/tenant").json()["quotas"]["runs_per_day"]["used"] == 3
    # A job due now finds the budget used up by the manual runs: recorded skipped.
    assert admin.put("/api/v1/jobs/j", json={"script_id": sid, "run_at": services.clock.now().isoformat()}).status_code == 201
    services.scheduler.tick(admin.tenant)
    job_run = admin.get("/api/v1/runs", params={"job_key": "j"}).json()["items"][0]
    assert job_run["status"] == "skipped" and "3 runs a day" in job_run["reason"]


def test_run_now_past_the_cpu_budget_is_refused(api: Any, services: Any) -> None:
    admin = api("admin")
    sid = _script(admin)
    _limit(services, admin.tenant, cpu_seconds_per_day=0)
    answer = admin.post(f"/api/v1/scripts/{sid}/run", json={})
    assert answer.status_code == 429 and answer.json()["error"]["code"] == "quota_exceeded", answer.text
    assert "CPU-seconds" in answer.json()["error"]["message"]
    assert admin.get("/api/v1/runs").json()["items"] == []


def test_run_now_answers_the_events_it_emitted_as_the_run_shows_them(api: Any) -> None:
    admin = api("admin")
    sid = _script(admin, EMITS)
    run = admin.post(f"/api/v1/scripts/{sid}/run", json={}).json()
    assert len(run["events"]) == 2
    assert run["events"] == admin.get(f"/api/v1/runs/{run['id']}").json()["events"]


def _page_runs(app: Any, services: Any, make_tenant: Any) -> tuple[Browser, Any, int]:
    tenant = make_tenant()
    b = Browser(app)
    assert b.login(f"admin@{tenant}.test").status_code == 303
    b.get("/")
    from fastapi.testclient import TestClient

    from almanac.tenants import auth, registry

    with services.db.shared_session() as session:
        token = auth.create_token(session, registry.get_tenant(session, tenant), "t", "admin", now=services.clock.now())[1]
    client = TestClient(app, raise_server_exceptions=False)
    client.headers["Authorization"] = f"Bearer {token}"
    client.tenant = tenant  # type: ignore[attr-defined]
    return b, client, _script(client)


def test_trials_and_page_runs_count_against_the_daily_runs(app: Any, services: Any, make_tenant: Any) -> None:
    b, client, sid = _page_runs(app, services, make_tenant)
    schedule = client.post("/api/v1/schedules", json={"name": "d", "script_id": sid, "rule": "@daily"}).json()["id"]
    _limit(services, client.tenant, runs_per_day=3)
    htmx = {"HX-Request": "true"}
    assert b.post(f"/schedules/{schedule}/try", {"payload": "1"}, headers=htmx).status_code == 200
    assert b.post(f"/scripts/{sid}/run", {"payload": "2"}, headers=htmx).status_code == 200
    assert b.post(f"/schedules/{schedule}/try", {"payload": "3"}, headers=htmx).status_code == 200
    refused = b.post(f"/schedules/{schedule}/try", {"payload": "4"}, headers=htmx)
    assert refused.status_code == 429 and "3 runs a day" in refused.text
    assert b.post(f"/scripts/{sid}/run", {"payload": "5"}, headers=htmx).status_code == 429
    triggers = sorted(r["trigger"] for r in client.get("/api/v1/runs").json()["items"])
    assert triggers == ["manual", "trial", "trial"]
    assert client.get("/api/v1/tenant").json()["quotas"]["runs_per_day"]["used"] == 3


def test_run_again_of_a_job_counts_against_the_daily_runs(app: Any, services: Any, make_tenant: Any) -> None:
    b, client, sid = _page_runs(app, services, make_tenant)
    assert client.put("/api/v1/jobs/j", json={"script_id": sid, "run_at": services.clock.now().isoformat(),
                                              "payload": 7}).status_code == 201
    services.scheduler.tick(client.tenant)
    first = client.get("/api/v1/runs").json()["items"][0]["id"]
    _limit(services, client.tenant, runs_per_day=2)
    again = b.post(f"/runs/{first}/again")
    assert again.status_code == 303, again.text
    assert b.post(f"/runs/{first}/again").status_code == 429
    runs = client.get("/api/v1/runs").json()["items"]
    assert [(r["trigger"], r["output"]) for r in runs] == [("manual", {"payload": 7}), ("job", {"payload": 7})]


def test_a_tenant_has_a_bounded_number_of_run_now_requests_waiting(api: Any, services: Any) -> None:
    slow, quick = api("admin"), api("admin")
    waits = _script(slow, "export default () => { const t = Date.now(); while (Date.now() - t < 2500) {} return 1; }",
                    timeout_ms=10_000)
    services.admission.waiting_max = 2
    answers: list[Any] = []
    threads = [threading.Thread(target=lambda: answers.append(slow.post(f"/api/v1/scripts/{waits}/run")))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while len(slow.get("/api/v1/runs", params={"status": "running"}).json()["items"]) < 2:
        assert time.monotonic() < deadline, "the two runs did not start"
        time.sleep(0.02)
    started = time.monotonic()
    refused = slow.post(f"/api/v1/scripts/{waits}/run")
    assert time.monotonic() - started < 2  # refused at once, not after a wait
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited", refused.text
    assert 1 <= int(refused.headers["Retry-After"]) <= 10
    # Another tenant has its own waiting places.
    assert quick.post(f"/api/v1/scripts/{_script(quick)}/run", json={"payload": 1}).status_code == 200
    for thread in threads:
        thread.join(30)
    assert [a.status_code for a in answers] == [200, 200]
    assert slow.post(f"/api/v1/scripts/{_script(slow, name='n')}/run").status_code == 200  # room again
    assert len(slow.get("/api/v1/runs").json()["items"]) == 3  # the refused one recorded nothing


def test_run_now_is_declared_with_its_429s(app: Any) -> None:
    operation = app.openapi()["paths"]["/api/v1/scripts/{script_id}/run"]["post"]
    declared = operation["responses"]["429"]
    assert "rate_limited" in declared["description"] and "Retry-After" in declared.get("headers", {})


def test_a_run_now_past_the_bound_is_refused_before_the_app_routes_it(api: Any, services: Any, monkeypatch: Any) -> None:
    """A flood of refused run-now calls costs the server as little as the refusal: it never reaches
    the route (its dependencies, its body parsing), so the event loop stays free for everyone else."""
    from almanac.web.api import scripts

    admin, viewer_of_other = api("admin"), api("viewer")
    sid = _script(admin)
    reached: list[int] = []
    real = scripts.run_now.run_and_wait

    async def counted(*args: Any, **kwargs: Any) -> Any:
        reached.append(1)
        return await real(*args, **kwargs)

    monkeypatch.setattr(scripts.run_now, "run_and_wait", counted)
    assert admin.post(f"/api/v1/scripts/{sid}/run", json={"payload": 1}).status_code == 200  # fills the token cache
    places = [services.admission.hold(admin.tenant, 60_000) for _ in range(services.admission.waiting_max)]
    reached.clear()
    asked = time.monotonic()
    refused = admin.post(f"/api/v1/scripts/{sid}/run", json={"payload": 2})
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited", refused.text
    assert 1 <= int(refused.headers["Retry-After"]) <= 60 and reached == []
    # Answered after a pause (asleep, not holding a thread): a client looping on its refusals makes a
    # few calls a second, not thousands that the other tenants' calls wait behind.
    assert time.monotonic() - asked >= run_now.REFUSAL_PAUSE_S
    # What the route answers first still comes first: a malformed body, an id that names nothing, a role.
    assert admin.post(f"/api/v1/scripts/{sid}/run", json={"payload": 1, "x": 2}).status_code == 422
    assert admin.post("/api/v1/scripts/99999999999999999999999/run", json={}).status_code == 404
    assert viewer_of_other.post(f"/api/v1/scripts/{sid}/run", json={}).status_code == 403
    for place in places:
        services.admission.leave(admin.tenant, place)
    assert admin.post(f"/api/v1/scripts/{sid}/run", json={"payload": 3}).status_code == 200
