"""/metrics carries deliveries by status and their latency, read back with prometheus-client's own parser."""

from __future__ import annotations

import random

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from almanac.delivery.dispatcher import Dispatcher
from almanac.delivery.policy import DeliveryConfig
from almanac.delivery.sending import Job, Result
from tests.integration.delivery.world import World


class Answers:
    """A sender answering from a list (ok?, latency ms): no network."""

    def __init__(self, *answers: tuple[bool, int]) -> None:
        self.answers = list(answers)

    def send(self, job: Job) -> Result:
        ok, latency = self.answers.pop(0)
        return Result(ok=ok, latency_ms=latency, status_code=200 if ok else 500, error=None if ok else "HTTP 500")


def _scrape(app) -> dict[str, float]:
    text = TestClient(app).get("/metrics").text
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()) if k != "le")
            if "le" in sample.labels and sample.labels["le"] != "0.05":
                continue
            samples[f"{sample.name}{{{labels}}}" + (" le=0.05" if "le" in sample.labels else "")] = sample.value
    return samples


def test_metrics_count_deliveries_by_status_and_their_latency(app, services, database, make_tenant):
    tenant = make_tenant()
    world = World(database, tenant, services.clock, Dispatcher(
        database, services.clock, services.settings, lambda: [tenant], sender=Answers((True, 20), (False, 300)),
        config=DeliveryConfig(max_attempts=1), rng=random.Random(1)))
    world.add_target(kind="webhook", name="hook", url="https://93.184.216.34/h", topics=["*"])
    before = _scrape(app)
    world.emit("a.one", {})
    world.step()
    world.emit("a.two", {})
    world.step()
    after = _scrape(app)

    def delta(key: str) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("almanac_deliveries_total{status=succeeded}") == 1
    assert delta("almanac_deliveries_total{status=dead}") == 1
    assert delta("almanac_delivery_latency_seconds_count{}") == 2
    assert abs(delta("almanac_delivery_latency_seconds_sum{}") - 0.32) < 1e-9
    assert delta("almanac_delivery_latency_seconds_bucket{} le=0.05") == 1  # 20 ms is under 50 ms, 300 ms is not
    families = {f.name: f.type for f in text_string_to_metric_families(TestClient(app).get("/metrics").text)}
    assert families["almanac_deliveries"] == "counter" and families["almanac_delivery_latency_seconds"] == "histogram"


class PoolLike:
    def __init__(self, pids: list[int]) -> None:
        self.pids = pids

    def worker_pids(self) -> list[int]:
        return list(self.pids)


def test_metrics_show_the_sandbox_workers_alive(app, services):
    saved = services.runner
    try:
        services.runner = PoolLike([101, 102, 103])
        assert _scrape(app)["almanac_sandbox_workers_alive{}"] == 3
        services.runner.pids.pop()
        assert _scrape(app)["almanac_sandbox_workers_alive{}"] == 2
        services.runner = object()  # a runner without a pool: none alive
        assert _scrape(app)["almanac_sandbox_workers_alive{}"] == 0
    finally:
        services.runner = saved
