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
    """A runner whose pool reports its workers as `SandboxPool.worker_counts` does."""

    def __init__(self, alive: int) -> None:
        self.counts = {"alive": alive, "recycled": 0, "lost": 0}

    def worker_counts(self) -> dict[str, int]:
        return dict(self.counts)


def test_metrics_show_the_sandbox_workers_alive_recycled_and_lost(app, services):
    saved = services.runner
    try:
        services.runner = PoolLike(3)
        before = _scrape(app)
        assert before["almanac_sandbox_workers_alive{}"] == 3
        services.runner.counts.update(alive=2, recycled=4, lost=1)
        after = _scrape(app)
        assert after["almanac_sandbox_workers_alive{}"] == 2
        assert after["almanac_sandbox_workers_recycled_total{}"] == 4
        assert after["almanac_sandbox_workers_lost_total{}"] == 1
        families = {f.name: f.type for f in text_string_to_metric_families(TestClient(app).get("/metrics").text)}
        assert families["almanac_sandbox_workers_alive"] == "gauge"
        assert families["almanac_sandbox_workers_recycled"] == families["almanac_sandbox_workers_lost"] == "counter"
        services.runner = object()  # a runner without a pool (scripts in-process): no workers
        assert _scrape(app)["almanac_sandbox_workers_alive{}"] == 0
    finally:
        services.runner = saved


def test_the_worker_runner_reports_its_pool(tmp_path):
    """The real chain: SandboxPool.worker_counts through the worker's runner, as /metrics reads it."""
    from almanac.worker import SandboxRunner

    runner = SandboxRunner(tmp_path, processes=1)
    try:
        assert runner.worker_counts() == {"alive": 0, "recycled": 0, "lost": 0}  # before its pool starts
        runner.prepare()
        assert runner.worker_counts()["alive"] == 1
    finally:
        runner.close()


def test_every_family_of_section_13_is_exposed_from_the_first_scrape(app):
    """Before any delivery, /metrics already carries the delivery families at zero (a fresh server showed none)."""
    families = {f.name: f for f in text_string_to_metric_families(TestClient(app).get("/metrics").text)}
    for name in ("almanac_runs", "almanac_run_duration_seconds", "almanac_run_start_lag_seconds", "almanac_due_backlog",
                 "almanac_deliveries", "almanac_delivery_latency_seconds", "almanac_sandbox_workers_alive",
                 "almanac_sandbox_workers_recycled", "almanac_sandbox_workers_lost"):
        assert name in families, name
    statuses = {s.labels.get("status") for s in families["almanac_deliveries"].samples if s.name.endswith("_total")}
    assert {"succeeded", "failed", "dead"} <= statuses
