"""Deliveries API: per event, per target, filters, attempt log, retry of a dead delivery, isolation."""

from __future__ import annotations

import random
from typing import Any, Callable

from almanac.delivery.dispatcher import Dispatcher
from almanac.delivery.policy import DeliveryConfig
from almanac.delivery.sending import Job, Result
from tests.integration.delivery.world import World

HOOK = {"kind": "webhook", "name": "h", "url": "https://93.184.216.34/hook", "topics": ["*"]}


class Scripted:
    """A sender that answers from a list (no network: the API is what is under test here)."""

    def __init__(self, *answers: bool) -> None:
        self.answers, self.jobs = list(answers), []

    def send(self, job: Job) -> Result:
        self.jobs.append(job)
        ok = self.answers.pop(0)
        return Result(ok=ok, latency_ms=12, status_code=200 if ok else 500, error=None if ok else "HTTP 500: no")


def _setup(api: Callable[..., Any], database: Any, services: Any, sender: Scripted) -> tuple[Any, World, int]:
    client = api()
    target = client.post("/api/v1/targets", json=HOOK).json()["id"]
    dispatcher = Dispatcher(database, services.clock, services.settings, lambda: [client.tenant], sender=sender,
                            config=DeliveryConfig(max_attempts=1), rng=random.Random(3))
    return client, World(database, client.tenant, services.clock, dispatcher), target


def test_a_dead_delivery_is_shown_and_retried(api: Callable[..., Any], database: Any, services: Any) -> None:
    sender = Scripted(False, True)
    client, world, target = _setup(api, database, services, sender)
    event = world.emit("x", {"n": 1})
    world.step()
    page = client.get("/api/v1/deliveries", params={"status": "dead"}).json()
    [item] = page["items"]
    assert (item["event_id"], item["target_id"], item["attempts"], item["last_status_code"]) == (event, target, 1, 500)
    assert item["event_public_id"].startswith("evt_") and page["next_cursor"] is None
    one = client.get(f"/api/v1/deliveries/{item['id']}").json()
    assert [(a["number"], a["outcome"], a["latency_ms"]) for a in one["attempt_log"]] == [(1, "failed", 12)]
    assert client.get(f"/api/v1/events/{event}/deliveries").json()["items"][0]["id"] == item["id"]
    assert client.get(f"/api/v1/targets/{target}/deliveries").json()["items"][0]["id"] == item["id"]
    retried = client.post(f"/api/v1/deliveries/{item['id']}/retry").json()
    assert retried["status"] == "pending" and retried["attempts"] == 0
    assert client.post(f"/api/v1/deliveries/{item['id']}/retry").status_code == 409
    world.step()
    assert client.get(f"/api/v1/deliveries/{item['id']}").json()["status"] == "succeeded"
    assert [j.payload["id"] for j in sender.jobs][0] == [j.payload["id"] for j in sender.jobs][1]


def test_filters_and_unknown_ids(api: Callable[..., Any], database: Any, services: Any) -> None:
    client, world, target = _setup(api, database, services, Scripted(True))
    world.emit("x", {})
    world.step()
    assert client.get("/api/v1/deliveries", params={"status": "dead"}).json()["items"] == []
    assert len(client.get("/api/v1/deliveries", params={"target_id": target}).json()["items"]) == 1
    assert client.get("/api/v1/deliveries", params={"status": "nonsense"}).status_code == 422
    for path in ("/api/v1/deliveries/999", "/api/v1/events/999/deliveries", "/api/v1/targets/999/deliveries"):
        assert client.get(path).json()["error"]["code"] == "not_found"
    assert client.post("/api/v1/deliveries/999/retry").status_code == 404


def test_another_tenant_sees_nothing(api: Callable[..., Any], database: Any, services: Any) -> None:
    client, world, target = _setup(api, database, services, Scripted(False))
    event = world.emit("x", {})
    world.step()
    delivery = client.get("/api/v1/deliveries").json()["items"][0]["id"]
    other = api()
    assert other.get("/api/v1/deliveries").json()["items"] == []
    for path in (f"/api/v1/deliveries/{delivery}", f"/api/v1/events/{event}/deliveries",
                 f"/api/v1/targets/{target}/deliveries"):
        assert other.get(path).status_code == 404
    assert other.post(f"/api/v1/deliveries/{delivery}/retry").status_code == 404
    assert api(role="editor").get("/api/v1/deliveries").status_code == 403


def test_retry_wakes_the_dispatcher_after_the_retry_is_committed(api: Callable[..., Any], database: Any,
                                                                services: Any) -> None:
    client, world, _target = _setup(api, database, services, Scripted(False))
    world.emit("x", {})
    world.step()
    [item] = client.get("/api/v1/deliveries", params={"status": "dead"}).json()["items"]
    seen: list[str] = []

    class Spy:
        def wake(self, slug: str | None = None) -> None:  # what a dispatcher woken now would find
            seen.append(client.get(f"/api/v1/deliveries/{item['id']}").json()["status"])

    services.extras["dispatcher"] = Spy()
    try:
        assert client.post(f"/api/v1/deliveries/{item['id']}/retry").status_code == 200
    finally:
        services.extras.pop("dispatcher")
    assert seen == ["pending"]
