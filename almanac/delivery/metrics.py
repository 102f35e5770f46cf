"""Prometheus metrics of event delivery (SPEC section 13): attempts by the status they left the
delivery in, and the receiving end's latency. No tenant or target label: the series stay few."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_LOCK = threading.Lock()
_BY_REGISTRY: dict[int, DeliveryMetrics] = {}


@dataclass(frozen=True)
class DeliveryMetrics:
    attempts: Counter
    latency: Histogram

    def observe(self, status: str | None, latency_ms: int | None) -> None:
        """One finished attempt: `status` is what it left the delivery in (None: fenced, not recorded)."""
        self.attempts.labels(status=status or "fenced").inc()
        if latency_ms is not None and status is not None:
            self.latency.observe(latency_ms / 1000)


def get_delivery_metrics(registry: CollectorRegistry | None = None) -> DeliveryMetrics:
    registry = registry or REGISTRY
    with _LOCK:
        found = _BY_REGISTRY.get(id(registry))
        if found is None:
            found = _BY_REGISTRY[id(registry)] = DeliveryMetrics(
                attempts=Counter("almanac_deliveries", "Delivery attempts, by the status they left the delivery in "
                                 "(succeeded, failed: will retry, dead: gave up, fenced)", ["status"], registry=registry),
                latency=Histogram("almanac_delivery_latency_seconds", "Time the receiving end took to answer",
                                  buckets=LATENCY_BUCKETS, registry=registry),
            )
        return found
