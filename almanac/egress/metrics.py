"""Prometheus metrics of scripts' fetches (SPEC section 13): requests by outcome, and their time.
No tenant or host label: the series stay few."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram

from almanac.egress.fetch import OUTCOMES

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_LOCK = threading.Lock()
_BY_REGISTRY: dict[int, FetchMetrics] = {}


@dataclass(frozen=True)
class FetchMetrics:
    requests: Counter
    duration: Histogram

    def observe(self, outcome: str) -> None:
        self.requests.labels(outcome=outcome).inc()


def get_fetch_metrics(registry: CollectorRegistry | None = None) -> FetchMetrics:
    registry = registry or REGISTRY
    with _LOCK:
        found = _BY_REGISTRY.get(id(registry))
        if found is None:
            requests = Counter("almanac_fetch_requests", "Scripts' fetch calls, by outcome (ok: an answer below 400, "
                               "http_error: 400 or above, refused: allowlist, guard or limits, too_large, timeout, "
                               "network_error)", ["outcome"], registry=registry)
            for outcome in OUTCOMES:
                requests.labels(outcome=outcome)  # every series from the start, at 0
            found = _BY_REGISTRY[id(registry)] = FetchMetrics(
                requests=requests,
                duration=Histogram("almanac_fetch_duration_seconds", "Wall time of scripts' fetch calls",
                                   buckets=BUCKETS, registry=registry))
        return found
